/**
 * An operation of an OpenAPI document to fast-check requests: path and query parameters, headers and
 * the JSON or form body drawn from its schemas (and the fixtures' real ids), either all valid or
 * broken in exactly one place, which the request names so the answer can be checked for naming it.
 */
import fc from 'fast-check';
import { patternOf } from '../openapi-check.js';
import { asParsed, dotted, getAt, toJson, withAt, type Path } from './json.js';
import { breakAt, deref, hintKey, PROTOTYPE_KEYS, valueOf, type Schema, type SchemaContext } from './schema.js';

type Json = Record<string, any>;

export interface Operation {
  method: string;
  /** `/v1/databases/{database}` */
  template: string;
  op: Json;
}

export type Where = 'path' | 'query' | 'header' | 'body';

export interface Broken {
  where: Where;
  /** The parameter or header name, or the body field's dotted path ('' for the body as a whole). */
  name: string;
  kind: string;
  /** Other places the answer may name (the fields of a union's other branches). */
  alsoNamed?: string[];
}

export interface FuzzRequest {
  method: string;
  /** Path and query, percent-encoded. */
  target: string;
  headers: Record<string, string>;
  body?: { type: string; text: string };
  broken?: Broken;
  /** For a broken request: the same request unbroken (to tell a misnamed fault from another place's). */
  base?: FuzzRequest;
  /** The kind of credential it carries. */
  credential?: string;
}

/** A credential a request can carry: its kind (a security scheme's name in the documents) and its headers. */
export interface Credential {
  kind: string;
  headers: Record<string, string>;
}

/** What the fixtures add to an operation's requests. */
export interface OperationFixtures {
  /** The credentials to send (one per request, among those the operation's `security` takes; listed twice: drawn twice as often). */
  credentials: Credential[];
  /** Real path parameter sets (each naming every path parameter of the operation it fits). */
  contexts: Record<string, string>[];
  /** Header values always sent (an operation id); a broken request never breaks these. */
  headers(): Record<string, string>;
  /** Values worth sending at a body place (dotted, `*` for indexes), besides the document's examples. */
  hints: Record<string, unknown[]>;
  /** Bodies for a raw (`application/octet-stream`) body: a few, not generated (bytes mean nothing to a schema). */
  rawBodies?: string[];
  /** Query parameter names for `filter[<field>]`-like placeholders. */
  placeholderNames?: string[];
}

/** Headers a fetch cannot set or that the transport owns: never generated. */
const TRANSPORT_HEADERS = new Set(['content-length', 'content-type', 'connection', 'upgrade', 'host', 'transfer-encoding', 'keep-alive', 'expect', 'te', 'trailer', 'authorization']);

export const operationsOf = (document: Json): Operation[] =>
  Object.entries(document.paths as Json).flatMap(([template, item]) =>
    Object.entries(item as Json)
      .filter(([method, op]) => ['get', 'put', 'post', 'patch', 'delete', 'head'].includes(method) && typeof op === 'object')
      .map(([method, op]) => ({ method: method.toUpperCase(), template, op: op as Json })),
  );

/** The document's examples as hints: every value of the request body's examples, by place. */
function exampleHints(op: Json): Map<string, unknown[]> {
  const hints = new Map<string, unknown[]>();
  const add = (key: string, v: unknown) => {
    const list = hints.get(key) ?? [];
    if (list.length < 8 && !list.some((x) => toJson(x) === toJson(v))) list.push(v);
    hints.set(key, list);
  };
  const collect = (v: unknown, path: Path) => {
    if (path.length) add(hintKey(path), v);
    if (Array.isArray(v)) v.forEach((x, i) => collect(x, [...path, i]));
    else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) collect(x, [...path, k]);
  };
  for (const media of Object.values((op.requestBody?.content ?? {}) as Json)) {
    if (media.example !== undefined) collect(media.example, []);
    for (const e of Object.values((media.examples ?? {}) as Json)) if ((e as Json).value !== undefined) collect((e as Json).value, []);
  }
  return hints;
}

const encodeSegment = (s: string) => encodeURIComponent(s).replace(/\./g, '%2E');

/** Values of a parameter's schema a URL can carry as they are: no empty segment, no dot segments. */
const sendable = (where: 'path' | 'query' | 'header', v: unknown): v is string =>
  typeof v === 'string' && wellFormed(v) && (where !== 'path' || (v !== '' && v !== '.' && v !== '..')) && (where !== 'header' || /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/.test(v));

/** A lone surrogate has no UTF-8 form: a URL cannot carry it. */
const wellFormed = (v: string) => {
  try {
    encodeURIComponent(v);
    return true;
  } catch {
    return false;
  }
};

function paramValue(ctx: SchemaContext, p: Json, where: 'path' | 'query' | 'header'): fc.Arbitrary<string> {
  const schema = deref(ctx, p.schema ?? true);
  const examples = [p.example, ...Object.values((p.examples ?? {}) as Json).map((e) => (e as Json).value)].filter((e) => e !== undefined);
  const fromSchema = valueOf(ctx, schema, [`$${where}`, p.name]).map((v) => (typeof v === 'string' ? v : typeof v === 'number' || typeof v === 'boolean' ? String(v) : v));
  const arb = examples.length ? fc.oneof(fromSchema, fc.constantFrom(...examples.map(String))) : fromSchema;
  return arb.filter((v): v is string => sendable(where, v) && paramValid(ctx, schema, v));
}

/**
 * Whether a parameter's text is valid against its schema: as the text, or as the number or boolean it
 * spells where the schema wants one (OpenAPI's simple style: `limit=5` is the integer 5).
 */
export function paramValid(ctx: SchemaContext, schema: Schema, text: string): boolean {
  if (ctx.validates(schema, text)) return true;
  if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(text) && ctx.validates(schema, Number(text))) return true;
  return (text === 'true' || text === 'false') && ctx.validates(schema, text === 'true');
}

/** A parameter value its schema refuses (and a URL or header can carry). */
function brokenParamValues(ctx: SchemaContext, p: Json, where: 'path' | 'query' | 'header'): string[] {
  const schema = deref(ctx, p.schema ?? true) as Json;
  if (typeof schema !== 'object') return [];
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : 40;
  const candidates = ['A', 'UPPER', '!', ' x', 'x y', '-1', '1.5', '99999999999999999999', '0', 'abc', 'null', 'true', '\u00e9', '%', 'x'.repeat(max + 1), ...PROTOTYPE_KEYS, '\u{1F600}', "'; drop", ''];
  if (schema.enum) candidates.push(`${schema.enum[0]}x`);
  return candidates.filter((c) => sendable(where, c) && !paramValid(ctx, schema, c));
}

export interface RequestSpace {
  /** A valid request (per the document) or one broken in one place. */
  arbitrary: fc.Arbitrary<FuzzRequest>;
  /** Whether the route's errors carry `error.param` (the spec's shape; not the OAuth token route's). */
  namesParams: boolean;
}

export function requestSpace(ctx: SchemaContext, operation: Operation, fixtures: OperationFixtures): RequestSpace {
  const { op, method, template } = operation;
  const params = (op.parameters ?? []) as Json[];
  const pathParams = params.filter((p) => p.in === 'path');
  const queryParams = params.filter((p) => p.in === 'query');
  const headerParams = params.filter((p) => p.in === 'header' && !TRANSPORT_HEADERS.has(String(p.name).toLowerCase()));
  const examples = exampleHints(op);
  const hints = (key: string) => [...(fixtures.hints[key] ?? []), ...(examples.get(key) ?? [])];
  const bodyCtx: SchemaContext = { ...ctx, hints };
  const media = Object.entries((op.requestBody?.content ?? {}) as Json).filter(([type]) => type === 'application/json' || type === 'application/x-www-form-urlencoded');
  const bodyRequired = op.requestBody?.required === true;
  const contexts = fixtures.contexts.filter((c) => pathParams.every((p) => c[p.name] !== undefined));

  // Path: a real set (the route's handler runs beyond "not found") or, now and then, values of the schemas.
  const generatedPath = fc.tuple(...pathParams.map((p) => paramValue(bodyCtx, p, 'path'))).map((vs) => Object.fromEntries(pathParams.map((p, i) => [p.name, vs[i]])));
  const pathArb: fc.Arbitrary<Record<string, string>> = contexts.length
    ? fc.oneof(
        { weight: 4, arbitrary: fc.constantFrom(...contexts) },
        { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...contexts), generatedPath, fc.nat()).map(([c, g, n]) => (pathParams.length ? { ...c, [pathParams[n % pathParams.length].name]: g[pathParams[n % pathParams.length].name] } : c)) },
        { weight: 1, arbitrary: generatedPath },
      )
    : generatedPath;

  const placeholder = (name: string) => {
    const names = fixtures.placeholderNames?.length ? fixtures.placeholderNames : ['name'];
    return fc.tuple(...(name.match(/<[^>]+>/g) ?? []).map((ph) => (ph === '<op>' ? fc.constantFrom('eq', 'gt', 'gte', 'lt', 'lte', 'in') : fc.constantFrom(...names)))).map((parts) => {
      let i = 0;
      return name.replace(/<[^>]+>/g, () => parts[i++]);
    });
  };
  const queryArb = fc
    .tuple(
      ...queryParams.map((p) => {
        const entry = fc.tuple(p.name.includes('<') ? placeholder(p.name) : fc.constant(p.name as string), paramValue(bodyCtx, p, 'query'));
        return p.required ? entry : fc.option(entry, { nil: undefined, freq: 2 });
      }),
    )
    .map((entries) => entries.filter((e): e is [string, string] => e !== undefined));
  const headerArb = fc
    .tuple(...headerParams.map((p) => (p.required ? paramValue(bodyCtx, p, 'header') : fc.option(paramValue(bodyCtx, p, 'header'), { nil: undefined, freq: 2 }))))
    .map((vs) => Object.fromEntries(headerParams.flatMap((p, i) => (vs[i] === undefined ? [] : [[p.name as string, vs[i] as string]]))));
  const bodyArb: fc.Arbitrary<{ type: string; schema: Schema; value: unknown } | undefined> = media.length
    ? fc.oneof(
        ...media.map(([type, m]) => {
          const schema = (m as Json).schema ?? true;
          return valueOf(bodyCtx, schema)
            .map((value) => ({ type, schema, value }))
            .filter((b) => ctx.validates(schema, bodyAsServerSees(b.type, b.value)));
        }),
      )
    : fc.constant(undefined);
  const raw = Object.keys((op.requestBody?.content ?? {}) as Json).find((type) => !type.includes('json') && !type.includes('form'));
  const rawArb = raw && !media.length ? fc.constantFrom(...(fixtures.rawBodies ?? ['', 'bytes'])).map((text) => ({ type: raw === '*/*' ? 'application/octet-stream' : raw, schema: true as Schema, value: text, raw: true })) : undefined;
  const maybeBody = rawArb ?? (bodyRequired || !media.length ? bodyArb : fc.option(bodyArb, { nil: undefined, freq: 4 }));

  const fixedHeaders = () => fixtures.headers();
  const build = (path: Record<string, string>, query: [string, string][], headers: Record<string, string>, body: { type: string; value: unknown; raw?: boolean } | undefined, broken?: Broken): FuzzRequest => {
    const url = template.replace(/\{(\w+)\}/g, (_, name: string) => encodeSegment(path[name]));
    const search = new URLSearchParams(query).toString();
    const text = body === undefined ? undefined : 'raw' in body ? String(body.value) : body.type === 'application/x-www-form-urlencoded' ? formOf(body.value) : toJson(body.value);
    return {
      method,
      target: search ? `${url}?${search}` : url,
      headers: headersOf(headers, fixedHeaders(), body?.type, broken),
      body: body && text !== undefined ? { type: body.type, text } : undefined,
      broken,
    };
  };
  const pair = (base: FuzzRequest, broken: FuzzRequest): FuzzRequest => ({ ...broken, base });

  const valid = fc.tuple(pathArb, queryArb, headerArb, maybeBody).map(([path, query, headers, body]) => build(path, query, headers, body));

  // One place broken, the rest valid.
  const sites: fc.Arbitrary<FuzzRequest | undefined>[] = [];
  const real = contexts.length ? fc.constantFrom(...contexts) : pathArb;
  const rest = fc.tuple(real, queryArb, headerArb, maybeBody);
  for (const p of pathParams) {
    const bad = brokenParamValues(ctx, p, 'path');
    if (bad.length) sites.push(fc.tuple(rest, fc.constantFrom(...bad)).map(([[path, q, h, b], v]) => pair(build(path, q, h, b), build({ ...path, [p.name]: v }, q, h, b, { where: 'path', name: p.name, kind: 'schema' }))));
  }
  for (const p of queryParams.filter((q) => !q.name.includes('<'))) {
    const bad = brokenParamValues(ctx, p, 'query');
    const others = (q: [string, string][]) => q.filter(([n]) => n !== p.name);
    if (bad.length) sites.push(fc.tuple(rest, fc.constantFrom(...bad)).map(([[path, q, h, b], v]) => pair(build(path, others(q), h, b), build(path, [...others(q), [p.name, v]], h, b, { where: 'query', name: p.name, kind: 'schema' }))));
  }
  if (refusesUnknownQuery(ctx, op)) {
    // A query parameter the operation does not take, where it reads its query (or refuses any).
    const unknown = ['fuzz_unknown', ...PROTOTYPE_KEYS].filter((n) => !queryParams.some((q) => q.name === n || patternOf(q.name)?.test(n)));
    sites.push(fc.tuple(rest, fc.constantFrom(...unknown)).map(([[path, q, h, b], n]) => pair(build(path, q, h, b), build(path, [...q, [n, '1']], h, b, { where: 'query', name: n, kind: 'unknown_parameter' }))));
  }
  for (const p of headerParams) {
    const bad = brokenParamValues(ctx, p, 'header');
    const others = (h: Record<string, string>) => Object.fromEntries(Object.entries(h).filter(([n]) => n !== p.name));
    if (bad.length) sites.push(fc.tuple(rest, fc.constantFrom(...bad)).map(([[path, q, h, b], v]) => pair(build(path, q, others(h), b), build(path, q, { ...h, [p.name]: v }, b, { where: 'header', name: p.name, kind: 'schema' }))));
  }
  for (const [type, m] of media) {
    const schema = (m as Json).schema ?? true;
    const valueArb = valueOf(bodyCtx, schema).filter((v) => ctx.validates(schema, bodyAsServerSees(type, v)));
    sites.push(
      fc.tuple(real, queryArb, headerArb, valueArb, fc.nat()).map(([path, q, h, v, pick]) => {
        const b = type === 'application/x-www-form-urlencoded' ? breakForm(ctx, schema, v, pick) : breakAt(ctx, schema, v, pick);
        if (!b) return undefined;
        return pair(build(path, q, h, { type, value: v }), build(path, q, h, { type, value: b.value }, { where: 'body', name: dotted(b.path), kind: b.kind, ...('alsoNamed' in b && Array.isArray(b.alsoNamed) ? { alsoNamed: b.alsoNamed as string[] } : {}) }));
      }),
    );
  }
  if (bodyRequired && media.length) sites.push(fc.tuple(rest).map(([[path, q, h, b]]) => pair(build(path, q, h, b), build(path, q, h, undefined, { where: 'body', name: '', kind: 'missing_body' }))));
  const broken = sites.length ? fc.oneof(...sites).filter((r): r is FuzzRequest => r !== undefined) : undefined;

  const errorSchema = deref(ctx, op.responses?.['400']?.content?.['application/json']?.schema ?? true);
  const namesParams = typeof errorSchema === 'object' && deref(ctx, errorSchema.properties?.error ?? true) !== true && typeof (deref(ctx, errorSchema.properties?.error) as Json).properties?.param === 'object';
  // One of the credentials the operation takes; none on a route that takes none (the OAuth token
  // exchange reads Authorization as its own, HTTP Basic).
  const kinds = new Set(((op.security ?? []) as Json[]).flatMap((r) => Object.keys(r)));
  const credentials = fixtures.credentials.filter((c) => kinds.has(c.kind));
  const credential = credentials.length ? fc.constantFrom(...credentials) : fc.constant<Credential>({ kind: 'none', headers: {} });
  const withCredential = (c: Credential, req: FuzzRequest): FuzzRequest => ({ ...req, credential: c.kind, headers: { ...c.headers, ...req.headers }, ...(req.base ? { base: withCredential(c, req.base) } : {}) });
  const any = broken ? fc.oneof(valid, broken) : valid;
  return { arbitrary: fc.tuple(credential, any).map(([c, req]) => withCredential(c, req)), namesParams };
}

/** The request's headers, lowercase: the fixtures' (credentials, a fresh operation id) win, except over the header broken on purpose. */
function headersOf(generated: Record<string, string>, fixed: Record<string, string>, type: string | undefined, broken: Broken | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(generated)) out[k.toLowerCase()] = v;
  for (const [k, v] of Object.entries(fixed)) if (!(broken?.where === 'header' && broken.name.toLowerCase() === k.toLowerCase())) out[k.toLowerCase()] = v;
  if (type) out['content-type'] = type;
  return out;
}

/** What the server parses from a body: JSON as JSON.parse reads it; a form as its string values. */
export function bodyAsServerSees(type: string, value: unknown): unknown {
  if (type === 'application/x-www-form-urlencoded') return Object.fromEntries(new URLSearchParams(formOf(value)));
  return asParsed(value);
}

/** A form body: top-level fields only, each as text. */
function formOf(value: unknown): string {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return typeof value === 'string' ? value : '';
  return new URLSearchParams(Object.entries(value as Record<string, unknown>).map(([k, v]): [string, string] => [k, typeof v === 'string' ? v : toJson(v)])).toString();
}

/** A form broken in one field: only breaks a form can carry (text values, a field left out, one added). */
function breakForm(ctx: SchemaContext, schema: Schema, value: unknown, pick: number) {
  const s = deref(ctx, schema) as Json;
  const record = (value ?? {}) as Record<string, unknown>;
  const options: { kind: string; path: Path; value: unknown }[] = [];
  for (const k of (s.required ?? []) as string[]) options.push({ kind: 'missing_required', path: [k], value: withAt(record, [k], undefined) });
  for (const [k, p] of Object.entries((s.properties ?? {}) as Json)) {
    const ps = deref(ctx, p) as Json;
    for (const bad of ['', 'x', 'A'.repeat(300), `${String(getAt(record, [k]) ?? '')}x`]) if (!ctx.validates(ps, bad)) options.push({ kind: 'schema', path: [k], value: withAt(record, [k], bad) });
  }
  if (s.additionalProperties === false) for (const k of ['fuzz_unknown', ...PROTOTYPE_KEYS]) options.push({ kind: 'unknown_field', path: [k], value: withAt(record, [k], 'x') });
  for (let i = 0; i < options.length; i++) {
    const o = options[(pick + i) % options.length];
    if (!ctx.validates(s, bodyAsServerSees('application/x-www-form-urlencoded', o.value))) return o;
  }
  return undefined;
}

/**
 * Whether the operation refuses a query parameter it does not take: it documents some (it parses its
 * query), or documents `invalid_query` (it refuses any). A route that reads no query ignores one.
 */
function refusesUnknownQuery(ctx: SchemaContext, op: Json): boolean {
  if (((op.parameters ?? []) as Json[]).some((p) => p.in === 'query')) return true;
  const schema = deref(ctx, op.responses?.['400']?.content?.['application/json']?.schema ?? true);
  return JSON.stringify(schema).includes('"invalid_query"');
}
