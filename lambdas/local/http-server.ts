/**
 * The local runtime's HTTP side: it only translates node:http requests into API Gateway HTTP API
 * (payload v2) events, calls the route's Lambda handler, and writes the result back (DESIGN property 1).
 * Like API Gateway's access logs, it writes one line per request (`accessLog`).
 */
import { STATUS_CODES, createServer, type IncomingMessage, type OutgoingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { performance } from 'node:perf_hooks';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import type { RouteFunction } from '../http/handler.js';
import { PlatformError, tooLargeCode } from '../shared/errors.js';
import { errorBody } from '../http/error-response.js';
import type { RouteApi } from '../shared/api.js';
import type { RouteDef } from '../http/routes.js';
import type { PlatformContext, Transport } from '../http/types.js';
import type { StreamGrant } from '../events/stream.js';
import { log, logSoon } from '../shared/log.js';
import { Router } from '../http/router.js';
import { API_POLICIES } from '../http/chain.js';
import { operationIdFor } from '../http/middleware/operation-id.js';
import { CONSOLE_SECURITY_HEADERS } from '../shared/console-headers.js';
import { LARGE_BODY_BYTES, largeBodyTurns } from './large-body-turns.js';

const NO_BODY = Buffer.alloc(0);

/** API Gateway refuses payloads over 10 MiB before any function runs. */
export const GATEWAY_MAX_BODY_BYTES = 10 * 1024 * 1024;

export type HandlerLoader = (route: RouteDef) => Promise<RouteFunction>;

/**
 * What a server that takes WebSocket upgrades (the Events API's) is given. An upgrade request runs its
 * route's function like any request (the whole chain: credentials, rate limit, permission, workspace,
 * activity); the function is offered the upgrade only on a valid handshake, and accepts it by answering
 * 101. Any other answer is written back as HTTP, then the connection is closed.
 */
export interface Upgrades {
  /** A WebSocket handshake this server can complete (GET, `Upgrade: websocket`, a key, version 13). */
  handshake(req: IncomingMessage): boolean;
  /** Headers the route's function sees beside the request's own (a browser's `bearer.<key>` subprotocol as Authorization). */
  extraHeaders(req: IncomingMessage): Record<string, string> | undefined;
  /** Completes the upgrade the route accepted and serves the socket; `headers` go on the 101 (the route's answer headers, x-request-id among them). */
  complete(req: IncomingMessage, socket: Duplex, head: Buffer, grant: StreamGrant, headers?: Record<string, string>): void;
  /** The route accepted but the upgrade cannot go on (the client left): give back what it took. */
  abandon(grant: StreamGrant): void;
}

/**
 * A server whose API lives under a path (the console's, `/console/api/`) and serves pages beside it:
 * a request outside `prefix` goes to `serve` (console-files.ts), never to a route.
 */
export interface Pages {
  prefix: string;
  serve(req: IncomingMessage, res: ServerResponse): void;
}

export async function createApiServer(api: RouteApi, table: readonly RouteDef[], load: HandlerLoader, upgrades?: Upgrades, pages?: Pages): Promise<Server> {
  const router = new Router(api, table);
  const handlers = new Map<string, RouteFunction>();
  for (const route of table.filter((r) => r.api === api)) handlers.set(route.id, await load(route));

  const server = createServer(async (req, res) => {
    const access: Access = { req, startedAt: performance.now(), status: 500 };
    try {
      const url = parseTarget(req.url ?? '/');
      if (pages && !url.pathname.startsWith(pages.prefix)) {
        access.status = 0;
        return pages.serve(req, res);
      }
      // Matched before the body is read: a streaming route's body is handed over unread.
      const { route, params } = router.match(req.method ?? 'GET', url.pathname);
      access.route = route.id;
      const streaming = route.body === 'stream';
      let body: Buffer = NO_BODY;
      // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 6.3).
      const hasBody = req.headers['content-length'] !== undefined || req.headers['transfer-encoding'] !== undefined;
      if (!streaming && hasBody) {
        const read = await readBody(req, GATEWAY_MAX_BODY_BYTES);
        if (read === undefined) {
          const err = new PlatformError(tooLargeCode(api), `The body is over ${GATEWAY_MAX_BODY_BYTES} bytes.`);
          access.requestId = randomUUID();
          const headers: Record<string, string> = { ...ownHeaders(api), 'content-type': 'application/json', connection: 'close', 'x-request-id': access.requestId };
          // Every AI answer echoes the operation id, this refusal too (API Gateway's own, on AWS, cannot).
          if (API_POLICIES[api].operationIds) headers['x-operation-id'] = operationIdFor(headerOf(req, 'x-operation-id'));
          access.status = 413;
          return send(res, 413, headers, JSON.stringify(errorBody(err)));
        }
        body = read;
      }
      const event = toEvent(api, req, url, route, params, body);
      access.requestId = event.requestContext.requestId;
      const transport: Transport = { mode: 'piped', concurrent: true, bodyStream: streaming ? req : undefined, body, onClientGone: (listener) => clientGone(res, listener) };
      if (route.storesBody && body.length >= LARGE_BODY_BYTES) transport.shareLargeBody = (org) => largeBodyTurns.take(org).then((release) => void (access.release = release));
      const context = lambdaContext(route, access.requestId, transport);
      const result = await handlers.get(route.id)!(event, context);
      // The turn covers the handler's work, not the answer's writing (a slow reader holds nothing).
      access.release?.();
      access.status = result.statusCode ?? 200;
      access.organizationId = context.platform?.principal?.organizationId;
      const headers: Record<string, string | number | boolean | string[]> = result.headers ?? {};
      // Several cookies: API Gateway's `cookies`, one Set-Cookie header each.
      if (result.cookies?.length) headers['set-cookie'] = result.cookies;
      if (streaming && !req.complete) {
        // Answered before the body was read to its end (an early error): drop the rest and the connection.
        headers.connection = 'close';
        if (!req.destroyed) req.resume();
      }
      if (result.stream) return await pipeOut(req, res, result.statusCode ?? 200, headers, result.stream);
      // A text body goes out as the string: node:http writes it with the head in one write.
      const payload = result.body ? (result.isBase64Encoded ? Buffer.from(result.body, 'base64') : result.body) : undefined;
      send(res, result.statusCode ?? 200, headers, payload);
    } catch (error) {
      // Handlers map their own errors; reaching here is a bug in the runtime itself.
      log.error('local runtime error', { error: String((error as Error)?.stack ?? error) });
      const err = new PlatformError('internal_error', 'The service failed to answer; retry later.');
      access.status = 500;
      access.requestId ??= randomUUID();
      if (!res.headersSent) send(res, 500, { ...ownHeaders(api), 'content-type': 'application/json', 'x-request-id': access.requestId }, JSON.stringify(errorBody(err)));
      else res.destroy();
    } finally {
      if (access.organizationId) largeBodyTurns.seen(access.organizationId);
      access.release?.(); // a handler that threw
      // A page of the console (pages.serve) is no API request: no access line.
      if (access.status !== 0) accessLog(access);
    }
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => answerClientError(api, error, socket));
  if (upgrades) server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void upgrade(req, socket, head, upgrades));

  async function upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, upgrades: Upgrades) {
    socket.on('error', () => socket.destroy());
    let grant: StreamGrant | undefined;
    const access: Access = { req, startedAt: performance.now(), status: 500 };
    try {
      const url = parseTarget(req.url ?? '/');
      const { route, params } = router.match(req.method ?? 'GET', url.pathname);
      access.route = route.id;
      // The body of an upgrade request is not read: every route sees none.
      const event = toEvent(api, req, url, route, params, NO_BODY, upgrades.extraHeaders(req));
      access.requestId = event.requestContext.requestId;
      const offer = upgrades.handshake(req) ? { connectionId: randomUUID(), accept: (g: StreamGrant) => void (grant = g) } : undefined;
      const transport: Transport = { mode: 'piped', concurrent: true, upgrade: offer };
      const context = lambdaContext(route, access.requestId, transport);
      const result = await handlers.get(route.id)!(event, context);
      access.status = result.statusCode ?? 200;
      access.organizationId = context.platform?.principal?.organizationId;
      if (grant && result.statusCode === 101) {
        if (socket.destroyed || !socket.writable) return upgrades.abandon(grant);
        return upgrades.complete(req, socket, head, grant, result.headers as Record<string, string> | undefined);
      }
      if (grant) upgrades.abandon(grant);
      result.stream?.destroy();
      const payload = result.body ? (result.isBase64Encoded ? Buffer.from(result.body, 'base64') : result.body) : undefined;
      writeRaw(socket, result.statusCode ?? 200, result.headers ?? {}, payload);
    } catch (error) {
      if (grant) upgrades.abandon(grant);
      log.error('local runtime error', { error: String((error as Error)?.stack ?? error) });
      const err = new PlatformError('internal_error', 'The service failed to answer; retry later.');
      access.status = 500;
      access.requestId ??= randomUUID();
      writeRaw(socket, 500, { 'content-type': 'application/json', 'x-request-id': access.requestId }, JSON.stringify(errorBody(err)));
    } finally {
      accessLog(access);
    }
  }
  // Idle keep-alive connections stay open a minute (Node's default is 5 s), as load balancers keep
  // theirs: a client that reuses a connection after a pause (a process whose event loop was busy, a
  // test spawning CLI commands synchronously) would otherwise race the server closing it and get
  // "other side closed". Shutdown drops idle connections at once (platform.ts).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  return server;
}

/** What the access line of a request says, filled in as the request is served. */
interface Access {
  req: IncomingMessage;
  startedAt: number;
  /** The route table's id; absent only when the runtime failed before matching. */
  route?: string;
  status: number;
  requestId?: string;
  /** Known once the credential resolved (the chain's principal). */
  organizationId?: string;
  /** Ends the organization's large-body turn (LargeBodyTurns) the request took. */
  release?: () => void;
}

/**
 * The access line of a request, at info level, once its answer is queued or, for a piped answer,
 * written to its end: method, route id, status, duration (0.1 ms), request id (the `x-request-id`
 * the answer carried) and organization. No path or query: they may hold record ids and user input.
 * Written with the turn's other access lines in one write (logSoon), not one write per request.
 */
function accessLog(a: Access) {
  logSoon('info', 'request', {
    method: a.req.method,
    route: a.route ?? null,
    status: a.status,
    duration_ms: Math.round((performance.now() - a.startedAt) * 10) / 10,
    request_id: a.requestId ?? null,
    organization_id: a.organizationId ?? null,
  });
}

/**
 * Headers every answer of an API carries even when the runtime answers before the chain (a body over the
 * gateway's limit, a request that is not HTTP, a runtime failure): the console's security headers, so no
 * answer of the console's origin may be framed or sniffed.
 */
const ownHeaders = (api: RouteApi): Readonly<Record<string, string>> => (API_POLICIES[api].console ? CONSOLE_SECURITY_HEADERS : {});

/**
 * A request node:http's parser refuses (duplicate Content-Length, headers over 16 KB, a malformed
 * chunk) never reaches a handler. Node would answer a bare `400 Bad Request` or `431` without a body;
 * this answers the one JSON error shape instead, as API Gateway answers its own refusals with a body,
 * then closes the connection (the parser cannot go on). As Node does, nothing is written when the
 * socket is gone or an answer on it has already started; a request timeout keeps Node's bare 408.
 */
function answerClientError(api: RouteApi, error: NodeJS.ErrnoException, socket: Duplex) {
  const inFlight = (socket as Duplex & { _httpMessage?: ServerResponse | null })._httpMessage;
  if (socket.writable && !inFlight?.headersSent && error.code !== 'ECONNRESET') {
    if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      socket.write('HTTP/1.1 408 Request Timeout\r\nconnection: close\r\n\r\n');
    } else {
      const err =
        error.code === 'HPE_HEADER_OVERFLOW'
          ? new PlatformError('request_header_fields_too_large', 'The request headers are over 16 KB.')
          : error.code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW'
            ? new PlatformError(tooLargeCode(api), 'The chunk extensions of the body are too large.')
            : new PlatformError('invalid_body', 'The request is not valid HTTP/1.1 (for example, two Content-Length headers).');
      const body = JSON.stringify(errorBody(err));
      const own = Object.entries(ownHeaders(api)).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      socket.write(
        `HTTP/1.1 ${err.status} ${STATUS_CODES[err.status]}\r\n${own}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
    }
  }
  socket.destroy();
}

/** Writes an answer on a socket node:http no longer serves (an upgrade request), then closes it. */
function writeRaw(socket: Duplex, status: number, headers: Record<string, string | number | boolean>, body?: Buffer | string) {
  if (socket.destroyed || !socket.writable) return socket.destroy();
  const lines = [`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`];
  for (const [k, v] of Object.entries(headers)) {
    if (k.toLowerCase() !== 'content-length' && k.toLowerCase() !== 'connection') lines.push(`${k}: ${String(v)}`);
  }
  lines.push(`content-length: ${body === undefined ? 0 : Buffer.byteLength(body)}`, 'connection: close', '', '');
  socket.end(body === undefined ? lines.join('\r\n') : Buffer.concat([Buffer.from(lines.join('\r\n')), Buffer.from(body)]));
}

/** Pipes a streamed answer (a download) to the socket without buffering it; HEAD gets the headers only. */
async function pipeOut(req: IncomingMessage, res: ServerResponse, status: number, headers: Record<string, string | number | boolean | string[]>, body: Readable) {
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) out[k] = Array.isArray(v) ? v : String(v);
  res.writeHead(status, out);
  if (req.method === 'HEAD') {
    body.destroy();
    res.end();
    return;
  }
  try {
    await pipeline(body, res);
  } catch (error) {
    // The client went away, or the source failed after the headers were sent: nothing left to answer.
    log.debug('download interrupted', { error: String(error) });
    res.destroy();
  }
}

interface Answer {
  res: ServerResponse;
  status: number;
  headers: OutgoingHttpHeaders;
  body?: Buffer | string;
}

/**
 * Answers ready in one event-loop turn are written together at its end (setImmediate), not one by one
 * as each handler finishes. Under load many connections are served per turn, and a write to a client
 * that went idle waiting costs a wake-up in the kernel; written back to back, one wake-up serves them
 * all (docs/benchmarks.md: a server spending 20 µs a request went from 24,846 to 31,855 req/s). A lone
 * request waits only for the rest of the turn it was handled in.
 */
let answers: Answer[] = [];

function writeAnswers() {
  const batch = answers;
  answers = [];
  for (const a of batch) {
    if (a.res.destroyed) continue;
    a.res.writeHead(a.status, a.headers);
    a.res.end(a.body);
  }
}

/** Queues an answer; `headers` (the handler's result's own object) gains the content-length. */
function send(res: ServerResponse, status: number, headers: Record<string, string | number | boolean | string[]>, body?: Buffer | string) {
  // node:http takes strings and numbers; a Lambda result may also hold booleans.
  for (const k in headers) if (typeof headers[k] === 'boolean') headers[k] = String(headers[k]);
  if (body !== undefined) headers['content-length'] = Buffer.byteLength(body);
  if (answers.push({ res, status, headers: headers as OutgoingHttpHeaders, body }) === 1) setImmediate(writeAnswers);
}

/** Reads the whole body, or returns undefined once it passes `max` bytes. */
function readBody(req: IncomingMessage, max: number): Promise<Buffer | undefined> {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > max) {
    req.resume();
    return Promise.resolve(undefined);
  }
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > max) over = true;
      else chunks.push(chunk);
    });
    req.on('end', () => resolve(over ? undefined : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export interface Target {
  pathname: string;
  /** The query string with its `?`, or empty. */
  search: string;
}

/** Splits the request target as received: API Gateway's rawPath is the path as sent, not normalized. */
export function parseTarget(target: string): Target {
  const q = target.indexOf('?');
  return q < 0 ? { pathname: target, search: '' } : { pathname: target.slice(0, q), search: target.slice(q) };
}

/**
 * The query string as API Gateway's queryStringParameters (repeated names joined with commas), in an
 * object without a prototype: `__proto__` or `constructor` is a name like any other, never inherited.
 */
export function queryParameters(search: string): Record<string, string> {
  const query = Object.create(null) as Record<string, string>;
  for (const [k, v] of new URLSearchParams(search)) query[k] = Object.hasOwn(query, k) ? `${query[k]},${v}` : v;
  return query;
}

/** The last millisecond's ISO text: many events share it under load. */
const isoOf = { ms: -1, text: '' };

export function toEvent(api: RouteApi, req: IncomingMessage, url: Target, route: RouteDef, params: Record<string, string>, body: Buffer, extra?: Record<string, string>): APIGatewayProxyEventV2 {
  const headers: Record<string, string> = {};
  const sent = req.headers;
  for (const k in sent) {
    // As API Gateway (payload v2) hands cookies: in `cookies`, not as a header (http/event.ts puts them back).
    if (k === 'cookie') continue;
    const v = sent[k];
    if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(',') : v;
  }
  if (extra) Object.assign(headers, extra);
  const cookies = sent.cookie?.split(/;\s*/).filter(Boolean);
  const query = url.search ? queryParameters(url.search) : undefined;
  const routeKey = route.path === '$default' ? '$default' : `${route.method} ${route.path}`;
  const now = Date.now();
  if (now !== isoOf.ms) isoOf.text = new Date((isoOf.ms = now)).toISOString();
  const event: APIGatewayProxyEventV2 = {
    version: '2.0',
    routeKey,
    rawPath: url.pathname,
    rawQueryString: url.search.slice(1),
    cookies: cookies?.length ? cookies : undefined,
    headers,
    queryStringParameters: query && Object.keys(query).length ? query : undefined,
    pathParameters: hasAny(params) ? params : undefined,
    body: undefined,
    isBase64Encoded: body.length > 0,
    requestContext: {
      accountId: 'local',
      apiId: api,
      domainName: headers.host ?? 'localhost',
      domainPrefix: api,
      http: {
        method: req.method ?? 'GET',
        path: url.pathname,
        protocol: `HTTP/${req.httpVersion}`,
        sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
        userAgent: headers['user-agent'] ?? '',
      },
      requestId: randomUUID(),
      routeKey,
      stage: '$default',
      time: isoOf.text,
      timeEpoch: now,
    },
  };
  // The handler takes the bytes from the transport (Transport.body): the event's base64 copy, as API
  // Gateway sends a body, is made only if something reads it (two passes over a 200 KB body otherwise).
  if (body.length) {
    Object.defineProperty(event, 'body', {
      enumerable: true,
      configurable: true,
      get: () => {
        const encoded = body.toString('base64');
        Object.defineProperty(event, 'body', { value: encoded, enumerable: true, writable: true });
        return encoded;
      },
    });
  }
  return event;
}

/** A request header as one string (node:http gives an array for a few repeated ones). */
function headerOf(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(',') : v;
}

function hasAny(map: Record<string, string>): boolean {
  for (const _ in map) return true;
  return false;
}

const remainingTime = () => 30_000;
const ignore = () => undefined;

/**
 * Lambda's context, plus how this runtime takes answers (a literal: it is built for every request).
 * The chain keeps its state in it (`platform`): the access line reads the caller's organization there.
 */
function lambdaContext(route: RouteDef, requestId: string, transport: Transport): Context & { transport: Transport; platform?: PlatformContext['platform'] } {
  return {
    transport,
    callbackWaitsForEmptyEventLoop: false,
    functionName: route.id,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:local:lambda:${route.id}`,
    memoryLimitInMB: '1024',
    awsRequestId: requestId,
    logGroupName: `/local/${route.id}`,
    logStreamName: 'local',
    getRemainingTimeInMillis: remainingTime,
    done: ignore,
    fail: ignore,
    succeed: ignore,
  };
}

/** Transport.onClientGone: the response closed before it was written to its end means the client left. */
function clientGone(res: ServerResponse, listener: () => void): () => void {
  const closed = () => {
    if (!res.writableFinished) listener();
  };
  res.once('close', closed);
  return () => res.off('close', closed);
}
