/**
 * The one builder of API Gateway HTTP API (payload v2) events for tests, a Lambda context, and the
 * middy request a single middleware of the chain sees, so that each middleware can be called alone
 * (`before` / `after` / `onError`) on a plain event.
 */
import type middy from '@middy/core';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Principal } from '../../lambdas/auth/principal.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { API_POLICIES } from '../../lambdas/http/chain.js';
import { toHttpRequest } from '../../lambdas/http/event.js';
import { pickOperationId } from '../../lambdas/http/middleware/operation-id.js';
import { routeById, type RouteDef } from '../../lambdas/http/routes.js';
import type { HttpResponse, PlatformContext, RouteResult, Transport } from '../../lambdas/http/types.js';

export interface ApiEventOptions {
  /** Default GET. */
  method?: string;
  /** The raw path as sent (no query string); default `/`. */
  path?: string;
  /** API Gateway's route key; default `<method> <path>`. */
  routeKey?: string;
  headers?: Record<string, string>;
  query?: Record<string, string>;
  /** Path parameters, decoded. */
  params?: Record<string, string>;
  /** A string travels as is; a Buffer base64, with `isBase64Encoded` (as Lambda receives binary bodies). */
  body?: string | Buffer;
  /** Default: a fresh one per event. */
  requestId?: string;
  sourceIp?: string;
}

/** An API Gateway HTTP API (payload v2) event, shaped as API Gateway (and lambdas/local/http-server.ts) builds it. */
export function apiEvent(options: ApiEventOptions = {}): APIGatewayProxyEventV2 {
  const method = options.method ?? 'GET';
  const path = options.path ?? '/';
  const routeKey = options.routeKey ?? `${method} ${path}`;
  const headers = { ...options.headers };
  const query = options.query && Object.keys(options.query).length ? { ...options.query } : undefined;
  const params = options.params && Object.keys(options.params).length ? { ...options.params } : undefined;
  const binary = Buffer.isBuffer(options.body);
  const now = Date.now();
  return {
    version: '2.0',
    routeKey,
    rawPath: path,
    rawQueryString: query ? new URLSearchParams(query).toString() : '',
    headers,
    queryStringParameters: query,
    pathParameters: params,
    body: binary ? (options.body as Buffer).toString('base64') : (options.body as string | undefined),
    isBase64Encoded: binary,
    requestContext: {
      accountId: 'test',
      apiId: 'test',
      domainName: headers.host ?? 'localhost',
      domainPrefix: 'test',
      http: { method, path, protocol: 'HTTP/1.1', sourceIp: options.sourceIp ?? '127.0.0.1', userAgent: headers['user-agent'] ?? '' },
      requestId: options.requestId ?? randomUUID(),
      routeKey,
      stage: '$default',
      time: new Date(now).toISOString(),
      timeEpoch: now,
    },
  };
}

/** A Lambda context; `transport` is what a piping runtime adds beside it (handler.ts's RouteFunction). */
export function lambdaContext(over: Partial<Context> & { transport?: Transport } = {}): Context & { transport?: Transport } {
  const ignore = () => undefined;
  return {
    callbackWaitsForEmptyEventLoop: false,
    functionName: 'test',
    functionVersion: '$LATEST',
    invokedFunctionArn: 'arn:test:lambda:test',
    memoryLimitInMB: '1024',
    awsRequestId: randomUUID(),
    logGroupName: '/test',
    logStreamName: 'test',
    getRemainingTimeInMillis: () => 30_000,
    done: ignore,
    fail: ignore,
    succeed: ignore,
    ...over,
  };
}

/** A route of the test's own (the chain only reads its fields); default an AI POST on /v1/test. */
export const testRoute = (over: Partial<RouteDef> = {}): RouteDef => ({
  id: 'test.route',
  api: 'ai',
  method: 'POST',
  path: '/v1/test',
  handler: 'none',
  grants: [],
  ...over,
});

/** What one middleware of the chain is called with. */
export type PlatformRequest = middy.Request<APIGatewayProxyEventV2, RouteResult, Error, PlatformContext>;

export interface PlatformRequestOptions {
  /** A RouteDef, or a route id from the table. */
  route: RouteDef | string;
  /** An event, or the options of one (default: the route's method and path). */
  event?: APIGatewayProxyEventV2 | ApiEventOptions;
  /** The chain's engine (context.platform.engine), as getEngine() gives it. */
  engine?: Engine;
  /** As credentials() sets it, for the middlewares that run after it. */
  principal?: Principal;
  /** A piping runtime's transport (`mode`, and on stream routes the unread body). Default: none, i.e. buffered. */
  transport?: Transport;
  /** Default: on the AI API, pickOperationId() of the request, as the chain's first step does; elsewhere none. */
  operationId?: string;
  /** What the handler answered (for `after`), or the result built so far. */
  response?: HttpResponse | RouteResult;
  /** What was thrown (for `onError`). */
  error?: Error;
}

/**
 * The middy request a middleware sees once the chain's first step ran: `context.platform` built as
 * lambdas/http/handler.ts builds it (request, call fields, request id, latency clock, AI operation id,
 * engine), plus the principal when given.
 */
export function platformRequest(options: PlatformRequestOptions): PlatformRequest {
  const route = typeof options.route === 'string' ? routeById(options.route) : options.route;
  const given = options.event;
  const event =
    given && 'requestContext' in given
      ? given
      : apiEvent({ method: route.method === 'ANY' ? 'GET' : route.method, path: route.path === '$default' ? '/' : route.path, ...given });
  const context = lambdaContext({ transport: options.transport }) as PlatformContext;
  const req = toHttpRequest(event, options.transport?.bodyStream);
  const call = { api: route.api, method: req.method, route: route.path === '$default' ? req.path : route.path, country: req.headers['cloudfront-viewer-country'] ?? null };
  context.platform = { route, req, call, requestId: event.requestContext.requestId ?? randomUUID(), startedAt: performance.now() };
  const operationId = options.operationId ?? (API_POLICIES[route.api].operationIds ? pickOperationId(req) : undefined);
  if (operationId !== undefined) context.platform.operationId = operationId;
  if (options.engine) context.platform.engine = options.engine;
  if (options.principal) context.platform.principal = options.principal;
  return { event, context, response: (options.response ?? null) as RouteResult | null, error: options.error ?? null, internal: {} };
}
