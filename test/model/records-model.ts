/**
 * A randomized model-based test of the Data API's records: fast-check generates sequences of creates, updates (PATCH with and without If-Match),
 * deletes and batches with awkward values (`-0`, numbers beyond 2^53 and up to 1e308, `1e400` written
 * in the JSON text, astral and private-use characters, prototype-named keys, nesting up to and past
 * the body's depth limit) on one typed and one free collection. Each command runs against the real
 * API over HTTP and against a plain in-memory model of docs/data/reference.md; after every step every
 * record is read back, lists are compared (every sort, random filters and `q`, paged with random
 * limits to the end of `next_cursor`) and each answer's status and error code must be the model's
 * (never a 500). A run ends with an exhaustive list check: every filter op on every indexed field,
 * both directions.
 *
 * The runner is engine-neutral: records.model.test.ts drives it through the local server on the
 * embedded engine, records.model.aws.test.ts through the same server on the AWS adapters (dynalite
 * and s3rver). `FC_SEED` (and `FC_PATH`) replay a run; `FC_RUNS` / `FC_COMMANDS` override the size.
 *
 * Orders the model implements (docs/data/reference.md and lambdas/data/schema.ts, "byte order of the
 * encoding is the order of the values (strings by UTF-8 bytes, numbers numerically)"): a list sorted
 * by an indexed field holds the records that have the field, by value (text by UTF-8 bytes, numbers
 * numerically with -0 = 0, false before true), ties by id; descending is the exact reverse. `id` order
 * is the ids' byte order; `created_at` / `updated_at` order is the times' (as the write answers gave
 * them), ties by id. A list with a sort is in that order, whatever it filters on (filters on
 * other indexed fields sift the records the sort's index reads); a filtered list without one is driven
 * (and sorted) by its first `eq` condition, else its first `in`, else its first range condition, in
 * query-string order.
 */
import fc from 'fast-check';

// ---------------------------------------------------------------------------------------------
// Values as sent: a tree whose numbers may be written as raw JSON text, whose objects keep their
// entries in order (a JS object could not carry `__proto__` as an ordinary key).
// ---------------------------------------------------------------------------------------------

/** A number written in the body exactly as `text` (`-0`, `1e400`, `9007199254740993`); the server reads JSON.parse(text). */
export class RawNum {
  constructor(readonly text: string) {}
  toString() {
    return `raw(${this.text})`;
  }
}
/** A JSON object as sent, its entries in order. */
export class Obj {
  constructor(readonly entries: [string, Sent][]) {}
  toString() {
    return toText(this);
  }
}
/**
 * The value field `field` of the n-th typed record holds when the command runs (so that unique values
 * collide, and a batch can take a value an earlier op frees); `fallback` when there is none.
 */
export class Ref {
  constructor(readonly n: number, readonly field: string, readonly fallback: Sent) {}
  toString() {
    return `ref(#${this.n}.${this.field})`;
  }
}
export type Sent = null | boolean | string | number | RawNum | Ref | Sent[] | Obj;

/** The JSON text of a value as sent (`-0` stays `-0`, ±Infinity is written `±1e400`). */
export function toText(v: Sent): string {
  if (v === null) return 'null';
  if (v instanceof RawNum) return v.text;
  if (v instanceof Ref) return `"${v}"`;
  if (v instanceof Obj) return `{${v.entries.map(([k, x]) => `${JSON.stringify(k)}:${toText(x)}`).join(',')}}`;
  if (Array.isArray(v)) return `[${v.map(toText).join(',')}]`;
  if (typeof v === 'number') {
    if (Object.is(v, -0)) return '-0';
    if (v === Infinity) return '1e400';
    if (v === -Infinity) return '-1e400';
    return String(v);
  }
  return JSON.stringify(v);
}

/** What the server's JSON.parse makes of a value as sent. */
const parsed = (v: Sent): unknown => JSON.parse(toText(v));

/** A canonical text of a JSON value: object keys sorted, `-0` written 0. Own keys only, so `__proto__` counts as data. */
export function canon(v: unknown): string {
  if (v === null || typeof v !== 'object') return JSON.stringify(v) ?? 'undefined';
  if (Array.isArray(v)) return `[${v.map(canon).join(',')}]`;
  const o = v as Record<string, unknown>;
  return `{${Object.keys(o)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canon(Object.getOwnPropertyDescriptor(o, k)!.value)}`)
    .join(',')}}`;
}

/** Nesting depth of a parsed value: scalars 0, `[]` and `{}` 1. */
function depth(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  let d = 0;
  for (const c of Array.isArray(v) ? v : Object.values(v)) d = Math.max(d, depth(c));
  return d + 1;
}

function allFinite(v: unknown): boolean {
  if (typeof v === 'number') return Number.isFinite(v);
  if (v === null || typeof v !== 'object') return true;
  return (Array.isArray(v) ? v : Object.values(v)).every(allFinite);
}

// ---------------------------------------------------------------------------------------------
// The two collections
// ---------------------------------------------------------------------------------------------

type FType = 'text' | 'integer' | 'number' | 'bool' | 'json';
interface FDef {
  name: string;
  type: FType;
  unique?: boolean;
  indexed?: boolean;
  fulltext?: boolean;
}
export const TYPED = 'typed';
export const FREE = 'free';
type Coll = typeof TYPED | typeof FREE;

export const TYPED_FIELDS: FDef[] = [
  { name: 'email', type: 'text', unique: true, indexed: true },
  { name: 'tag', type: 'text', indexed: true },
  { name: 'rank', type: 'integer', unique: true },
  { name: 'count', type: 'integer', indexed: true },
  { name: 'score', type: 'number', indexed: true },
  { name: 'body', type: 'text', fulltext: true },
  { name: 'meta', type: 'json' },
  { name: 'flag', type: 'bool', indexed: true },
];
const FIELD = new Map(TYPED_FIELDS.map((f) => [f.name, f]));
const INDEXED = TYPED_FIELDS.filter((f) => f.indexed);
const UNIQUE = TYPED_FIELDS.filter((f) => f.unique);
const RESERVED = ['id', 'version', 'created_at', 'updated_at'];
const MAX_DEPTH = 64;
const MAX_KEY_BYTES = 900;
const MAX_LIMIT = 100;
const DEFAULT_LIMIT = 20;
const MAX_IN = 20;

/** Ids the commands pick from (so creates collide and updates miss); generated `rec_` ids join the model. */
export const ID_POOL = ['r0', 'r1', 'r2', 'r3', 'r4', 'r5'];

// ---------------------------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------------------------

interface MRec {
  id: string;
  version: number;
  created_at?: string;
  /** As the last write's answer gave it (lists sorted by updated_at are compared in its order). */
  updated_at?: string;
  values: Map<string, unknown>;
}
type Store = Map<string, MRec>;
export class Model {
  readonly colls: Record<Coll, Store> = { typed: new Map(), free: new Map() };
  clone(): Model {
    const m = new Model();
    for (const c of [TYPED, FREE] as Coll[]) for (const [id, r] of this.colls[c]) m.colls[c].set(id, { ...r, values: new Map(r.values) });
    return m;
  }
}

interface Err {
  code: string;
  param?: string;
}
const STATUS: Record<string, number> = {
  invalid_body: 400,
  invalid_value: 400,
  invalid_query: 400,
  unknown_field: 400,
  reserved_field: 400,
  field_too_large: 400,
  record_not_found: 404,
  already_exists: 409,
  unique_violation: 409,
  version_conflict: 409,
};

const utf8 = (s: string) => Buffer.from(s, 'utf8');
const compareIds = (a: string, b: string) => Buffer.compare(utf8(a), utf8(b));

/** The documented order of two (normalized) values of a field's type. */
function compareValues(type: FType, a: unknown, b: unknown): number {
  if (type === 'text') return Buffer.compare(utf8(a as string), utf8(b as string));
  if (type === 'bool') return Number(a) - Number(b);
  return (a as number) < (b as number) ? -1 : (a as number) > (b as number) ? 1 : 0;
}
const keyBytes = (f: FDef, v: unknown) => (f.type === 'text' ? Buffer.byteLength((v as string).replaceAll('\u0001', '\u0001\u0002')) : 16);
const sameKey = (f: FDef, a: unknown, b: unknown) => compareValues(f.type, a, b) === 0;

/** A typed field's value checked and normalized, or undefined when invalid. */
function normalizeTyped(f: FDef, v: unknown): { ok: true; value: unknown } | { ok: false } {
  switch (f.type) {
    case 'text':
      return typeof v === 'string' ? { ok: true, value: v } : { ok: false };
    case 'integer':
      return typeof v === 'number' && Number.isSafeInteger(v) ? { ok: true, value: v + 0 } : { ok: false };
    case 'number':
      return typeof v === 'number' && Number.isFinite(v) ? { ok: true, value: v + 0 } : { ok: false };
    case 'bool':
      return typeof v === 'boolean' ? { ok: true, value: v } : { ok: false };
    case 'json':
      return allFinite(v) ? { ok: true, value: v } : { ok: false };
  }
}

/** A request's fields checked and merged over `base` (null unsets); every applicable 400. */
function checkData(coll: Coll, data: [string, unknown][], base: Map<string, unknown>): { errors: Err[]; values: Map<string, unknown> } {
  const errors: Err[] = [];
  const values = new Map(base);
  for (const [k, v] of data) {
    if (RESERVED.includes(k) || k.startsWith('_')) {
      errors.push({ code: 'reserved_field', param: k });
      continue;
    }
    const f = coll === TYPED ? FIELD.get(k) : undefined;
    if (coll === TYPED && !f) {
      errors.push({ code: 'unknown_field', param: k });
      continue;
    }
    if (v === null) {
      values.delete(k);
      continue;
    }
    const n = f ? normalizeTyped(f, v) : allFinite(v) ? { ok: true as const, value: v } : { ok: false as const };
    if (!n.ok) errors.push({ code: 'invalid_value', param: k });
    else values.set(k, n.value);
  }
  if (!errors.length && coll === TYPED) {
    for (const f of TYPED_FIELDS) {
      if ((f.unique || f.indexed) && values.has(f.name) && keyBytes(f, values.get(f.name)) > MAX_KEY_BYTES) errors.push({ code: 'field_too_large', param: f.name });
    }
  }
  return { errors, values };
}

/** Unique fields of `values` whose key another record of the store holds. */
function uniqueClashes(store: Store, id: string, values: Map<string, unknown>, old?: Map<string, unknown>): Err[] {
  const out: Err[] = [];
  for (const f of UNIQUE) {
    if (!values.has(f.name)) continue;
    const v = values.get(f.name);
    if (old?.has(f.name) && sameKey(f, old.get(f.name), v)) continue;
    for (const r of store.values()) {
      if (r.id !== id && r.values.has(f.name) && sameKey(f, r.values.get(f.name), v)) {
        out.push({ code: 'unique_violation', param: f.name });
        break;
      }
    }
  }
  return out;
}

export type Write =
  | { op: 'create'; collection: Coll; id?: string; data: Obj }
  | { op: 'update'; collection: Coll; id: string; data: Obj; version: VersionMode }
  | { op: 'delete'; collection: Coll; id: string; version: VersionMode };
/** No version, the record's own, or another (`+1`: wrong but plausible). */
export type VersionMode = 'none' | 'right' | 'wrong';
/** An id as generated: one of the pool, or the n-th record the model holds when the command runs (any id, `rec_` ones too). */
export type IdSpec = string | { existing: number };
export type WriteSpec =
  | { op: 'create'; collection: Coll; id?: string; data: Obj }
  | { op: 'update'; collection: Coll; id: IdSpec; data: Obj; version: VersionMode }
  | { op: 'delete'; collection: Coll; id: IdSpec; version: VersionMode };

function resolveId(m: Model, c: Coll, id: IdSpec): string {
  if (typeof id === 'string') return id;
  const ids = [...m.colls[c].keys()].sort(compareIds);
  return ids.length ? ids[id.existing % ids.length] : ID_POOL[id.existing % ID_POOL.length];
}
function resolveRefs(m: Model, data: Obj): Obj {
  return new Obj(
    data.entries.map(([k, v]) => {
      if (!(v instanceof Ref)) return [k, v];
      const ids = [...m.colls.typed.keys()].sort(compareIds);
      const held = ids.length ? m.colls.typed.get(ids[v.n % ids.length])!.values : undefined;
      return [k, held?.has(v.field) ? (held.get(v.field) as Sent) : v.fallback];
    }),
  );
}
/** The write a spec names in the model's present state. */
export function resolve(m: Model, w: WriteSpec): Write {
  if (w.op === 'create') return { ...w, data: resolveRefs(m, w.data) };
  const id = resolveId(m, w.collection, w.id);
  return w.op === 'update' ? { ...w, id, data: resolveRefs(m, w.data) } : { ...w, id };
}
const specId = (id: IdSpec | undefined) => (id === undefined ? '(new)' : typeof id === 'string' ? id : `#${id.existing}`);
function describeSpec(w: WriteSpec): string {
  const v = 'version' in w ? ` [version ${w.version}]` : '';
  if (w.op === 'delete') return `delete ${w.collection}/${specId(w.id)}${v}`;
  return `${w.op} ${w.collection}/${specId(w.id)}${v} ${toText(w.data).slice(0, 300)}`;
}

/** The version a write names: undefined for none, the current one, or one that is not it. */
function versionFor(store: Store, w: Write): number | undefined {
  if (w.op === 'create' || w.version === 'none') return undefined;
  const cur = store.get(w.id)?.version ?? 1;
  return w.version === 'right' ? cur : cur + 1;
}

interface Applied {
  /** The errors any one of which may answer (empty: the write succeeds). */
  errors: Err[];
  /** The unique keys (field + canonical value) it freed and took; for the in-order batch check. */
  freed: string[];
  taken: string[];
}

const ukey = (f: FDef, v: unknown) => `${f.name}\u0000${canon(v)}`;

/**
 * One write applied to the model as the reference describes it (in place when it succeeds). Which
 * of several applicable errors answers is not documented, except that conflicts with stored data
 * (unique) are only found for valid data; so any applicable error of the first tier that has one is
 * accepted: (existence, version, 400s on the body), then unique.
 */
function applyWrite(m: Model, w: Write, version: number | undefined, genId: string): Applied {
  const store = m.colls[w.collection];
  const none: Applied = { errors: [], freed: [], taken: [] };
  const data = w.op === 'delete' ? [] : Object.entries(parsed(w.data) as Record<string, unknown>);
  if (w.op === 'create') {
    const id = w.id ?? genId;
    const { errors, values } = checkData(w.collection, data, new Map());
    if (w.id !== undefined && store.has(w.id)) errors.push({ code: 'already_exists', param: 'id' });
    if (errors.length) return { ...none, errors };
    const clashes = w.collection === TYPED ? uniqueClashes(store, id, values) : [];
    if (clashes.length) return { ...none, errors: clashes };
    store.set(id, { id, version: 1, values });
    return { ...none, taken: UNIQUE.filter((f) => values.has(f.name)).map((f) => ukey(f, values.get(f.name))) };
  }
  const errors: Err[] = [];
  const cur = store.get(w.id);
  if (!cur) errors.push({ code: 'record_not_found' });
  else if (version !== undefined && version !== cur.version) errors.push({ code: 'version_conflict' });
  if (w.op === 'delete') {
    if (errors.length) return { ...none, errors };
    store.delete(w.id);
    return { ...none, freed: UNIQUE.filter((f) => cur!.values.has(f.name)).map((f) => ukey(f, cur!.values.get(f.name))) };
  }
  const checked = checkData(w.collection, data, cur?.values ?? new Map());
  errors.push(...checked.errors);
  if (errors.length) return { ...none, errors };
  const values = checked.values;
  const clashes = w.collection === TYPED ? uniqueClashes(store, w.id, values, cur!.values) : [];
  if (clashes.length) return { ...none, errors: clashes };
  const changed = UNIQUE.filter((f) => (cur!.values.has(f.name) ? !values.has(f.name) || !sameKey(f, cur!.values.get(f.name), values.get(f.name)) : values.has(f.name)));
  store.set(w.id, { ...cur!, version: cur!.version + 1, values });
  return {
    errors: [],
    freed: changed.filter((f) => cur!.values.has(f.name)).map((f) => ukey(f, cur!.values.get(f.name))),
    taken: changed.filter((f) => values.has(f.name)).map((f) => ukey(f, values.get(f.name))),
  };
}

/** The record as the API shows it, without its times. */
function modelView(r: MRec): string {
  const o: Record<string, unknown> = {};
  for (const [k, v] of r.values) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  o.id = r.id;
  o.version = r.version;
  return canon(o);
}
function serverView(rec: any): string {
  const { created_at: _c, updated_at: _u, ...rest } = rec;
  return canon(rest);
}

// ---------------------------------------------------------------------------------------------
// List queries
// ---------------------------------------------------------------------------------------------

type Op = 'eq' | 'eqShort' | 'gt' | 'gte' | 'lt' | 'lte' | 'in';
export interface Cond {
  field: string;
  op: Op;
  raw: string;
}
/** `driver`: sort by whatever field drives the list (`-` when desc); `name`: this sort parameter as given. */
export type SortSpec = { kind: 'none' } | { kind: 'driver'; desc: boolean } | { kind: 'name'; name: string };
export interface Query {
  collection: Coll;
  conds: Cond[];
  sort: SortSpec;
  q?: string;
  /** undefined: no limit parameter (20). */
  limit?: number;
}

function queryString(qy: Query): string {
  const parts: string[] = [];
  for (const c of qy.conds) parts.push(`filter[${c.field}]${c.op === 'eqShort' ? '' : `[${c.op}]`}=${encodeURIComponent(c.raw)}`);
  const sort = sortParam(qy);
  if (sort !== undefined) parts.push(`sort=${encodeURIComponent(sort)}`);
  if (qy.q !== undefined) parts.push(`q=${encodeURIComponent(qy.q)}`);
  if (qy.limit !== undefined) parts.push(`limit=${qy.limit}`);
  return parts.join('&');
}

function driverOf<C extends { op: Op }>(conds: C[]): C | undefined {
  const eq = (c: C) => c.op === 'eq' || c.op === 'eqShort';
  return conds.find(eq) ?? conds.find((c) => c.op === 'in') ?? conds.find((c) => !eq(c) && c.op !== 'in');
}

function sortParam(qy: Query): string | undefined {
  if (qy.sort.kind === 'none') return undefined;
  if (qy.sort.kind === 'name') return qy.sort.name;
  const d = driverOf(qy.conds);
  const name = d ? (d as Cond).field : 'id';
  return qy.sort.desc ? `-${name}` : name;
}

/** A query-string value read as the field's type (reference: "Values are read as the field's type"). */
function parseRaw(f: FDef, raw: string): { ok: true; value: unknown } | { ok: false } {
  if (f.type === 'text') return { ok: true, value: raw };
  if (f.type === 'bool') return raw === 'true' ? { ok: true, value: true } : raw === 'false' ? { ok: true, value: false } : { ok: false };
  if (raw.trim() === '') return { ok: false };
  return normalizeTyped(f, Number(raw));
}

const tokenize = (text: string) => text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);

type Time = 'created_at' | 'updated_at';

/** The ids a list query yields, in order, or the error it is. */
export function expectedList(m: Model, qy: Query): { error: Err } | { ids: string[] } {
  const bad = { error: { code: 'invalid_query' } };
  const store = m.colls[qy.collection];
  const fields = qy.collection === TYPED ? FIELD : new Map<string, FDef>();
  const sort = sortParam(qy);
  if (qy.limit !== undefined && (qy.limit < 1 || qy.limit > MAX_LIMIT)) return bad;
  let sortField: FDef | 'id' | Time = 'id';
  let desc = false;
  if (sort !== undefined) {
    desc = sort.startsWith('-');
    const name = desc ? sort.slice(1) : sort;
    if (name === 'created_at' || name === 'updated_at') sortField = name;
    else if (name !== 'id') {
      const f = fields.get(name);
      if (!f?.indexed) return bad;
      sortField = f;
    }
  }
  if (qy.q !== undefined && ![...fields.values()].some((f) => f.fulltext)) return bad;
  const conds: { field: FDef; op: Op; values: unknown[] }[] = [];
  for (const c of qy.conds) {
    const f = fields.get(c.field);
    if (!f?.indexed) return bad;
    const parts = c.op === 'in' ? c.raw.split(',') : [c.raw];
    if (parts.length > MAX_IN) return bad;
    const values: unknown[] = [];
    for (const p of parts) {
      const v = parseRaw(f, p);
      if (!v.ok) return bad;
      values.push(v.value);
    }
    conds.push({ field: f, op: c.op, values });
  }
  const driver = driverOf(conds);
  if (driver && sort === undefined) sortField = driver.field;
  let recs = [...store.values()];
  if (sortField === 'created_at' || sortField === 'updated_at') {
    // Times are ISO 8601 with milliseconds, one length: string order is time order; ties by id.
    const t = sortField;
    recs.sort((a, b) => (a[t]! < b[t]! ? -1 : a[t]! > b[t]! ? 1 : compareIds(a.id, b.id)));
  } else if (sortField !== 'id') {
    const f = sortField;
    recs = recs.filter((r) => r.values.has(f.name));
    recs.sort((a, b) => compareValues(f.type, a.values.get(f.name), b.values.get(f.name)) || compareIds(a.id, b.id));
  } else recs.sort((a, b) => compareIds(a.id, b.id));
  if (desc) recs.reverse();
  const matches = (c: (typeof conds)[number], r: MRec) => {
    if (!r.values.has(c.field.name)) return false;
    const cmp = (x: unknown) => compareValues(c.field.type, r.values.get(c.field.name), x);
    switch (c.op) {
      case 'eq':
      case 'eqShort':
        return cmp(c.values[0]) === 0;
      case 'in':
        return c.values.some((x) => cmp(x) === 0);
      case 'gt':
        return cmp(c.values[0]) > 0;
      case 'gte':
        return cmp(c.values[0]) >= 0;
      case 'lt':
        return cmp(c.values[0]) < 0;
      case 'lte':
        return cmp(c.values[0]) <= 0;
    }
  };
  recs = recs.filter((r) => conds.every((c) => matches(c, r)));
  const terms = qy.q === undefined ? [] : tokenize(qy.q);
  if (terms.length) {
    const textFields = [...fields.values()].filter((f) => f.fulltext).map((f) => f.name);
    recs = recs.filter((r) => {
      const words = tokenize(textFields.map((f) => r.values.get(f)).filter((t) => typeof t === 'string').join(' '));
      return terms.every((t) => words.some((w) => w.startsWith(t)));
    });
  }
  return { ids: recs.map((r) => r.id) };
}

// ---------------------------------------------------------------------------------------------
// The system under test
// ---------------------------------------------------------------------------------------------

export interface Answer {
  status: number;
  etag: string | null;
  body: any;
}
/** One Data API call: `path` under `/v1/databases/{db}`, body as JSON text. */
export type Call = (method: string, path: string, body?: string, headers?: Record<string, string>) => Promise<Answer>;

export function httpCaller(dataUrl: string, secretKey: string, database: string): Call {
  return async (method, path, body, headers = {}) => {
    const res = await fetch(`${dataUrl}/v1/databases/${database}${path}`, {
      method,
      headers: { authorization: `Bearer ${secretKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
      body,
    });
    const text = await res.text();
    return { status: res.status, etag: res.headers.get('etag'), body: text ? JSON.parse(text) : undefined };
  };
}

export class ModelFailure extends Error {
  override name = 'ModelFailure';
}
function fail(what: string, detail: unknown): never {
  throw new ModelFailure(`${what}\n${typeof detail === 'string' ? detail : JSON.stringify(detail, null, 1)?.slice(0, 3000)}`);
}

const records = (c: Coll) => `/collections/${c}/records`;

/** A probe: what the check after a command reads besides every record. */
export interface Probe {
  limits: (number | undefined)[];
  dirs: boolean[];
  queries: Query[];
}

export interface RunOptions {
  /** How many sort keys (id and the indexed fields, asc or desc) each check lists in full. */
  sortsPerStep: number;
  /** Reads (gets, lists) run this many at a time. */
  concurrency: number;
  /** Values per indexed field the final check filters around (1 to 3). */
  pivots: number;
}

export class Real {
  steps = 0;
  requests = 0;
  /** Answers by kind ("create 201", "update 409 unique_violation", "list 200 nonempty"...), for the log. */
  readonly stats = new Map<string, number>();
  count(key: string) {
    this.stats.set(key, (this.stats.get(key) ?? 0) + 1);
  }
  private genCount = 0;
  constructor(private readonly callRaw: Call, readonly opts: RunOptions, readonly history: string[] = []) {}

  async call(method: string, path: string, body?: string, headers?: Record<string, string>): Promise<Answer> {
    this.requests++;
    const a = await this.callRaw(method, path, body, headers);
    if (a.status >= 500) fail(`${method} ${path} answered ${a.status}`, { body: body?.slice(0, 1500), headers, answer: a.body });
    return a;
  }

  async setup() {
    const db = await this.call('PUT', '');
    if (db.status !== 201) fail('database PUT', db);
    const t = await this.call('PUT', `/collections/${TYPED}`, JSON.stringify({ fields: TYPED_FIELDS }));
    if (t.status !== 201) fail('typed collection PUT', t);
    const f = await this.call('PUT', `/collections/${FREE}`, JSON.stringify({ mode: 'free' }));
    if (f.status !== 201) fail('free collection PUT', f);
  }

  private expectError(what: string, a: Answer, errors: Err[]) {
    const code = a.body?.error?.code;
    const param = a.body?.error?.param;
    const ok = errors.some((e) => STATUS[e.code] === a.status && e.code === code && (e.param === undefined || e.param === param));
    if (!ok) fail(`${what}: expected one of ${errors.map((e) => `${STATUS[e.code]} ${e.code}${e.param !== undefined ? `(${e.param})` : ''}`).join(' | ')}, got ${a.status}`, a.body);
  }

  private expectRecord(what: string, got: any, r: MRec) {
    if (serverView(got) !== modelView(r)) fail(`${what}: record differs from the model`, `server: ${serverView(got)}\nmodel:  ${modelView(r)}`);
    if (r.created_at !== undefined && got.created_at !== r.created_at) fail(`${what}: created_at changed`, { got: got.created_at, model: r.created_at });
    if (r.updated_at !== undefined && got.updated_at !== r.updated_at) fail(`${what}: updated_at is not the last write's`, { got: got.updated_at, model: r.updated_at });
    if (typeof got.created_at !== 'string' || typeof got.updated_at !== 'string') fail(`${what}: times missing`, got);
  }

  private expectEtag(what: string, a: Answer, version: number) {
    if (a.etag !== `"${version}"`) fail(`${what}: ETag ${a.etag}, expected "${version}"`, a.body);
  }

  /** A create, update or delete through its own route. */
  async single(m: Model, w: Write, fmt: number) {
    const store = m.colls[w.collection];
    const version = versionFor(store, w);
    const what = describeWrite(w, version);
    const body = w.op === 'delete' ? undefined : w.op === 'create' ? toText(w.id === undefined ? w.data : new Obj([['id', w.id], ...w.data.entries]))
      : toText(w.data);
    const headers: Record<string, string> = version === undefined ? {} : { 'if-match': [`${version}`, `"${version}"`, `W/"${version}"`][fmt % 3] };
    const path = w.op === 'create' ? records(w.collection) : `${records(w.collection)}/${w.id}`;
    const a = await this.call(w.op === 'create' ? 'POST' : w.op === 'update' ? 'PATCH' : 'DELETE', path, body, headers);
    this.count(`${w.op} ${a.status} ${a.body?.error?.code ?? ''}`.trim());
    if (body !== undefined && depth(JSON.parse(body)) > MAX_DEPTH) return this.expectError(what, a, [{ code: 'invalid_body' }]);
    const next = m.clone();
    const genId = `\u0000gen${this.genCount++}`;
    const r = applyWrite(next, w, version, genId);
    if (r.errors.length) return this.expectError(what, a, r.errors);
    const status = w.op === 'create' ? 201 : w.op === 'update' ? 200 : 204;
    if (a.status !== status) fail(`${what}: expected ${status}, got ${a.status}`, a.body);
    if (w.op === 'delete') {
      m.colls[w.collection].delete(w.id);
      return;
    }
    let id = w.op === 'create' ? (w.id ?? genId) : w.id;
    const rec = next.colls[w.collection].get(id)!;
    if (w.op === 'create' && w.id === undefined) {
      if (!/^rec_[0-9A-Za-z]+$/.test(a.body?.id) || store.has(a.body.id)) fail(`${what}: generated id ${a.body?.id}`, a.body);
      id = a.body.id;
      rec.id = id;
    }
    rec.created_at = w.op === 'create' ? a.body.created_at : rec.created_at;
    rec.updated_at = a.body.updated_at;
    this.expectRecord(what, a.body, rec);
    this.expectEtag(what, a, rec.version);
    store.set(id, rec);
  }

  async batch(m: Model, ws: Write[]) {
    const versions = ws.map((w) => versionFor(m.colls[w.collection], w));
    const ops = ws.map((w, i) => {
      const parts = [`"op":"${w.op}"`, `"collection":"${w.collection}"`];
      if (w.op !== 'create' || w.id !== undefined) parts.push(`"id":${JSON.stringify(w.id)}`);
      if (versions[i] !== undefined) parts.push(`"version":${versions[i]}`);
      if (w.op !== 'delete') parts.push(`"data":${toText(w.data)}`);
      return `{${parts.join(',')}}`;
    });
    const body = `{"ops":[${ops.join(',')}]}`;
    const what = `batch [${ws.map((w, i) => describeWrite(w, versions[i])).join('; ')}]`;
    const a = await this.call('POST', '/batch', body);
    this.count(`batch ${a.status} ${a.body?.error?.code ?? ''}`.trim());
    if (depth(JSON.parse(body)) > MAX_DEPTH) return this.expectError(what, a, [{ code: 'invalid_body' }]);
    const seen = new Set<string>();
    for (const w of ws) {
      if (w.id === undefined) continue;
      const k = `${w.collection}/${w.id}`;
      if (seen.has(k)) return this.expectError(`${what} (two ops on ${k})`, a, [{ code: 'invalid_body' }]);
      seen.add(k);
    }
    // In order: each op sees the state the ones before it left; the first failing op is the answer.
    const next = m.clone();
    const freed = new Set<string>();
    let reusesFreed = false;
    const genIds: string[] = [];
    let failed: Err[] | undefined;
    for (let i = 0; i < ws.length; i++) {
      genIds.push(`\u0000gen${this.genCount++}`);
      const r = applyWrite(next, ws[i], versions[i], genIds[i]);
      if (r.taken.some((k) => freed.has(k))) reusesFreed = true;
      if (r.errors.length) {
        failed = r.errors;
        break;
      }
      r.freed.forEach((k) => freed.add(k));
    }
    // A value an earlier op frees is free for a later op (4952e8c made batches in order).
    if (reusesFreed) this.count(`batch takes a unique value an earlier op freed: ${a.status}`);
    if (failed) return this.expectError(what, a, failed);
    if (a.status !== 200 || !Array.isArray(a.body?.results) || a.body.results.length !== ws.length) fail(`${what}: expected 200 with ${ws.length} results, got ${a.status}`, a.body);
    ws.forEach((w, i) => {
      const res = a.body.results[i];
      if (w.op === 'delete') {
        if (canon(res) !== canon({ id: w.id, deleted: true })) fail(`${what}: result ${i}`, res);
        return;
      }
      let id = w.id ?? genIds[i];
      const rec = next.colls[w.collection].get(id)!;
      if (w.op === 'create' && w.id === undefined) {
        if (!/^rec_[0-9A-Za-z]+$/.test(res?.id)) fail(`${what}: generated id ${res?.id}`, res);
        next.colls[w.collection].delete(id);
        id = res.id;
        rec.id = id;
        next.colls[w.collection].set(id, rec);
      }
      if (w.op === 'create') rec.created_at = res.created_at;
      rec.updated_at = res.updated_at;
      this.expectRecord(`${what}: result ${i}`, res, rec);
    });
    m.colls.typed = next.colls.typed;
    m.colls.free = next.colls.free;
  }

  /** Every record read back, every pool id that is not one answering 404; lists by the probe. */
  async verify(m: Model, probe: Probe) {
    this.steps++;
    const tasks: (() => Promise<void>)[] = [];
    for (const c of [TYPED, FREE] as Coll[]) {
      for (const r of m.colls[c].values()) {
        tasks.push(async () => {
          const a = await this.call('GET', `${records(c)}/${r.id}`);
          if (a.status !== 200) fail(`GET ${c}/${r.id}: expected 200, got ${a.status}`, a.body);
          this.expectRecord(`GET ${c}/${r.id}`, a.body, r);
          this.expectEtag(`GET ${c}/${r.id}`, a, r.version);
        });
      }
      for (const id of ID_POOL) {
        if (m.colls[c].has(id)) continue;
        tasks.push(async () => this.expectError(`GET ${c}/${id} (not in the model)`, await this.call('GET', `${records(c)}/${id}`), [{ code: 'record_not_found' }]));
      }
    }
    const sorts: Query[] = [
      { collection: FREE as Coll, conds: [], sort: { kind: 'name', name: probe.dirs[0] ? '-id' : 'id' }, limit: probe.limits[0] },
      ...['id', ...INDEXED.map((f) => f.name)].map((name, i): Query => ({
        collection: TYPED,
        conds: [],
        sort: { kind: 'name', name: probe.dirs[i + 1] ? `-${name}` : name } as SortSpec,
        limit: probe.limits[i + 1],
      })),
    ];
    // A rotating window of the sort keys, so that every one is listed every few steps.
    const start = this.steps % sorts.length;
    for (let i = 0; i < Math.min(this.opts.sortsPerStep, sorts.length); i++) tasks.push(() => this.list(m, sorts[(start + i) % sorts.length]));
    for (const qy of probe.queries) tasks.push(() => this.list(m, qy));
    await this.all(tasks);
  }

  /** Runs reads a few at a time (they change nothing); the first failure is thrown once all have ended. */
  private async all(tasks: (() => Promise<void>)[]) {
    let next = 0;
    let failure: unknown;
    const worker = async () => {
      while (next < tasks.length && failure === undefined) {
        try {
          await tasks[next++]();
        } catch (error) {
          failure ??= error;
        }
      }
    };
    await Promise.all(Array.from({ length: this.opts.concurrency }, worker));
    if (failure !== undefined) throw failure;
  }

  /** Lists a query to the end of its cursor and compares the concatenation with the model. */
  async list(m: Model, qy: Query) {
    const expected = expectedList(m, qy);
    const qs = queryString(qy);
    const what = `GET ${qy.collection}?${decodeURIComponentSafe(qs)}`;
    const out: any[] = [];
    let cursor: string | null = null;
    for (let page = 0; ; page++) {
      const a = await this.call('GET', `${records(qy.collection)}?${qs}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      if ('error' in expected) {
        this.count('list 400');
        return this.expectError(what, a, [expected.error]);
      }
      if (a.status !== 200) fail(`${what}: expected 200, got ${a.status} on page ${page + 1}`, { answer: a.body, cursor, before: out.map((r) => r.id), model: expected.ids, values: describeValues(m, qy, expected.ids) });
      const limit = qy.limit ?? DEFAULT_LIMIT;
      if (a.body.records.length > limit) fail(`${what}: page of ${a.body.records.length} over limit ${limit}`, a.body.records.map((r: any) => r.id));
      out.push(...a.body.records);
      cursor = a.body.next_cursor;
      if (cursor === null) break;
      if (typeof cursor !== 'string' || !cursor) fail(`${what}: next_cursor ${JSON.stringify(cursor)}`, a.body);
      if (page > expected.ids.length + 10) fail(`${what}: cursor keeps going after ${page} pages`, out.map((r) => r.id));
    }
    const got = out.map((r) => r.id);
    this.count(`list ${expected.ids.length ? (qy.conds.length ? 'filtered, nonempty' : 'nonempty') : 'empty'}`);
    if (canon(got) !== canon(expected.ids)) {
      const dupes = got.filter((id, i) => got.indexOf(id) !== i);
      fail(`${what}: ids differ from the model${dupes.length ? ` (duplicates: ${dupes.join(', ')})` : ''}`, { server: got, model: expected.ids, values: describeValues(m, qy, got, expected.ids) });
    }
    out.forEach((r) => this.expectRecord(`${what}: record ${r.id}`, r, m.colls[qy.collection].get(r.id)!));
  }

  /** After a run: every sort both ways, every op on every indexed field around values the records hold (low, middle, high). */
  async exhaustive(m: Model) {
    const qs: Query[] = [];
    for (const name of ['id', '-id', 'created_at', '-created_at', 'updated_at', '-updated_at']) {
      qs.push({ collection: FREE, conds: [], sort: { kind: 'name', name }, limit: 3 });
      // One a page: a page boundary between every two records (an entry listed twice would show).
      qs.push({ collection: TYPED, conds: [], sort: { kind: 'name', name }, limit: name.includes('_at') ? 1 : undefined });
    }
    const ops: Op[] = ['eq', 'eqShort', 'gt', 'gte', 'lt', 'lte', 'in'];
    for (const f of INDEXED) {
      for (const desc of [false, true]) qs.push({ collection: TYPED, conds: [], sort: { kind: 'name', name: desc ? `-${f.name}` : f.name }, limit: 2 });
      const held = [...m.colls.typed.values()].filter((r) => r.values.has(f.name)).map((r) => r.values.get(f.name));
      held.sort((a, b) => compareValues(f.type, a, b));
      const raw = (v: unknown) => String(v);
      const pivots = held.length ? [held[held.length >> 1], held[0], held[held.length - 1]].slice(0, this.opts.pivots) : [f.type === 'text' ? 'a' : f.type === 'bool' ? true : 0];
      [...new Set(pivots.map(raw))].forEach((p, i) => {
        for (const op of ops) {
          if (op === 'in' && p.includes(',')) continue;
          const inRaw = [p, ...held.slice(0, 2).map(raw).filter((x) => !x.includes(','))].join(',');
          const limit = 1 + ((i + ops.indexOf(op)) % 4);
          qs.push({ collection: TYPED, conds: [{ field: f.name, op, raw: op === 'in' ? inRaw : p }], sort: { kind: 'driver', desc: false }, limit });
          qs.push({ collection: TYPED, conds: [{ field: f.name, op, raw: op === 'in' ? inRaw : p }], sort: { kind: 'driver', desc: true }, limit: limit + 1 });
        }
      });
      // Sorted by the next indexed field while filtered on this one (and, with two values held, on a range of a third).
      const next = INDEXED[(INDEXED.indexOf(f) + 1) % INDEXED.length];
      const third = INDEXED[(INDEXED.indexOf(f) + 2) % INDEXED.length];
      const thirdHeld = [...m.colls.typed.values()].filter((r) => r.values.has(third.name)).map((r) => r.values.get(third.name));
      thirdHeld.sort((a, b) => compareValues(third.type, a, b));
      const middle = raw(pivots[0]);
      const sifted: Cond[] = [{ field: f.name, op: f.type === 'bool' ? 'eq' : 'gte', raw: middle }];
      if (thirdHeld.length >= 2) sifted.push({ field: third.name, op: 'lte', raw: raw(thirdHeld[thirdHeld.length >> 1]) });
      qs.push({ collection: TYPED, conds: sifted, sort: { kind: 'name', name: next.name }, limit: 2 });
      qs.push({ collection: TYPED, conds: sifted, sort: { kind: 'name', name: `-${next.name}` }, limit: 5 });
      qs.push({ collection: TYPED, conds: sifted, sort: { kind: 'name', name: INDEXED.indexOf(f) % 2 ? '-updated_at' : 'created_at' }, limit: 3 });
      if (held.length >= 2) {
        const lo = raw(held[0]);
        const hi = raw(held[held.length - 1]);
        qs.push({ collection: TYPED, conds: [{ field: f.name, op: 'gte', raw: lo }, { field: f.name, op: 'lt', raw: hi }], sort: { kind: 'none' }, limit: 2 });
        qs.push({ collection: TYPED, conds: [{ field: f.name, op: 'gt', raw: lo }, { field: f.name, op: 'lte', raw: hi }], sort: { kind: 'driver', desc: true } });
      }
    }
    await this.all(qs.map((q) => () => this.list(m, q)));
  }
}

function decodeURIComponentSafe(s: string) {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function describeValues(m: Model, qy: Query, ...lists: string[][]) {
  const ids = [...new Set(lists.flat())];
  const fields = [...new Set([...qy.conds.map((c) => c.field), ...INDEXED.map((f) => f.name)])];
  return Object.fromEntries(ids.map((id) => [id, qy.collection === TYPED ? Object.fromEntries(fields.map((f) => [f, m.colls.typed.get(id)?.values.get(f)])) : null]));
}

function describeWrite(w: Write, version: number | undefined): string {
  const v = version === undefined ? '' : ` v${version}`;
  if (w.op === 'delete') return `delete ${w.collection}/${w.id}${v}`;
  return `${w.op} ${w.collection}/${w.id ?? '(new)'}${v} ${toText(w.data).slice(0, 300)}`;
}

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

type Cmd = fc.AsyncCommand<Model, Real>;

class SingleCmd implements Cmd {
  constructor(readonly w: WriteSpec, readonly fmt: number, readonly probe: Probe) {}
  check = () => true;
  async run(m: Model, r: Real) {
    await r.single(m, resolve(m, this.w), this.fmt);
    await r.verify(m, this.probe);
  }
  toString() {
    return `${describeSpec(this.w)} ${describeProbe(this.probe)}`;
  }
}

class BatchCmd implements Cmd {
  constructor(readonly ws: WriteSpec[], readonly probe: Probe) {}
  check = () => true;
  async run(m: Model, r: Real) {
    await r.batch(m, this.ws.map((w) => resolve(m, w)));
    await r.verify(m, this.probe);
  }
  toString() {
    return `batch [${this.ws.map(describeSpec).join('; ')}] ${describeProbe(this.probe)}`;
  }
}

const describeProbe = (p: Probe) => (p.queries.length ? `then ${p.queries.map((q) => `${q.collection}?${decodeURIComponentSafe(queryString(q))}`).join(' ')}` : '');

// ---------------------------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------------------------

/**
 * Characters of generated text: ASCII, combining and case-changing letters, CJK, astral characters
 * (which sort after U+E000..U+FFFF by UTF-8 but before them by UTF-16), private use, U+FFFF, the
 * \u0001 that string keys escape, NUL, and characters that mean something in a query string.
 */
const TEXT_CHARS = ['a', 'b', 'z', 'A', 'é', 'ß', 'İ', 'Æ', 'ü', '\u0301', '中', '😀', '𝔘', '\uE000', '\uF8FF', '\uFFFD', '\uFFFF', '\uFF21', ' ', '-', ',', '\u0001', '\u0000', '%', '+', '&', '=', '#', '?'];

/** The few characters of most `tag` values and text filters (ties, prefixes, the key encoding's edge cases). */
const TAG_CHARS = ['a', 'b', '\u0000', '\u0001', '\u0002', 'é', '😀', '\uE000', '\uFFFF'];

/** What a leg leaves out of the generators (each with a KNOWN BUG comment where it is set). */
export interface Narrowing {
  /** Characters no generated string (value, key or query) contains. */
  excludeChars: string[];
  /** Object keys (free fields, keys inside json values) never generated. */
  excludeKeys?: string[];
  /** No empty string as a value of the unique text field. */
  noEmptyUniqueText?: boolean;
}

export function arbitraries(n: Narrowing) {
  const allowed = (s: string) => ![...s].some((c) => n.excludeChars.includes(c));
  /** A pick from `values` that the narrowing allows. */
  const pick = (...values: string[]) => fc.constantFrom(...values.filter(allowed));
  const pickKey = (...keys: string[]) => pick(...keys.filter((k) => !n.excludeKeys?.includes(k)));
  const char = pick(...TEXT_CHARS);
  const tagChar = pick(...TAG_CHARS);
  const text = (maxLength: number) => fc.string({ unit: char, maxLength });

  const specialNumber = fc.constantFrom<Sent>(
    new RawNum('-0'),
    new RawNum('-0.0'),
    new RawNum('1E2'),
    0.5,
    -0.1,
    2 ** 53,
    2 ** 53 + 2,
    -(2 ** 60),
    new RawNum('9007199254740993'),
    1e21,
    1e308,
    -1e308,
    Number.MAX_VALUE,
    5e-324,
    -5e-324,
    1e-7,
    new RawNum('1.0000000000000001'),
  );
  const nonFinite = fc.constantFrom<Sent>(new RawNum('1e400'), new RawNum('-1e400'), new RawNum('1e999'));
  const smallInt = fc.integer({ min: -3, max: 3 });

  // JSON values: valid ones (finite numbers), and trees that hold a non-finite number somewhere.
  const keyArb = pickKey('a', 'b', 'c', '__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', '', '0', '10', 'é', '😀', '\uE000', 'x y');
  const leafOf = (bad: boolean): fc.Arbitrary<Sent> =>
    fc.oneof(
      { arbitrary: fc.constant(null), weight: 1 },
      { arbitrary: fc.boolean(), weight: 1 },
      { arbitrary: smallInt, weight: 2 },
      { arbitrary: specialNumber, weight: 3 },
      { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }), weight: 1 },
      { arbitrary: text(4), weight: 3 },
      { arbitrary: nonFinite, weight: bad ? 2 : 0 },
    );
  const treeOf = (bad: boolean) =>
    fc.letrec<{ tree: Sent }>((tie) => ({
      tree: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        { arbitrary: leafOf(bad), weight: 4 },
        { arbitrary: fc.array(tie('tree'), { maxLength: 3 }), weight: 1 },
        { arbitrary: fc.uniqueArray(fc.tuple(keyArb, tie('tree')), { selector: (e) => e[0], maxLength: 3 }).map((e) => new Obj(e)), weight: 1 },
      ),
    })).tree;
  const json = treeOf(false);
  const jsonMaybeInfinite = treeOf(true);
  /** Nested `d` levels (arrays and objects in turn): at and past the 64-level body limit. */
  const deep = fc.integer({ min: 55, max: 66 }).map((d) => {
    let v: Sent = 'bottom';
    for (let i = 0; i < d; i++) v = i % 2 ? [v] : new Obj([['__proto__', v]]);
    return v;
  });
  const badJson = fc.oneof(jsonMaybeInfinite, nonFinite, deep);

  // Each typed field: values it takes, and values it refuses (or that may be refused).
  const intValid = fc.oneof(
    { arbitrary: smallInt as fc.Arbitrary<Sent>, weight: 6 },
    { arbitrary: fc.constantFrom<Sent>(new RawNum('-0'), new RawNum('-0.0'), new RawNum('1E2'), Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER), weight: 3 },
  );
  const intInvalid = fc.constantFrom<Sent>(2 ** 53, -(2 ** 53), new RawNum('9007199254740993'), 1.5, new RawNum('1e400'), 1e308, '1', true);
  const words = fc.constantFrom('hello', 'Hëllo', 'world', 'ÆON', '😀', 'İstanbul', 'straße', 'x1', 'naïve', '中文');
  const longText = fc.constantFrom('x'.repeat(900), 'x'.repeat(901), '😀'.repeat(225), '😀'.repeat(226), '\u0001'.repeat(450), '\u0001'.repeat(451));
  const typedValues: Record<string, { valid: fc.Arbitrary<Sent>; invalid: fc.Arbitrary<Sent> }> = {
    email: {
      valid: fc.oneof(pick('a', 'b', 'A', 'é', 'e\u0301', '😀', '\uE000', '\uFFFF', '', 'a\u0001', 'a\u0000', '\u0000', 'a,b'), text(4)).filter((v) => !n.noEmptyUniqueText || v !== ''),
      invalid: fc.oneof(longText, fc.constantFrom<Sent>(1, true, ['a'])),
    },
    // A few characters, so that tags tie, and one is often a prefix of another.
    tag: { valid: fc.oneof({ arbitrary: fc.string({ unit: tagChar, maxLength: 2 }), weight: 4 }, { arbitrary: text(3), weight: 1 }), invalid: longText },
    rank: { valid: intValid, invalid: intInvalid },
    count: { valid: intValid, invalid: intInvalid },
    score: {
      valid: fc.oneof({ arbitrary: smallInt as fc.Arbitrary<Sent>, weight: 4 }, { arbitrary: specialNumber, weight: 4 }, { arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) as fc.Arbitrary<Sent>, weight: 2 }),
      invalid: fc.constantFrom<Sent>(new RawNum('1e400'), new RawNum('-1e400'), '0'),
    },
    body: { valid: fc.array(words, { maxLength: 4 }).map((w) => w.join(' ')), invalid: fc.constantFrom<Sent>(5, ['hello']) },
    meta: { valid: json, invalid: badJson },
    flag: { valid: fc.boolean(), invalid: fc.constantFrom<Sent>('true', 0) },
  };
  // Unique fields often take the value another record holds (or held when the batch began).
  const valueOf = (f: FDef): fc.Arbitrary<Sent> =>
    f.unique
      ? fc.oneof({ arbitrary: typedValues[f.name].valid, weight: 3 }, { arbitrary: fc.tuple(fc.nat(50), typedValues[f.name].valid).map(([i, fallback]) => new Ref(i, f.name, fallback)), weight: 1 })
      : typedValues[f.name].valid;
  const validTyped = fc
    .tuple(...TYPED_FIELDS.map((f) => fc.option(fc.oneof({ arbitrary: valueOf(f), weight: 8 }, { arbitrary: fc.constant(null), weight: 1 }), { freq: 2, nil: undefined })))
    .map((vals) => new Obj(TYPED_FIELDS.flatMap((f, i) => (vals[i] === undefined ? [] : [[f.name, vals[i]] as [string, Sent]]))));
  const typedPoison: fc.Arbitrary<[string, Sent]> = fc.oneof(
    { arbitrary: fc.constantFrom(...TYPED_FIELDS.map((f) => f.name)).chain((name) => typedValues[name].invalid.map((v): [string, Sent] => [name, v])), weight: 6 },
    { arbitrary: fc.constantFrom<[string, Sent]>(['nope', 1], ['_x', 1], ['version', 2], ['created_at', 'x'], ['toString', 1], ['__proto__', 1]), weight: 1 },
  );
  const freeKey = pickKey('a', 'b', 'c', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', '0', '10', 'ü', '😀', '\uE000', 'x y', '');
  const validFree = fc
    .uniqueArray(fc.tuple(freeKey, fc.oneof({ arbitrary: json, weight: 6 }, { arbitrary: fc.constant(null), weight: 1 })), { selector: (e) => e[0], maxLength: 4 })
    .map((e) => new Obj(e));
  const freePoison: fc.Arbitrary<[string, Sent]> = fc.oneof(
    fc.tuple(fc.constantFrom('__proto__', '_x', 'version', 'created_at', 'updated_at'), json),
    fc.tuple(freeKey, badJson),
  );
  /** Valid data mostly; else valid data with one poisoned entry (a bad value, an unknown or reserved key). */
  const withPoison = (valid: fc.Arbitrary<Obj>, poison: fc.Arbitrary<[string, Sent]>) =>
    fc.oneof(
      { arbitrary: valid, weight: 7 },
      { arbitrary: fc.tuple(valid, poison, fc.nat()).map(([o, [k, v], at]) => {
          const rest = o.entries.filter((e) => e[0] !== k);
          rest.splice(at % (rest.length + 1), 0, [k, v]);
          return new Obj(rest);
        }), weight: 1 },
    );
  const typedData = withPoison(validTyped, typedPoison);
  const freeData = withPoison(validFree, freePoison);

  const poolId = fc.constantFrom(...ID_POOL);
  const targetId: fc.Arbitrary<IdSpec> = fc.oneof({ arbitrary: poolId, weight: 1 }, { arbitrary: fc.nat(50).map((existing) => ({ existing })), weight: 4 });
  const version = fc.constantFrom<VersionMode>('none', 'none', 'right', 'right', 'wrong');
  const collection = fc.constantFrom<Coll>(TYPED, TYPED, FREE);
  const dataFor = (c: Coll) => (c === TYPED ? typedData : freeData);
  const write: fc.Arbitrary<WriteSpec> = collection.chain((c) =>
    fc.oneof(
      { arbitrary: fc.record({ op: fc.constant('create' as const), collection: fc.constant(c), id: fc.option(poolId, { freq: 6, nil: undefined }), data: dataFor(c) }), weight: 6 },
      { arbitrary: fc.record({ op: fc.constant('update' as const), collection: fc.constant(c), id: targetId, data: dataFor(c), version }), weight: 5 },
      { arbitrary: fc.record({ op: fc.constant('delete' as const), collection: fc.constant(c), id: targetId, version }), weight: 2 },
    ),
  );
  /**
   * A batch where one op frees a unique value (update to a fresh one, or delete) and a later op takes
   * it (create, or update of another record), in either order: applied in order, freeing first works,
   * taking first is a unique_violation.
   */
  const reuse: fc.Arbitrary<WriteSpec[]> = fc
    .record({
      a: fc.nat(50),
      b: fc.nat(50),
      field: fc.constantFrom('email', 'rank'),
      frees: fc.constantFrom('update', 'delete'),
      takes: fc.constantFrom('create', 'update'),
      fresh: fc.tuple(typedValues.email.valid, intValid),
      takerFirst: fc.boolean(),
      version,
    })
    .map(({ a, b, field, frees, takes, fresh, takerFirst, version }) => {
      const value = field === 'email' ? fresh[0] : fresh[1];
      const freeing: WriteSpec =
        frees === 'update'
          ? { op: 'update', collection: TYPED, id: { existing: a }, data: new Obj([[field, value]]), version }
          : { op: 'delete', collection: TYPED, id: { existing: a }, version };
      const taken = new Obj([[field, new Ref(a, field, value)]]);
      const taking: WriteSpec = takes === 'create' ? { op: 'create', collection: TYPED, data: taken } : { op: 'update', collection: TYPED, id: { existing: b }, data: taken, version: 'none' };
      return takerFirst ? [taking, freeing] : [freeing, taking];
    });
  /** Batch ops: mostly on distinct records (two ops on one record are only a 400). */
  const batchWrites = fc.oneof(
    { arbitrary: fc.uniqueArray(write, { selector: (w) => (w.id === undefined ? w : `${w.collection}/${specId(w.id)}`), minLength: 1, maxLength: 5 }), weight: 8 },
    { arbitrary: fc.array(write, { minLength: 2, maxLength: 4 }), weight: 1 },
    { arbitrary: fc.tuple(reuse, fc.array(write, { maxLength: 2 })).map(([r, more]) => [...r, ...more]), weight: 2 },
  );

  // Queries: filters on the indexed fields (rarely on others), sorts matching the driver or not, q.
  const rawFor = (name: string): fc.Arbitrary<string> => {
    const f = FIELD.get(name)!;
    if (f.type === 'text') return fc.oneof(fc.string({ unit: tagChar, maxLength: 2 }), pick('a', 'b', 'é', '😀', '\uE000', '', 'a\u0001', '\u0000'), text(2));
    if (f.type === 'bool') return fc.constantFrom('true', 'false', 'true', 'false', 'yes');
    const nums = fc.oneof(
      { arbitrary: smallInt.map(String), weight: 6 },
      { arbitrary: fc.constantFrom('-0', '1E2', '0.5', '1e308', '-1e308', '5e-324', '9007199254740991', '9007199254740993'), weight: 3 },
      { arbitrary: fc.constantFrom('abc', '', '1e400', '0x'), weight: 1 },
    );
    return nums;
  };
  const inRaw = (name: string) =>
    fc.oneof(
      { arbitrary: fc.array(rawFor(name), { minLength: 1, maxLength: 4 }).map((v) => v.join(',')), weight: 12 },
      { arbitrary: fc.constant(Array.from({ length: 21 }, (_, i) => String(i)).join(',')), weight: 1 },
    );
  const cond: fc.Arbitrary<Cond> = fc
    .oneof({ arbitrary: fc.constantFrom(...INDEXED.map((f) => f.name)), weight: 15 }, { arbitrary: fc.constantFrom('rank', 'body'), weight: 1 })
    .chain((field) =>
      fc.constantFrom<Op>('eq', 'eqShort', 'gt', 'gte', 'lt', 'lte', 'in').chain((op) => (op === 'in' ? inRaw(field) : rawFor(field)).map((raw) => ({ field, op, raw }))),
    );
  const limit = fc.oneof({ arbitrary: fc.integer({ min: 1, max: 4 }), weight: 6 }, { arbitrary: fc.integer({ min: 1, max: 100 }), weight: 2 }, { arbitrary: fc.constant(undefined), weight: 2 }, { arbitrary: fc.constantFrom(0, 101), weight: 1 });
  const sortSpec: fc.Arbitrary<SortSpec> = fc.oneof(
    { arbitrary: fc.constant({ kind: 'none' as const }), weight: 3 },
    { arbitrary: fc.boolean().map((desc) => ({ kind: 'driver' as const, desc })), weight: 4 },
    // Named sorts: with filters on other fields, the sort's index drives and the filters sift.
    {
      arbitrary: fc.constantFrom('id', '-id', 'created_at', '-created_at', 'updated_at', '-updated_at', ...INDEXED.flatMap((f) => [f.name, `-${f.name}`]), 'rank', 'meta').map((name) => ({ kind: 'name' as const, name })),
      weight: 3,
    },
  );
  const typedQuery: fc.Arbitrary<Query> = fc.record({
    collection: fc.constant(TYPED as Coll),
    conds: fc.uniqueArray(cond, { selector: (c) => `${c.field}[${c.op === 'eqShort' ? 'eq' : c.op}]`, maxLength: 3 }),
    sort: sortSpec,
    q: fc.option(fc.oneof(words.map((w) => w.slice(0, 3)), words.map((w) => w.toUpperCase()), fc.constantFrom('', ' ', 'hel wor', '😀', 'i')), { freq: 4, nil: undefined }),
    limit,
  });
  const freeQuery: fc.Arbitrary<Query> = fc.record({
    collection: fc.constant(FREE as Coll),
    conds: fc.oneof({ arbitrary: fc.constant<Cond[]>([]), weight: 8 }, { arbitrary: fc.constant<Cond[]>([{ field: 'a', op: 'eq', raw: '1' }]), weight: 1 }),
    sort: fc.oneof(
      { arbitrary: fc.constantFrom('id', '-id', 'created_at', '-updated_at').map((name): SortSpec => ({ kind: 'name', name })), weight: 4 },
      { arbitrary: fc.constant<SortSpec>({ kind: 'none' }), weight: 2 },
      { arbitrary: fc.constant<SortSpec>({ kind: 'name', name: 'a' }), weight: 1 },
    ),
    q: fc.option(fc.constant('hello'), { freq: 10, nil: undefined }),
    limit,
  });
  const probe: fc.Arbitrary<Probe> = fc.record({
    limits: fc.array(fc.oneof({ arbitrary: fc.integer({ min: 1, max: 5 }), weight: 5 }, { arbitrary: fc.integer({ min: 1, max: 100 }), weight: 1 }, { arbitrary: fc.constant(undefined), weight: 1 }), { minLength: 8, maxLength: 8 }),
    dirs: fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
    queries: fc.array(fc.oneof({ arbitrary: typedQuery, weight: 5 }, { arbitrary: freeQuery, weight: 1 }), { maxLength: 3 }),
  });

  const single: fc.Arbitrary<Cmd> = fc.tuple(write, fc.nat(2), probe).map(([w, fmt, p]) => new SingleCmd(w, fmt, p));
  const batch: fc.Arbitrary<Cmd> = fc.tuple(batchWrites, probe).map(([ws, p]) => new BatchCmd(ws, p));
  return { commands: [single, single, single, batch] };
}

// ---------------------------------------------------------------------------------------------
// The property
// ---------------------------------------------------------------------------------------------

export interface PropertyOptions extends RunOptions {
  numRuns: number;
  maxCommands: number;
  timeLimitMs: number;
  narrowing: Narrowing;
  /** A Call for a fresh database of the given name. */
  callerFor(database: string): Call;
}

/** Runs the property; resolves with what it did, throws fast-check's report (seed, path, commands) on failure. */
export async function checkRecordsModel(o: PropertyOptions): Promise<{ seed: number; runs: number; steps: number; requests: number; stats: Record<string, number> }> {
  const env = process.env;
  // Chosen here rather than by fast-check so that a passing run can name it too.
  const seed = env.FC_SEED ? Number(env.FC_SEED) : (Date.now() ^ (Math.random() * 0x100000000)) | 0;
  const numRuns = env.FC_RUNS ? Number(env.FC_RUNS) : o.numRuns;
  const maxCommands = env.FC_COMMANDS ? Number(env.FC_COMMANDS) : o.maxCommands;
  const { commands } = arbitraries(o.narrowing);
  let runs = 0;
  let steps = 0;
  let requests = 0;
  const stats = new Map<string, number>();
  // Not fast-check's interruptAfterTimeLimit: it abandons the run in flight, whose requests then go on
  // under the next test (and a difference it finds is dropped). Past the limit, a run is empty
  // instead: it passes at once (also ending a shrink).
  const deadline = Date.now() + o.timeLimitMs;
  const property = fc.asyncProperty(fc.commands(commands, { maxCommands, size: 'max' }), async (cmds) => {
    if (Date.now() > deadline) return;
    const real = new Real(o.callerFor(`model-${process.pid}-${runs++}`), o);
    try {
      await real.setup();
      const model = new Model();
      await fc.asyncModelRun(() => ({ model, real }), cmds);
      await real.exhaustive(model);
    } finally {
      steps += real.steps;
      requests += real.requests;
      for (const [k, v] of real.stats) stats.set(k, (stats.get(k) ?? 0) + v);
    }
  });
  await fc.assert(property, {
    numRuns,
    seed,
    path: env.FC_PATH,
    // Shrinking replays whole sequences against the server: FC_SHRINK=0 reports the first failure as found.
    endOnFailure: env.FC_SHRINK === '0',
  });
  return { seed, runs, steps, requests, stats: Object.fromEntries([...stats].sort()) };
}
