/**
 * Record reads: one record, and lists with `limit`, `cursor`, `sort`, `filter` on indexed fields
 * (equality, ranges, a set of values) and `q` over fulltext fields. One index drives a list: the
 * sort's, else the most selective filter's (it is read in key order); the filters on other fields, `q`
 * and the list rule then filter the records read, at most MAX_SCANNED a call, so a page may hold fewer
 * than `limit` records while `next_cursor` is not null.
 */
import type { Engine, KvItem, KvSortKeyCondition } from '../engine/ports.js';
import type { Principal } from '../auth/principal.js';
import { isServerCredential } from '../auth/principal.js';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseQuery, queryInteger } from '../shared/validate.js';
import { InvalidCursorError, openCursor, sealCursor } from '../shared/cursors.js';
import { indexPartition, RECORD_TIME_INDEXES, recordKey, recordPartition, recordTimePartition, type RecordTime } from './keys.js';
import type { Collection } from './collections.js';
import { encodeKeyValue, keyBounds, parseQueryValue, RECORD_ID_PATTERN, type StoredField } from './schema.js';
import { evaluateRule, ruleAllowsPrincipal } from './rules.js';
import { inlineRecord, loadRecord, ownValue, recordViewSchema, view, type RecordView } from './record-store.js';

export const DEFAULT_LIMIT = 20;
export const MAX_LIMIT = 100;
/** Most index entries or records one list call reads while filling its page. */
export const MAX_SCANNED = 1000;
/**
 * Most bytes of records one page answers (docs/data/reference.md): Lambda answers at most 6 MB, and the
 * JSON body travels inside the response's JSON, where escaping can double it. A page holds at least one
 * record (at most 900 KiB), so it always moves on.
 */
export const LIST_PAGE_BYTES = 2.5 * 1024 * 1024;
/** A record's answer beyond its values: id, version, timestamps, separators. */
const RECORD_OVERHEAD_BYTES = 200;

/** The bytes a record item adds to an answer: the size its writer stored, else measured (records written before sizes were kept). */
function answerBytes(item: KvItem): number {
  const size = typeof item.size === 'number' ? item.size : Buffer.byteLength(JSON.stringify(item.values ?? null));
  return size + RECORD_OVERHEAD_BYTES;
}
const OPS = ['eq', 'gt', 'gte', 'lt', 'lte', 'in'] as const;
type FilterOp = (typeof OPS)[number];
const MAX_IN_VALUES = 20;

const invalidQuery = (message: string, param: string | null = null) => new PlatformError('invalid_query', message, param);
const recordNotFound = (id: string) => new PlatformError('record_not_found', `No record "${id}".`);

interface Condition {
  field: StoredField;
  op: FilterOp;
  values: unknown[];
}

export interface ListQuery {
  limit: number;
  cursor?: string;
  sort: { field: 'id' | RecordTime | StoredField; descending: boolean };
  conditions: Condition[];
  terms: string[];
}

/** A page of records (RecordReader.list): `next_cursor` null on the last page. */
export const recordListSchema = onFirstUse(() =>
  z.strictObject({
    records: z.array(recordViewSchema()).check(z.describe('Up to `limit` records; fewer, even none, when the read budget or the page\'s byte budget ran out first.')),
    next_cursor: z.nullable(z.string().check(z.describe('Opaque: send it unchanged with the same query for the next page.'))),
  }),
);

/** `filter[field]` or `filter[field][op]`: the one family of parameters whose names come from the collection. */
const FILTER_PARAMETER = /^filter\[([A-Za-z][A-Za-z0-9_]*)\](?:\[(eq|gt|gte|lt|lte|in)\])?$/;

/** The list query's fixed parameters, built at first use (onFirstUse); filters are read by the collection's fields. */
export const listQuerySchema = onFirstUse(() =>
  z.strictObject({
    limit: queryInteger({ min: 1, max: MAX_LIMIT }, DEFAULT_LIMIT).check(z.describe(`1 to ${MAX_LIMIT}, default ${DEFAULT_LIMIT}.`)),
    cursor: z.optional(z.string().check(z.describe('The previous next_cursor, unchanged.'))),
    sort: z.optional(z.string().check(z.describe('"id", "created_at", "updated_at" or an indexed field, optionally prefixed with "-" (descending).'))),
    q: z.optional(z.string().check(z.describe('Words to find in the fulltext fields.'))),
  }),
);

/** Parses the list query string: `limit`, `cursor`, `sort`, `filter[f]=v`, `filter[f][op]=v`, `q`. */
export function parseListQuery(c: Collection, query: Record<string, string>): ListQuery {
  const fields = new Map(c.fields.map((f) => [f.name, f]));
  // Prototype-less: a parameter may be named __proto__ (it is then unknown, like any other name).
  const fixed: Record<string, string> = Object.create(null);
  const filters: [string, RegExpExecArray, string][] = [];
  for (const [key, raw] of Object.entries(query)) {
    const m = FILTER_PARAMETER.exec(key);
    if (m) filters.push([key, m, raw]);
    else fixed[key] = raw;
  }
  const params = parseQuery(listQuerySchema(), fixed);
  const conditions: Condition[] = [];
  let sort: ListQuery['sort'] = { field: 'id', descending: false };
  let terms: string[] = [];
  if (params.sort !== undefined) {
    const descending = params.sort.startsWith('-');
    const name = descending ? params.sort.slice(1) : params.sort;
    if (name === 'id' || isRecordTime(name)) {
      if (name !== 'id' && !c.time_keys) throw invalidQuery(`sort=${name}: this collection's records predate the time indexes; an operator backfills them first (admin collection backfill-times).`, 'sort');
      sort = { field: name, descending };
    } else {
      const f = fields.get(name);
      if (!f?.indexed) throw invalidQuery(`sort takes "id", "created_at", "updated_at" or an indexed field, optionally prefixed with "-".`, 'sort');
      sort = { field: f, descending };
    }
  }
  if (params.q !== undefined) {
    if (!c.fields.some((f) => f.fulltext)) throw invalidQuery('q needs a fulltext field in the collection.', 'q');
    terms = tokenize(params.q);
  }
  for (const [key, m, raw] of filters) {
    const f = fields.get(m[1]);
    if (!f?.indexed) throw invalidQuery(`Filters take indexed fields; "${m[1]}" is not one.`, key);
    const op = (m[2] ?? 'eq') as FilterOp;
    const parts = op === 'in' ? raw.split(',') : [raw];
    if (op === 'in' && (parts.length < 1 || parts.length > MAX_IN_VALUES)) throw invalidQuery(`in takes 1 to ${MAX_IN_VALUES} values.`, key);
    conditions.push({ field: f, op, values: parts.map((v) => parseValue(f, v, key)) });
  }
  const { limit, cursor } = params;
  // Without a sort, the most selective filter's field drives the list and orders it; with one, the
  // sort's index (or the records themselves for id) drives and every filter applies to what it reads.
  const driver = pickDriver(conditions);
  if (driver && params.sort === undefined) sort = { field: driver.field, descending: false };
  return { limit, cursor, sort, conditions, terms };
}

const isRecordTime = (name: string): name is RecordTime => Object.hasOwn(RECORD_TIME_INDEXES, name);

function parseValue(f: StoredField, raw: string, param: string): unknown {
  try {
    return parseQueryValue(f, raw);
  } catch {
    throw invalidQuery(`${param}: "${raw}" is not a ${f.type} value.`, param);
  }
}

/** Equality narrows most, then a set, then a range. */
function pickDriver(conditions: Condition[]): Condition | undefined {
  return conditions.find((c) => c.op === 'eq') ?? conditions.find((c) => c.op === 'in') ?? conditions.find((c) => c.op !== 'eq' && c.op !== 'in');
}

const tokenize = (text: string) => text.toLowerCase().split(/[^\p{L}\p{N}]+/u).filter(Boolean);

/**
 * Orders encoded values as the store orders sort keys: by UTF-8 bytes. (JavaScript's `<` compares UTF-16
 * code units, which puts U+E000..U+FFFF after characters outside the BMP.)
 */
const compareKeys = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

function matches(c: Condition, value: unknown): boolean {
  if (value === undefined || value === null) return false;
  const enc = encodeKeyValue(c.field.type, value);
  const cmp = c.values.map((v) => encodeKeyValue(c.field.type, v));
  switch (c.op) {
    case 'eq':
      return enc === cmp[0];
    case 'in':
      return cmp.includes(enc);
    case 'gt':
      return compareKeys(enc, cmp[0]) > 0;
    case 'gte':
      return compareKeys(enc, cmp[0]) >= 0;
    case 'lt':
      return compareKeys(enc, cmp[0]) < 0;
    case 'lte':
      return compareKeys(enc, cmp[0]) <= 0;
  }
}

interface Range {
  lo?: string;
  hi?: string;
}

/** The key ranges to read for the driving field, in order. */
function ranges(driver: Condition | undefined, all: Condition[], descending: boolean): Range[] {
  if (!driver) return [{}];
  const enc = (v: unknown) => encodeKeyValue(driver.field.type, v);
  if (driver.op === 'eq') return [keyBounds.eq(enc(driver.values[0]))];
  if (driver.op === 'in') {
    const sorted = [...new Set(driver.values.map(enc))].sort(compareKeys);
    if (descending) sorted.reverse();
    return sorted.map((e) => keyBounds.eq(e));
  }
  // Combine every range condition on the driving field into one interval.
  const range: Range = {};
  for (const c of all.filter((x) => x.field.name === driver.field.name && x.op !== 'eq' && x.op !== 'in')) {
    const b: Range = keyBounds[c.op as 'gt' | 'gte' | 'lt' | 'lte'](enc(c.values[0]));
    if (b.lo !== undefined && (range.lo === undefined || compareKeys(b.lo, range.lo) > 0)) range.lo = b.lo;
    if (b.hi !== undefined && (range.hi === undefined || compareKeys(b.hi, range.hi) < 0)) range.hi = b.hi;
  }
  // Conditions that exclude each other: nothing to read (DynamoDB refuses a BETWEEN whose bounds are reversed).
  if (range.lo !== undefined && range.hi !== undefined && compareKeys(range.lo, range.hi) > 0) return [];
  return [range];
}

/**
 * The sort-key condition for a range. An open end stays open: no string is above every key (a
 * value may start with any character), so `gte`/`lte` rather than BETWEEN with a made-up bound.
 */
function rangeCondition(range: Range): KvSortKeyCondition | undefined {
  if (range.lo !== undefined && range.hi !== undefined) return { between: [range.lo, range.hi] };
  if (range.lo !== undefined) return { gte: range.lo };
  if (range.hi !== undefined) return { lte: range.hi };
  return undefined;
}

interface CursorState {
  r: number;
  c?: string;
}

/** Longest store cursor a list cursor carries (an index entry's key is at most 1 KiB, the partition key short). */
const MAX_STORE_CURSOR = 8192;

/**
 * What a list cursor is bound to: the organization, database, collection, credential and the query
 * (sort, filters with their values as keys, terms), in a canonical order. `limit` may change between pages.
 */
function listBinding(principal: Principal, database: string, c: Collection, q: ListQuery): string {
  const conditions = q.conditions.map((x) => JSON.stringify([x.field.name, x.op, x.values.map((v) => encodeKeyValue(x.field.type, v))])).sort();
  const sort = [typeof q.sort.field === 'string' ? q.sort.field : q.sort.field.name, q.sort.descending];
  return JSON.stringify(['records', principal.organizationId, principal.applicationId, principal.kind, principal.credentialId, database, c.name, sort, conditions, q.terms]);
}

const invalidCursor = () => invalidQuery('cursor is not one this list gave out for this query and credential; send next_cursor unchanged with the same query.', 'cursor');

/**
 * A list cursor as `list` gives it out, sealed (shared/cursors.ts): exactly `{r}` or `{r, c}`, with `r`
 * the range to read (below `rangeCount`, the number of ranges of the query) and `c` the store's cursor
 * within it. Anything that does not open, or opens to another shape, is `invalid_query`.
 */
async function decodeListCursor(engine: Engine, cursor: string | undefined, binding: string, rangeCount: number): Promise<CursorState> {
  if (!cursor) return { r: 0 };
  let state: unknown;
  try {
    state = await openCursor(engine.secret, cursor, binding);
  } catch (error) {
    if (error instanceof InvalidCursorError) throw invalidCursor();
    throw error;
  }
  if (state && typeof state === 'object' && !Array.isArray(state)) {
    const { r, c, ...rest } = state as Record<string, unknown>;
    const keysOk = Object.keys(rest).length === 0 && Object.hasOwn(state, 'r');
    const cOk = c === undefined ? !Object.hasOwn(state, 'c') : typeof c === 'string' && c.length > 0 && c.length <= MAX_STORE_CURSOR;
    if (keysOk && cOk && Number.isSafeInteger(r) && (r as number) >= 0 && (r as number) < rangeCount) return c === undefined ? { r: r as number } : { r: r as number, c: c as string };
  }
  throw invalidCursor();
}

export class RecordReader {
  constructor(private readonly engine: Engine, private readonly principal: Principal, private readonly database: string) {}

  private get org() {
    return this.principal.organizationId;
  }

  /** One record; a record the view rule hides is answered like a missing one. */
  async get(c: Collection, id: string): Promise<RecordView> {
    // A credential the view rule can never let through is refused before any record is looked at.
    if (ruleAllowsPrincipal(c.compiled.view, this.principal) === 'no') {
      throw new PlatformError('forbidden', "The collection's view rule does not allow this credential.");
    }
    if (!RECORD_ID_PATTERN.test(id)) throw recordNotFound(id);
    const item = await this.engine.kv.get(recordKey(this.org, this.database, c.name, id));
    if (!item) throw recordNotFound(id);
    const loaded = await loadRecord(this.engine, item);
    if (!loaded) throw recordNotFound(id);
    const record = view(c, loaded);
    if (!isServerCredential(this.principal) && !evaluateRule(c.compiled.view, { principal: this.principal, record, request: null })) {
      throw recordNotFound(id);
    }
    return record;
  }

  async list(c: Collection, q: ListQuery): Promise<{ records: RecordView[]; next_cursor: string | null }> {
    const server = isServerCredential(this.principal);
    if (!server && ruleAllowsPrincipal(c.compiled.list, this.principal) === 'no') {
      throw new PlatformError('forbidden', "The collection's list rule does not allow this credential.");
    }
    // The sort's index drives (parseListQuery made a filtered, unsorted list sorted by its driving
    // filter); the filters on that field bound the range read, every filter checks the records read.
    const field = typeof q.sort.field === 'string' ? undefined : q.sort.field;
    const time = q.sort.field === 'created_at' || q.sort.field === 'updated_at' ? q.sort.field : undefined;
    const onField = field ? q.conditions.filter((x) => x.field.name === field.name) : [];
    const rangeList = ranges(pickDriver(onField), onField, q.sort.descending);
    // Records read may be left out (other fields' filters, q, the list rule): read in larger steps
    // then, within the read budget, so a selective filter does not cost one query per record.
    const sifted = onField.length < q.conditions.length || onField.length > 1 || q.terms.length > 0 || !server;
    const textFields = c.fields.filter((f) => f.fulltext).map((f) => f.name);
    const binding = listBinding(this.principal, this.database, c, q);
    let state = await decodeListCursor(this.engine, q.cursor, binding, rangeList.length);
    const records: RecordView[] = [];
    // A record that moved forward in the sort while the page was read may be met twice: listed once.
    const listed = new Set<string>();
    let scanned = 0;
    let bytes = 0;
    let full = false;
    while (!full && state.r < rangeList.length && records.length < q.limit && scanned < MAX_SCANNED) {
      const range = rangeList[state.r];
      const want = q.limit - records.length;
      const query = {
        // Records by time: the record items themselves, through the generic index that orders them.
        ...(time ? { index: RECORD_TIME_INDEXES[time] } : {}),
        pk: time
          ? recordTimePartition(this.org, this.database, c.name, time)
          : field
            ? indexPartition(this.org, this.database, c.name, field.name, field.generation)
            : recordPartition(this.org, this.database, c.name),
        sk: rangeCondition(range),
        descending: q.sort.descending,
        limit: Math.min(sifted ? MAX_LIMIT : want, MAX_SCANNED - scanned),
        cursor: state.c,
      };
      const page = await this.engine.kv.query(query).catch((error) => {
        if (error instanceof InvalidCursorError) throw invalidCursor();
        throw error;
      });
      scanned += page.items.length;
      const items = field ? await this.recordsOf(c, page.items) : page.items;
      for (let k = 0; k < items.length; k++) {
        const item = items[k];
        // Deleted while the page was read: as if the page had been read a moment later.
        if (!item) continue;
        // The byte budget, checked before a large body is read: a record that does not fit starts the next page.
        const size = answerBytes(item);
        if (records.length > 0 && bytes + size > LIST_PAGE_BYTES) {
          full = true;
          state = k === 0 ? state : { r: state.r, c: this.engine.kv.cursorAfter(query, page.items[k - 1]) };
          break;
        }
        // Most records hold their values inline: no await per record for them.
        const loaded = inlineRecord(item) ?? (await loadRecord(this.engine, item)) ?? (field ? await this.reloadUpdated(c, item) : undefined);
        if (!loaded || listed.has(loaded.id)) continue;
        const record = view(c, loaded);
        if (!q.conditions.every((cond) => matches(cond, ownValue(record, cond.field.name)))) continue;
        if (q.terms.length && !matchesTerms(q.terms, textFields.map((f) => ownValue(record, f)))) continue;
        if (!server && !evaluateRule(c.compiled.list, { principal: this.principal, record, request: null })) continue;
        records.push(record);
        listed.add(loaded.id);
        bytes += size;
        // The page is full before the entries read are: the next one resumes right after this record.
        if (records.length === q.limit && k < items.length - 1) {
          full = true;
          state = { r: state.r, c: this.engine.kv.cursorAfter(query, page.items[k]) };
          break;
        }
      }
      if (!full) state = page.cursor ? { r: state.r, c: page.cursor } : { r: state.r + 1 };
    }
    const more = state.r < rangeList.length;
    return { records, next_cursor: more ? await sealCursor(this.engine.secret, state, binding) : null };
  }

  /**
   * A large record's index entry whose body was replaced by an update while the page was read (the
   * old body is gone, and so is the entry when the sorted value changed): the record as it is now, as
   * if the page had been read a moment later. Undefined when it was deleted.
   */
  private async reloadUpdated(c: Collection, entry: KvItem) {
    const now = await this.engine.kv.get(recordKey(this.org, this.database, c.name, String(entry.id)));
    return now ? loadRecord(this.engine, now) : undefined;
  }

  /** Index entries to their records, position for position (undefined where the record vanished meanwhile). */
  private async recordsOf(c: Collection, entries: KvItem[]): Promise<(KvItem | undefined)[]> {
    // Entries carry a copy of their record; older entries without one are read (one batch get, a page
    // reads at most MAX_LIMIT entries).
    const missing = entries.filter((e) => e.version === undefined);
    if (!missing.length) return entries;
    const read = await this.engine.kv.getMany(missing.map((e) => recordKey(this.org, this.database, c.name, String(e.id))));
    const byId = new Map(read.filter((i): i is KvItem => i !== undefined).map((i) => [String(i.id), i]));
    return entries.map((e) => (e.version !== undefined ? e : byId.get(String(e.id))));
  }
}

function matchesTerms(terms: string[], texts: unknown[]): boolean {
  const words = tokenize(texts.filter((t) => typeof t === 'string').join(' '));
  return terms.every((t) => words.some((w) => w.startsWith(t)));
}
