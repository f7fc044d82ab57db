/**
 * Builds a route's Lambda handler: the same function API Gateway invokes and the local server calls.
 * The handler body only parses, calls one service and shapes the answer; the chain does the rest.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { randomUUID } from 'node:crypto';
import { getEngine } from '../engine/index.js';
import { toHttpRequest } from './event.js';
import { credentials } from './middleware/credentials.js';
import { jsonBody } from './middleware/json-body.js';
import { operationIdEcho, operationIdRequired } from './middleware/operation-id.js';
import { respond } from './middleware/respond.js';
import { routeById, type RouteDef } from './routes.js';
import type { HttpResponse, PlatformContext, RequestScope, RouteHandler } from './types.js';

export type LambdaHttpHandler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyStructuredResultV2>;

/** `route` is a route id from the table (a RouteDef only in tests of the chain itself). */
export function httpHandler(route: string | RouteDef, handle: RouteHandler): LambdaHttpHandler;
export function httpHandler(routeOrId: string | RouteDef, handle: RouteHandler): LambdaHttpHandler {
  const route = typeof routeOrId === 'string' ? routeById(routeOrId) : routeOrId;
  const chain = middy<APIGatewayProxyEventV2, HttpResponse, Error, PlatformContext>({ timeoutEarlyInMillis: 0 })
    .before(async ({ event, context }) => {
      context.platform = { route, req: toHttpRequest(event), requestId: event.requestContext.requestId ?? randomUUID() };
    })
    // respond() is registered first so its onError runs last and sees every other middleware's error.
    .use(respond());
  if (route.api === 'ai') chain.use(operationIdEcho());
  chain.before(async ({ context }) => {
    context.platform.engine = await getEngine();
  });
  chain.use(credentials());
  // The fallback has no operation to name, and the token exchange is plain OAuth: clients send no id.
  if (route.api === 'ai' && route.method !== 'ANY' && route.credentials !== 'none') chain.use(operationIdRequired());
  if (route.body !== 'raw') chain.use(jsonBody());
  const lambda = chain.handler(async (_event, context) => handle(context.platform.req, context.platform as RequestScope));
  return lambda as unknown as LambdaHttpHandler;
}
