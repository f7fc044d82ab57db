/** API Gateway HTTP API (payload v2) events to requests, and responses back to results. */
import { Readable } from 'node:stream';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import type { HttpRequest, HttpResponse } from './types.js';

/**
 * Streams that travel beside an event or a result, under non-enumerable symbols, so a Lambda event
 * stays the plain JSON API Gateway sends and only the local runtime adds them:
 * - BODY_STREAM on an event: the request body as a stream (the local server, on `body: 'stream'`
 *   routes, hands the socket's IncomingMessage instead of buffering it);
 * - PIPES_RESPONSE on an event: the runtime pipes a Readable response body itself (the local
 *   server); without it (Lambda) the chain buffers a Readable into the base64 body;
 * - RESPONSE_STREAM on a result: the Readable the runtime pipes as the body.
 */
export const BODY_STREAM = Symbol.for('platform.http.bodyStream');
export const PIPES_RESPONSE = Symbol.for('platform.http.pipesResponse');
export const RESPONSE_STREAM = Symbol.for('platform.http.responseStream');

/**
 * Largest body a Lambda function behind API Gateway may answer with: the invocation payload is at
 * most 6 MB, and a binary body travels base64 (4 characters per 3 bytes), headers beside it.
 */
export const LAMBDA_MAX_RESPONSE_BYTES = Math.floor(((6 * 1024 * 1024 - 64 * 1024) * 3) / 4);

const hide = (target: object, key: symbol, value: unknown) =>
  Object.defineProperty(target, key, { value, enumerable: false, configurable: true, writable: true });

export function attachBodyStream(event: APIGatewayProxyEventV2, stream: Readable): void {
  hide(event, BODY_STREAM, stream);
}
export function markPipesResponse(event: APIGatewayProxyEventV2): void {
  // Every local request passes here: a plain assignment (a symbol key is never serialized either).
  (event as unknown as Record<symbol, boolean>)[PIPES_RESPONSE] = true;
}
export const pipesResponse = (event: APIGatewayProxyEventV2): boolean => (event as unknown as Record<symbol, unknown>)[PIPES_RESPONSE] === true;
export const responseStreamOf = (result: APIGatewayProxyStructuredResultV2): Readable | undefined =>
  (result as unknown as Record<symbol, Readable | undefined>)[RESPONSE_STREAM];

export const isReadable = (value: unknown): value is Readable => value instanceof Readable;

const NO_BODY = Buffer.alloc(0);

/** Copies a map of an event, leaving out undefined values (names lower-cased for headers). */
function defined(map: Record<string, string | undefined> | undefined, lower: boolean): Record<string, string> {
  const out: Record<string, string> = {};
  if (map) for (const k in map) if (map[k] !== undefined) out[lower ? k.toLowerCase() : k] = map[k];
  return out;
}

export function toHttpRequest(event: APIGatewayProxyEventV2): HttpRequest {
  const headers = defined(event.headers, true);
  const query = defined(event.queryStringParameters, false);
  const params = defined(event.pathParameters, false);
  const body = event.body ? Buffer.from(event.body, event.isBase64Encoded ? 'base64' : 'utf8') : NO_BODY;
  const attached = (event as unknown as Record<symbol, Readable | undefined>)[BODY_STREAM];
  return new EventRequest(event.requestContext.http.method, event.rawPath, params, query, headers, body, attached);
}

/** A class, not a literal with a closure: one is built per request. */
class EventRequest implements HttpRequest {
  json?: unknown;
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

/** The API Gateway result of a response; `res.headers` becomes the result's (the caller hands over a copy). */
export function toResult(res: HttpResponse): APIGatewayProxyStructuredResultV2 {
  const headers: Record<string, string> = res.headers ?? {};
  if (res.body === undefined || res.status === 204 || res.status === 304) {
    if (isReadable(res.body)) res.body.destroy();
    return { statusCode: res.status, headers, body: '' };
  }
  if (isReadable(res.body)) {
    // Only reached where the runtime pipes (PIPES_RESPONSE): the chain buffered it otherwise.
    headers['content-type'] ??= 'application/octet-stream';
    const result: APIGatewayProxyStructuredResultV2 = { statusCode: res.status, headers, body: '' };
    hide(result, RESPONSE_STREAM, res.body);
    return result;
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
