/**
 * Builds an API's OpenAPI 3.1 document from the route table (method, path, credentials, limits) and
 * each route's OperationDoc (its zod schemas and codes): `npm run openapi` writes the three to
 * docs/openapi/, and a test fails when the committed files differ (docs/openapi.md).
 */
import * as z from 'zod/mini';
import type { Api } from '../shared/api.js';
import { ERROR_STATUS, type ErrorCode } from '../shared/errors.js';
import { errorType } from '../http/error-response.js';
import { ROUTES, type RouteDef } from '../http/routes.js';
import { commonErrors, needsOperationId, SECURITY_SCHEMES, securityOf, takesIdempotencyKey, takesOperationId } from './common.js';
import type { ContentDoc, OperationDoc, OperationDocs, ResponseDoc, SchemaRef } from './operation.js';

type Json = Record<string, unknown>;

export interface ApiInfo {
  title: string;
  description: string;
  /** `npm start`'s port for the API (the first server). */
  localPort: number;
  /** The spec's name for the base address: `ai_url`, `data_url`, `events_url`. */
  baseName: string;
  /** What each tag (a group of operations in the rendered docs) holds; every tag an OperationDoc uses needs one. */
  tags: Record<string, string>;
}

/** Routes the documents leave out: the fallback (`$default`, it authenticates then answers 404) and CORS preflights (every path). */
export const undocumented = (route: RouteDef): boolean => route.path === '$default' || route.method === 'OPTIONS';

/** `data.records.create` -> `recordsCreate`: unique within its API, a valid identifier in every generator. */
export const operationIdOf = (route: RouteDef): string =>
  route.id
    .split('.')
    .slice(1)
    .flatMap((part) => part.split(/[-_]/))
    .map((word, i) => (i === 0 ? word : word[0].toUpperCase() + word.slice(1)))
    .join('');

/** JSON Schemas made from zod schemas, gathered under components.schemas by name. */
class Schemas {
  readonly components: Record<string, Json> = {};

  /** The schema as JSON Schema 2020-12 (a request's as input, an answer's as output); named ones by $ref. */
  add(ref: SchemaRef, io: 'input' | 'output', name?: string): Json {
    const json = z.toJSONSchema(ref(), { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
    delete json.$schema;
    const defs = (json.$defs ?? {}) as Record<string, Json>;
    delete json.$defs;
    // Nested schemas with an id of their own (z.meta({ id })) become components too.
    const renames = new Map<string, string>();
    for (const [id, def] of Object.entries(defs)) renames.set(id, this.place(id, def, io));
    const rewrite = (value: Json): Json =>
      JSON.parse(JSON.stringify(value).replace(/"#\/\$defs\/([^"]+)"/g, (_, id: string) => JSON.stringify(`#/components/schemas/${renames.get(id) ?? id}`)));
    for (const [id, name] of renames) this.components[name] = rewrite(this.components[name] ?? defs[id]);
    const schema = rewrite(json);
    if (!name) return schema;
    return { $ref: `#/components/schemas/${this.place(name, schema, io)}` };
  }

  /** The name a schema takes: its own, or `<name>Input` when a request's form differs from the answer's. */
  private place(name: string, schema: Json, io: 'input' | 'output'): string {
    const text = JSON.stringify(schema);
    for (const candidate of io === 'input' ? [name, `${name}Input`] : [name]) {
      const existing = this.components[candidate];
      if (existing === undefined) {
        this.components[candidate] = schema;
        return candidate;
      }
      if (JSON.stringify(existing) === text) return candidate;
    }
    throw new Error(`two different schemas are both named ${name}`);
  }
}

/** The one error shape (spec 7 as the platform answers it), with the codes a status may carry. */
function errorSchema(status: number, codes: ErrorCode[]): Json {
  return {
    type: 'object',
    required: ['error'],
    additionalProperties: false,
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'type', 'param'],
        additionalProperties: false,
        properties: {
          code: { type: 'string', enum: codes },
          message: { type: 'string' },
          type: { type: 'string', enum: [errorType(status)] },
          param: { type: ['string', 'null'], description: 'The offending field, parameter or header, dotted (`ops.0.id`), when there is one.' },
        },
      },
    },
  };
}

const STATUS_WORDS: Record<number, string> = {
  400: 'The request is malformed or invalid.',
  401: 'No credential, or one that is malformed, unknown or expired (identical whether or not the path exists).',
  403: 'The credential may not do this, or a feature is off.',
  404: 'No such resource.',
  409: 'A conflict with the resource’s state.',
  410: 'Gone.',
  411: 'Content-Length is required.',
  413: 'The body is too large.',
  426: 'A WebSocket upgrade is required.',
  431: 'The request line and headers are over 16 KB (a long cursor included).',
  429: 'Too many calls, or a quota or budget spent: retry after Retry-After seconds where it is sent.',
  500: 'The service failed to answer (never with detail); retry later.',
  502: 'The upstream model answered with an error.',
  503: 'The service or the route is briefly unavailable; retry after Retry-After seconds where it is sent.',
  504: 'The upstream did not answer in time.',
};

/** `partial`: routes without an OperationDoc are left out instead of failing the build (while documenting them). */
export function buildDocument(api: Api, info: ApiInfo, docs: OperationDocs, options: { partial?: boolean } = {}): Json {
  const schemas = new Schemas();
  const paths: Record<string, Json> = {};
  const routes = ROUTES.filter((r) => r.api === api && !undocumented(r) && (!options.partial || docs[r.id] !== undefined));
  for (const route of routes) {
    const doc = docs[route.id];
    if (!doc) throw new Error(`route ${route.id} has no OperationDoc in lambdas/openapi/${api}.ts`);
    (paths[route.path] ??= {})[route.method.toLowerCase()] = operation(route, doc, schemas);
  }
  const stray = Object.keys(docs).filter((id) => !routes.some((r) => r.id === id));
  if (stray.length > 0) throw new Error(`OperationDocs name no route of the ${api} API: ${stray.join(', ')}`);
  const tags = [...new Set(routes.map((r) => docs[r.id].tag))].map((name) => {
    const description = info.tags[name];
    if (!description) throw new Error(`tag ${name} of the ${api} API has no description in API_INFO (lambdas/openapi/documents.ts)`);
    return { name, description };
  });
  // Only the schemes the API's routes take (an unused one is noise to a client generator).
  const used = new Set(routes.flatMap((r) => securityOf(r).flatMap((s) => Object.keys(s))));
  const securitySchemes = Object.fromEntries(Object.entries(SECURITY_SCHEMES).filter(([name]) => used.has(name)));
  return {
    openapi: '3.1.1',
    info: { title: info.title, version: '1.0.0', description: info.description, license: { name: 'Proprietary', identifier: 'LicenseRef-Proprietary' } },
    servers: [
      { url: `http://127.0.0.1:${info.localPort}`, description: '`npm start` on this machine' },
      { url: `{${info.baseName}}`, description: 'A deployment: its base address (a stack output).', variables: { [info.baseName]: { default: `http://127.0.0.1:${info.localPort}` } } },
    ],
    tags,
    paths,
    components: { schemas: sortKeys(schemas.components), securitySchemes },
  };
}

function operation(route: RouteDef, doc: OperationDoc, schemas: Schemas): Json {
  const parameters: Json[] = [];
  for (const name of [...route.path.matchAll(/\{(\w+)\+?\}/g)].map((m) => m[1])) {
    const p = doc.path?.[name];
    parameters.push({ name, in: 'path', required: true, ...(p?.description ? { description: p.description } : {}), schema: p ? schemas.add(p.schema, 'input') : { type: 'string' }, ...(p?.example !== undefined ? { example: p.example } : {}) });
  }
  if (doc.query) {
    const query = schemas.add(doc.query, 'input') as { properties?: Record<string, Json>; required?: string[] };
    for (const [name, schema] of Object.entries(query.properties ?? {})) {
      const { description, ...rest } = schema;
      parameters.push({ name, in: 'query', required: query.required?.includes(name) ?? false, ...(description ? { description } : {}), schema: rest });
    }
  }
  for (const [name, p] of Object.entries(doc.queryExtra ?? {})) {
    parameters.push({ name, in: 'query', required: false, ...(p.description ? { description: p.description } : {}), schema: schemas.add(p.schema, 'input') });
  }
  if (takesOperationId(route)) {
    parameters.push({
      name: 'X-Operation-Id',
      in: 'header',
      required: false,
      description: needsOperationId(route)
        ? 'The operation id (8 to 128 letters, digits, `_`, `-`): required on writes (`400 missing_operation_id` without one) unless the organization made ids optional; a retry with the same id gets the kept answer for 24 hours. `Idempotency-Key` is taken in its place where ids are optional.'
        : takesIdempotencyKey(route)
          ? 'Optional here (an OpenAI compatibility route: the SDK sends none); when sent, as `Idempotency-Key`.'
          : 'The operation id (8 to 128 letters, digits, `_`, `-`), optional on reads: echoed in `x-operation-id` (one is made up without it); a malformed one is `400 invalid_operation_id`.',
      schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{8,128}$' },
    });
  }
  if (takesIdempotencyKey(route)) {
    parameters.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description: 'Optional: the operation id (8 to 128 letters, digits, `_`, `-`). A retry with the same key gets the kept answer for 24 hours (a file: the same file); the same key with another request is `409 operation_id_reused`.',
      schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{8,128}$' },
    });
  }
  for (const [name, h] of Object.entries(doc.headers ?? {})) {
    parameters.push({ name, in: 'header', required: h.required ?? false, description: h.description, schema: h.schema ? schemas.add(h.schema, 'input') : { type: 'string' } });
  }
  const out: Json = {
    operationId: operationIdOf(route),
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [doc.tag],
    ...(doc.extension ? { 'x-extension': true } : {}),
    'x-route-id': route.id,
    security: securityOf(route),
    ...(parameters.length ? { parameters } : {}),
  };
  if (doc.body) {
    out.requestBody = {
      required: doc.body.required ?? true,
      ...(doc.body.description ? { description: doc.body.description } : {}),
      content: Object.assign({}, ...[doc.body, ...(doc.body.alternatives ?? [])].map((c) => content(c, schemas, 'input'))),
    };
  }
  const responses: Record<string, Json> = {};
  for (const [status, r] of Object.entries(doc.responses)) responses[status] = response(route, r, schemas);
  const codes = [...new Set([...commonErrors(route), ...doc.errors])];
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of codes) byStatus.set(ERROR_STATUS[code], [...(byStatus.get(ERROR_STATUS[code]) ?? []), code]);
  for (const [status, list] of [...byStatus].sort(([a], [b]) => a - b)) {
    if (responses[String(status)]) throw new Error(`${route.id}: status ${status} is both an answer of its own and an error code's (${list.join(', ')})`);
    responses[String(status)] = {
      description: STATUS_WORDS[status] ?? 'An error.',
      // A 431 is answered before any route runs: no request or operation id is made for it.
      headers: { ...(status === 431 ? {} : answerHeaders(route)), ...(status === 429 || status === 503 ? { 'Retry-After': { description: 'Seconds before a retry may succeed, where known.', schema: { type: 'string', pattern: '^\\d+$' } } } : {}) },
      content: { 'application/json': { schema: errorSchema(status, list.sort()) } },
    };
  }
  out.responses = Object.fromEntries(Object.entries(responses).sort(([a], [b]) => Number(a) - Number(b)));
  return out;
}

/** Headers every answer of the route's API carries. */
function answerHeaders(route: RouteDef): Record<string, Json> {
  const headers: Record<string, Json> = {
    'X-Request-Id': { description: 'The id of this request in the platform’s logs and activity records.', required: true, schema: { type: 'string' } },
  };
  if (route.api === 'ai') {
    headers['X-Operation-Id'] = { description: 'The operation id: the one sent, or one made up.', required: true, schema: { type: 'string' } };
  }
  return headers;
}

function response(route: RouteDef, r: ResponseDoc, schemas: Schemas): Json {
  const headers: Record<string, Json> = { ...answerHeaders(route) };
  for (const [name, h] of Object.entries(r.headers ?? {})) {
    headers[name] = { description: h.description, required: h.required ?? false, schema: h.schema ? schemas.add(h.schema, 'output') : { type: 'string' } };
  }
  const out: Json = { description: r.description, headers };
  const contents = [r, ...(r.alternatives ?? [])].filter((c) => c.schema || c.contentType);
  if (contents.length) out.content = Object.assign({}, ...contents.map((c) => content(c, schemas, 'output')));
  return out;
}

function content(c: ContentDoc, schemas: Schemas, io: 'input' | 'output'): Json {
  const type = c.contentType ?? 'application/json';
  const schema = c.schema ? schemas.add(c.schema, io, c.name) : type === 'application/octet-stream' ? { type: 'string', contentMediaType: 'application/octet-stream' } : { type: 'string' };
  return { [type]: { schema, ...(c.example !== undefined ? { example: c.example } : {}) } };
}

function sortKeys<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a.localeCompare(b)));
}
