/**
 * Checks an exchange with a platform API against its OpenAPI document (docs/openapi/<api>.json): the
 * answer's status is documented for the operation, its body is valid against the documented schema of
 * its media type, its required headers are there; and a request the platform accepted (2xx) is one the
 * document calls valid (parameters, headers, body). test/setup/openapi-answers.ts runs it on every
 * fetch a test makes to a platform's API port, so the whole suite proves the documents (docs/openapi.md).
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import type { Api } from '../../lambdas/shared/api.js';

type Json = Record<string, any>;

const ROOT = join(import.meta.dirname, '..', '..');

export interface Exchange {
  api: Api;
  method: string;
  /** The request target as sent: path and query, still percent-encoded. */
  target: string;
  requestHeaders: Headers;
  /** The request body as text, when it had one the check can read (JSON or a form). */
  requestBody?: string;
  status: number;
  responseHeaders: Headers;
  /** The answer body as text (JSON answers only; streams and bytes are not read). */
  responseBody?: string;
}

interface Operation {
  template: string;
  segments: string[];
  op: Json;
}

export class OpenApiChecker {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: false, validateFormats: true });
  private readonly operations: Operation[];
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(
    readonly api: Api,
    readonly document: Json,
  ) {
    addFormats.default(this.ajv);
    // A component naming another (`SubscriptionList` -> `Subscription`) refers to it within this schema's $defs.
    const defs = JSON.stringify(document.components?.schemas ?? {}).replace(/"#\/components\/schemas\/([^"]+)"/g, (_, name: string) => JSON.stringify(`#/$defs/${name}`));
    this.ajv.addSchema({ $id: `${api}-components`, $defs: JSON.parse(defs) });
    this.operations = Object.entries(document.paths as Json).flatMap(([template, item]) =>
      Object.entries(item as Json)
        .filter(([method]) => ['get', 'put', 'post', 'patch', 'delete', 'head', 'options'].includes(method))
        .map(([method, op]) => ({ template: `${method.toUpperCase()} ${template}`, segments: template.split('/').slice(1), op: op as Json })),
    );
  }

  /** What is wrong with the exchange, in words (empty when it matches the document). */
  problems(x: Exchange): string[] {
    const url = new URL(x.target, 'http://x');
    const found = this.find(x.method, url.pathname);
    const where = `${x.api} ${x.method} ${url.pathname} -> ${x.status}`;
    if (!found) {
      // No documented operation: the fallback's answers (spec 5 rule 1: 401 first, then 404), or a preflight's.
      if (x.method === 'OPTIONS') return [];
      if ([401, 403, 404, 405, 413, 429, 431].includes(x.status)) return this.errorShape(x).map((p) => `${where}: ${p}`);
      return [`${where}: no operation in docs/openapi/${this.api}.json for ${x.method} ${url.pathname}, and the answer is not the fallback's (401/404)`];
    }
    const { operation, params } = found;
    const op = operation.op;
    const out: string[] = [];
    const response = op.responses?.[String(x.status)] ?? op.responses?.default;
    if (!response) return [`${where}: status ${x.status} is not documented for ${operation.template} (documented: ${Object.keys(op.responses ?? {}).join(', ')})`];
    out.push(...this.checkResponse(operation.template, x, response));
    if (x.status >= 200 && x.status < 300) out.push(...this.checkRequest(operation.template, op, x, url, params));
    return out.map((p) => `${where}: ${p}`);
  }

  private find(method: string, path: string): { operation: Operation; params: Record<string, string> } | undefined {
    const parts = path.split('/').slice(1);
    let best: { operation: Operation; params: Record<string, string>; literals: number } | undefined;
    for (const operation of this.operations) {
      if (!operation.template.startsWith(`${method} `)) continue;
      if (operation.segments.length !== parts.length) continue;
      const params: Record<string, string> = {};
      let literals = 0;
      let ok = true;
      for (let i = 0; i < parts.length && ok; i++) {
        const seg = operation.segments[i];
        const m = /^\{(\w+)\}$/.exec(seg);
        if (m) {
          if (parts[i] === '') ok = false;
          else params[m[1]] = safeDecode(parts[i]);
        } else if (seg === parts[i]) literals++;
        else ok = false;
      }
      if (ok && (!best || literals > best.literals)) best = { operation, params, literals };
    }
    return best;
  }

  private validator(key: string, schema: Json): ValidateFunction {
    let v = this.compiled.get(key);
    if (!v) {
      const text = JSON.stringify(schema).replace(/"#\/components\/schemas\/([^"]+)"/g, (_, name: string) => JSON.stringify(`${this.api}-components#/$defs/${name}`));
      v = this.ajv.compile(JSON.parse(text));
      this.compiled.set(key, v);
    }
    return v;
  }

  /** What is wrong with a value against a schema of the document (undefined when it is valid). */
  schemaFault(key: string, schema: Json, value: unknown): string | undefined {
    return this.validate(key, schema, value);
  }

  private validate(key: string, schema: Json, value: unknown): string | undefined {
    const v = this.validator(key, schema);
    if (v(value)) return undefined;
    return (v.errors ?? []).map((e) => `${e.instancePath || '(root)'} ${e.message}${e.params && 'additionalProperty' in e.params ? ` "${e.params.additionalProperty}"` : ''}${e.params && 'allowedValues' in e.params ? ` ${JSON.stringify(e.params.allowedValues)}` : ''}`).join('; ');
  }

  private checkResponse(template: string, x: Exchange, response: Json): string[] {
    const out: string[] = [];
    for (const [name, header] of Object.entries((response.headers ?? {}) as Json)) {
      const value = x.responseHeaders.get(name);
      if (value === null) {
        if (header.required) out.push(`the answer lacks the required header ${name}`);
        continue;
      }
      const fault = header.schema ? this.validate(`${template} ${x.status} header ${name}`, header.schema, value) : undefined;
      if (fault) out.push(`header ${name}: ${fault}`);
    }
    const type = mediaType(x.responseHeaders.get('content-type'));
    const content = response.content as Json | undefined;
    const hasBody = x.responseBody !== undefined ? x.responseBody.length > 0 : type !== undefined && x.method !== 'HEAD' && x.status !== 204 && x.status !== 304 && x.responseHeaders.get('content-length') !== '0';
    if (!hasBody) return out;
    if (!content) return [...out, `the answer has a body (${type}) where the document says none`];
    const media = type === undefined ? undefined : (content[type] ?? content[`${type.split('/')[0]}/*`] ?? content['*/*']);
    if (!media) return [...out, `the answer's content-type ${type} is not documented (documented: ${Object.keys(content).join(', ')})`];
    if (type === 'application/json' && x.responseBody !== undefined && media.schema) {
      let body: unknown;
      try {
        body = JSON.parse(x.responseBody);
      } catch {
        return [...out, 'the answer is not JSON'];
      }
      const fault = this.validate(`${template} ${x.status} ${type}`, media.schema, body);
      if (fault) out.push(`body ${fault}; body: ${x.responseBody.slice(0, 300)}`);
    }
    return out;
  }

  private errorShape(x: Exchange): string[] {
    if (x.responseBody === undefined || x.responseBody === '') return [];
    const schema = {
      type: 'object',
      required: ['error'],
      additionalProperties: false,
      properties: { error: { type: 'object', required: ['code', 'message', 'type', 'param'], additionalProperties: false, properties: { code: { type: 'string' }, message: { type: 'string' }, type: { type: 'string' }, param: { type: ['string', 'null'] } } } },
    };
    try {
      const fault = this.validate('error shape', schema, JSON.parse(x.responseBody));
      return fault ? [`not the error shape: ${fault}`] : [];
    } catch {
      return ['the answer is not JSON'];
    }
  }

  /** A request the platform accepted must be one the document calls valid. */
  private checkRequest(template: string, op: Json, x: Exchange, url: URL, params: Record<string, string>): string[] {
    const out: string[] = [];
    const parameters = (op.parameters ?? []) as Json[];
    for (const p of parameters.filter((p) => p.in === 'path')) {
      const fault = p.schema ? this.validate(`${template} path ${p.name}`, p.schema, parameterValue(p.schema, params[p.name])) : undefined;
      if (fault) out.push(`accepted a path parameter ${p.name} the document refuses: ${fault}`);
    }
    const query = parameters.filter((p) => p.in === 'query');
    for (const [name, value] of url.searchParams) {
      const p = query.find((q) => q.name === name) ?? query.find((q) => patternOf(q.name)?.test(name));
      if (!p) {
        out.push(`accepted the query parameter ${name}, which the document does not list`);
        continue;
      }
      const fault = p.schema ? this.validate(`${template} query ${p.name}`, p.schema, parameterValue(p.schema, value)) : undefined;
      if (fault) out.push(`accepted a query parameter ${name} the document refuses: ${fault}`);
    }
    for (const p of query.filter((q) => q.required && !url.searchParams.has(q.name))) out.push(`accepted a request without the required query parameter ${p.name}`);
    for (const p of parameters.filter((p) => p.in === 'header')) {
      const value = x.requestHeaders.get(p.name);
      if (value === null) {
        if (p.required) out.push(`accepted a request without the required header ${p.name}`);
        continue;
      }
      const fault = p.schema ? this.validate(`${template} header ${p.name}`, p.schema, value) : undefined;
      if (fault) out.push(`accepted a header ${p.name} the document refuses: ${fault}`);
    }
    const body = op.requestBody as Json | undefined;
    const sent = x.requestBody;
    if (!body) return out;
    if (sent === undefined || sent === '') {
      if (body.required && x.requestHeaders.get('content-length') === null && !x.requestHeaders.has('transfer-encoding')) {
        // A stream or bytes the check could not read is not judged; an absent body is.
        // (A multipart form is such a body: only JSON and URL-encoded forms are read.)
        if (!Object.keys(body.content ?? {}).some((t) => !t.includes('json') && t !== 'application/x-www-form-urlencoded')) out.push('accepted a request without the required body');
      }
      return out;
    }
    // A body without a Content-Type is bytes (RFC 9110 8.3; JSON routes refuse one); a range (`*/*`) matches as in answers.
    const type = mediaType(x.requestHeaders.get('content-type')) ?? 'application/octet-stream';
    const content = (body.content ?? {}) as Json;
    const media = content[type] ?? content[`${type.split('/')[0]}/*`] ?? content['*/*'];
    if (!media) return [...out, `accepted a body of type ${type}, which the document does not list (${Object.keys(body.content ?? {}).join(', ')})`];
    // Only a type the document lists itself has a structure to check: under a range (`*/*`) any bytes go.
    if (!media.schema || content[type] === undefined) return out;
    let value: unknown;
    if (type === 'application/json') {
      try {
        value = JSON.parse(sent);
      } catch {
        return [...out, 'accepted a body that is not JSON'];
      }
    } else if (type === 'application/x-www-form-urlencoded') {
      value = Object.fromEntries(new URLSearchParams(sent));
    } else return out;
    const fault = this.validate(`${template} request ${type}`, media.schema, value);
    if (fault) out.push(`accepted a body the document refuses: ${fault}; body: ${sent.slice(0, 300)}`);
    return out;
  }
}

/** A parameter's text as the value its schema types it (an integer parameter's `20` is 20), as OpenAPI serializes them. */
function parameterValue(schema: Json, text: string): unknown {
  const type = schema.type;
  if ((type === 'integer' || type === 'number') && /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(text)) return Number(text);
  if (type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  return text;
}

/** `filter[<field>][<op>]`: a parameter name with placeholders, as a pattern. */
export function patternOf(name: string): RegExp | undefined {
  if (!name.includes('<')) return undefined;
  const source = name
    .split(/<[^>]+>/)
    .map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[^\\[\\]]+');
  return new RegExp(`^${source}$`);
}

const mediaType = (header: string | null) => header?.split(';')[0].trim().toLowerCase() || undefined;

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

const checkers = new Map<Api, OpenApiChecker | null>();

/** The checker of an API's committed document; null while the document does not exist yet. */
export function checkerFor(api: Api): OpenApiChecker | null {
  if (!checkers.has(api)) {
    const file = join(ROOT, 'docs', 'openapi', `${api}.json`);
    checkers.set(api, existsSync(file) ? new OpenApiChecker(api, JSON.parse(readFileSync(file, 'utf8'))) : null);
  }
  return checkers.get(api)!;
}
