import type { Readable } from 'node:stream';
import type { Context } from 'aws-lambda';
import type { Engine } from '../engine/ports.js';
import type { Principal } from '../auth/principal.js';
import type { RouteDef } from './routes.js';

/** A request as handlers see it, built from the API Gateway HTTP API (payload v2) event. */
export interface HttpRequest {
  method: string;
  /** Raw path, still percent-encoded. */
  path: string;
  /** Path parameters, decoded. */
  params: Record<string, string>;
  query: Record<string, string>;
  /** Lower-case header names. */
  headers: Record<string, string>;
  /** The whole body; always empty on `body: 'stream'` routes served by the local server (read `stream()`). */
  body: Buffer;
  /** The parsed JSON body, when the route takes JSON and one was sent. */
  json?: unknown;
  /**
   * The body as a stream; may be called once. On `body: 'stream'` routes the local server hands the
   * socket's stream (never buffered) and the chain counts its bytes against the route's
   * `maxBodyBytes`; in Lambda (and on other routes) it streams the bytes of `body`.
   */
  stream(): Readable;
}

export interface HttpResponse {
  status: number;
  /**
   * A Buffer or string is sent as is; a Readable is piped by the local server without buffering,
   * and read whole in Lambda (at most LAMBDA_MAX_RESPONSE_BYTES, else 413: see docs/data/blobs.md);
   * anything else as JSON.
   */
  body?: unknown;
  headers?: Record<string, string>;
}

/** What the middleware chain hands the handler beside the request. */
export interface RequestScope {
  route: RouteDef;
  engine: Engine;
  principal: Principal;
  operationId?: string;
  requestId: string;
}

export type RouteHandler = (req: HttpRequest, scope: RequestScope) => Promise<HttpResponse>;

/** The Lambda context, carrying the chain's state between middlewares. */
export interface PlatformContext extends Context {
  /** `startedAt`: performance.now() when the chain began, for the activity record's latency. */
  platform: Partial<RequestScope> & { route: RouteDef; req: HttpRequest; startedAt?: number };
}

/** A middleware of the chain: event and response types vary along it, the context is ours. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Middleware = import('@middy/core').MiddlewareObj<any, any, Error, PlatformContext>;
