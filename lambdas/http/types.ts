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
  body: Buffer;
  /** The parsed JSON body, when the route takes JSON and one was sent. */
  json?: unknown;
}

export interface HttpResponse {
  status: number;
  /** A Buffer or string is sent as is; anything else as JSON. */
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
  platform: Partial<RequestScope> & { route: RouteDef; req: HttpRequest };
}

/** A middleware of the chain: event and response types vary along it, the context is ours. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Middleware = import('@middy/core').MiddlewareObj<any, any, Error, PlatformContext>;
