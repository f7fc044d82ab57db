/** API Gateway HTTP API (payload v2) events to requests, and responses back to results. */
import { Readable } from 'node:stream';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { HttpRequest, HttpResponse, ResponseMode, RouteResult } from './types.js';

/**
 * Largest body a Lambda function behind API Gateway takes or answers with: the invocation payload is
 * at most 6 MB either way, and a binary body travels base64 (4 characters per 3 bytes), headers beside it.
 */
export const LAMBDA_MAX_BODY_BYTES = Math.floor(((6 * 1024 * 1024 - 64 * 1024) * 3) / 4);

export const isReadable = (value: unknown): value is Readable => value instanceof Readable;

const NO_BODY = Buffer.alloc(0);

/**
 * Copies a map of an event, leaving out undefined values (names lower-cased for headers). `bare`: into
 * an object without a prototype (the query: a name such as `__proto__` stays an own name, as Lambda's
 * JSON.parse of the event gives it, never inherited or swallowed).
 */
function defined(map: Record<string, string | undefined> | undefined, lower: boolean, bare = false): Record<string, string> {
  const out: Record<string, string> = bare ? Object.create(null) : {};
  if (map) for (const k of Object.keys(map)) if (map[k] !== undefined) out[lower ? k.toLowerCase() : k] = map[k];
  return out;
}

/**
 * `bodyStream`: the request body, unread, from a piping runtime on a `body: 'stream'` route; `read`:
 * the body as such a runtime read it (the event's body is then not decoded).
 */
export function toHttpRequest(event: APIGatewayProxyEventV2, bodyStream?: Readable, read?: Buffer): HttpRequest {
  const headers = defined(event.headers, true);
  // API Gateway (payload v2) moves the Cookie header into `cookies`: put it back as browsers sent it.
  if (event.cookies?.length && headers.cookie === undefined) headers.cookie = event.cookies.join('; ');
  const query = defined(event.queryStringParameters, false, true);
  const params = defined(event.pathParameters, false);
  const body = read ?? (event.body ? Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8') : NO_BODY);
  const request = new EventRequest(event.requestContext.http.method, event.rawPath, params, query, headers, body, bodyStream);
  if (event.requestContext.http.sourceIp) request.sourceIp = event.requestContext.http.sourceIp;
  return request;
}

/** A class, not a literal with a closure: one is built per request. */
class EventRequest implements HttpRequest {
  json?: unknown;
  sourceIp?: string;
  private taken = false;

  constructor(
    readonly method: string,
    readonly path: string,
    readonly params: Record<string, string>,
    readonly query: Record<string, string>,
    readonly headers: Record<string, string>,
    readonly body: Buffer,
    private readonly attached: Readable | undefined,
  ) {}

  stream(): Readable {
    if (this.taken) throw new Error('the request body stream was already taken');
    this.taken = true;
    // In Lambda the body arrives whole in the event: the same bytes, as a stream.
    return this.attached ?? Readable.from(this.body.length ? [this.body] : []);
  }
}

/**
 * The API Gateway result of a response; `res.headers` becomes the result's (the caller hands over a
 * copy). A Readable body only reaches here in `piped` mode: the chain reads it whole otherwise.
 */
export function toResult(res: HttpResponse, mode: ResponseMode): RouteResult {
  const headers: Record<string, string> = res.headers ?? {};
  if (res.cookies?.length) return { ...toResult({ ...res, cookies: undefined }, mode), cookies: res.cookies };
  if (res.body === undefined || res.status === 204 || res.status === 304) {
    if (isReadable(res.body)) res.body.destroy();
    return { statusCode: res.status, headers, body: '' };
  }
  if (isReadable(res.body)) {
    if (mode !== 'piped') throw new Error('a streamed answer reached a buffered runtime unread');
    headers['content-type'] ??= 'application/octet-stream';
    return { statusCode: res.status, headers, body: '', stream: res.body };
  }
  if (Buffer.isBuffer(res.body)) {
    headers['content-type'] ??= 'application/octet-stream';
    return { statusCode: res.status, headers, body: res.body.toString('base64'), isBase64Encoded: true };
  }
  if (typeof res.body === 'string') {
    headers['content-type'] ??= 'text/plain; charset=utf-8';
    return { statusCode: res.status, headers, body: res.body };
  }
  headers['content-type'] = 'application/json';
  return { statusCode: res.status, headers, body: JSON.stringify(res.body) };
}
