/**
 * Builds a route's Lambda handler: the same function API Gateway invokes and the local server calls.
 * The handler body only parses, calls one service and shapes the answer; the chain (chain.ts) does
 * the rest.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { getEngine } from '../engine/index.js';
import { PlatformError, tooLargeCode } from '../shared/errors.js';
import { setInvocationIds, type LogContext } from '../shared/log.js';
import { settings } from '../shared/settings.js';
import { API_POLICIES, chainFor, scopedToWorkspace } from './chain.js';
import { isReadable, LAMBDA_MAX_BODY_BYTES, toHttpRequest } from './event.js';
import { bindHooks } from './hook-bindings.js';
import { OPERATION_ID_PATTERN, pickOperationId } from './middleware/operation-id.js';
import { routeById, type RouteDef } from './routes.js';
import type { HttpResponse, PlatformContext, RequestScope, RouteHandler, RouteResult, Transport, WorkspaceRouteHandler, WorkspaceScope } from './types.js';

/**
 * A route's function. Lambda calls it with its own context (`buffered` mode); a runtime that pipes
 * answers (the local server) adds a `transport` to the context, and then gets a Readable body back
 * as `stream` instead of reading it whole.
 */
export type RouteFunction = (event: APIGatewayProxyEventV2, context: Context & { transport?: Transport }) => Promise<RouteResult>;

/** The context as the chain receives it: the route function adds the request's log ids. */
type ChainContext = Context & { transport?: Transport; logIds?: LogContext };

// Cold start: a bad setting stops the function here, with a message naming the variable.
settings();
bindHooks();

/** `route` is a route id from the table (a RouteDef only in tests of the chain itself). */
export function httpHandler(routeOrId: string | RouteDef, handle: RouteHandler): RouteFunction {
  const route = typeof routeOrId === 'string' ? routeById(routeOrId) : routeOrId;
  const { names, middlewares } = chainFor(route);
  // The first step below goes between these two: activity outermost, respond around everything else.
  if (names[0] !== 'activity' || names[1] !== 'respond') throw new Error(`route ${route.id}: the chain must open with activity and respond`);
  const [activity, respond, ...rest] = middlewares;
  const carriesOperationIds = API_POLICIES[route.api].operationIds;
  const templated = route.path === '$default' ? undefined : route.path;
  const chain = middy<APIGatewayProxyEventV2, HttpResponse, Error, PlatformContext>({ timeoutEarlyInMillis: 0 })
    .use(activity)
    // The first step: the request, the latency clock, on an API with operation ids the id every answer
    // echoes (picked before anything can fail, so a 401 or a 503 carries one too), then the engine.
    .before(async ({ event, context }) => {
      const req = toHttpRequest(event, context.transport?.bodyStream, context.transport?.body);
      const country = req.headers['cloudfront-viewer-country'];
      // Set by the route function below, the chain's only caller.
      const logIds = (context as ChainContext).logIds!;
      const call = { api: route.api, method: req.method, route: templated ?? req.path, country: country ?? null };
      const platform: PlatformContext['platform'] = { route, req, call, requestId: logIds.request_id!, logIds, startedAt: performance.now() };
      if (carriesOperationIds) platform.operationId = pickOperationId(req);
      // Log lines name the operation: the AI API's echoed id, elsewhere a well-formed X-Operation-Id sent.
      const sentOperationId = req.headers['x-operation-id'];
      const operationId = platform.operationId ?? (sentOperationId && OPERATION_ID_PATTERN.test(sentOperationId) ? sentOperationId : undefined);
      if (operationId) logIds.operation_id = operationId;
      if (context.transport?.mode !== 'piped') platform.inlineBodyBytes = LAMBDA_MAX_BODY_BYTES;
      if (context.transport?.upgrade) platform.upgrade = context.transport.upgrade;
      if (context.transport?.onClientGone) platform.onClientGone = context.transport.onClientGone;
      if (context.transport?.shareLargeBody) platform.shareLargeBody = context.transport.shareLargeBody;
      context.platform = platform;
      platform.engine = await getEngine();
    })
    .use(respond);
  for (const middleware of rest) chain.use(middleware);
  const lambda = chain.handler(async (_event, context) => {
    const res = await handle(context.platform.req, context.platform as RequestScope);
    // A streamed answer in buffered mode (Lambda behind API Gateway): read whole, within the 6 MB payload.
    if (isReadable(res.body) && context.transport?.mode !== 'piped') {
      return { ...res, body: await readWhole(res.body, Number(res.headers?.['content-length'] ?? 0), route.api) };
    }
    return res;
  });
  const routeFunction = lambda as unknown as RouteFunction;
  // The request's ids: API Gateway's request id, else the invocation's, else one made up. The chain
  // and its answer carry them (platform.logIds); on Lambda every line of the invocation does too.
  return (event, context) => {
    const logIds: LogContext = { request_id: event.requestContext.requestId || context?.awsRequestId || randomUUID() };
    if (!context?.transport?.concurrent) setInvocationIds(logIds);
    return routeFunction(event, Object.assign(context ?? {}, { logIds }) as ChainContext);
  };
}

/**
 * httpHandler() for a route whose path names `{workspace_id}`: the handler receives the workspace the
 * chain checked against the credential, typed (`scope.workspace`). A route without the parameter
 * stops at cold start.
 */
export function workspaceHandler(routeOrId: string | RouteDef, handle: WorkspaceRouteHandler): RouteFunction {
  const route = typeof routeOrId === 'string' ? routeById(routeOrId) : routeOrId;
  if (!scopedToWorkspace(route)) throw new Error(`route ${route.id}: workspaceHandler() needs a {workspace_id} in the path`);
  return httpHandler(route, (req, scope) => {
    if (!scope.workspace) throw new Error(`route ${route.id}: the chain set no workspace`);
    return handle(req, scope as WorkspaceScope);
  });
}

/** Reads a streamed answer into memory for Lambda, refusing one over the Lambda payload limit. */
async function readWhole(body: Readable, declared: number, api: string): Promise<Buffer> {
  const tooLarge = () =>
    new PlatformError(tooLargeCode(api), `The answer is over the ${LAMBDA_MAX_BODY_BYTES} bytes a function behind API Gateway may return.`);
  if (declared > LAMBDA_MAX_BODY_BYTES) {
    body.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      size += (chunk as Buffer).length;
      if (size > LAMBDA_MAX_BODY_BYTES) throw tooLarge();
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    }
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks);
}
