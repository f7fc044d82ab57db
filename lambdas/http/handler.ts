/**
 * Builds a route's Lambda handler: the same function API Gateway invokes and the local server calls.
 * The handler body only parses, calls one service and shapes the answer; the chain does the rest.
 */
import middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Readable } from 'node:stream';
import { getEngine } from '../engine/index.js';
import { isReadable, LAMBDA_MAX_RESPONSE_BYTES, pipesResponse, toHttpRequest } from './event.js';
import { PlatformError, tooLargeCode } from '../shared/errors.js';
import { activity } from './middleware/activity.js';
import { credentials } from './middleware/credentials.js';
import { jsonBody } from './middleware/json-body.js';
import { operationIdRequired, pickOperationId } from './middleware/operation-id.js';
import { rateLimit } from './middleware/rate-limit.js';
import { respond } from './middleware/respond.js';
import { streamBody } from './middleware/stream-body.js';
import { routeById, type RouteDef } from './routes.js';
import type { HttpResponse, PlatformContext, RequestScope, RouteHandler } from './types.js';

export type LambdaHttpHandler = (event: APIGatewayProxyEventV2, context: Context) => Promise<APIGatewayProxyStructuredResultV2>;

/** `route` is a route id from the table (a RouteDef only in tests of the chain itself). */
export function httpHandler(route: string | RouteDef, handle: RouteHandler): LambdaHttpHandler;
export function httpHandler(routeOrId: string | RouteDef, handle: RouteHandler): LambdaHttpHandler {
  const route = typeof routeOrId === 'string' ? routeById(routeOrId) : routeOrId;
  const chain = middy<APIGatewayProxyEventV2, HttpResponse, Error, PlatformContext>({ timeoutEarlyInMillis: 0 })
    // activity() is registered before everything: its after and onError run after respond()'s, so it
    // records the final answer (status, error code, bytes out). The latency clock starts here.
    .use(activity())
    // The first step: the request, the latency clock, on the AI API the operation id every answer
    // echoes (picked before anything can fail, so a 401 or a 503 carries one too), then the engine.
    .before(async ({ event, context }) => {
      const req = toHttpRequest(event);
      const platform: PlatformContext['platform'] = { route, req, requestId: event.requestContext.requestId ?? randomUUID(), startedAt: performance.now() };
      if (route.api === 'ai') platform.operationId = pickOperationId(req);
      context.platform = platform;
      platform.engine = await getEngine();
    })
    // respond() is registered first so its onError runs last and sees every other middleware's error
    // (middy runs every onError, whichever step threw).
    .use(respond());
  chain.use(credentials());
  // The AI API has no per-credential call limit (its limits belong to routes and quotas, rate-limit.ts).
  if (route.api !== 'ai') chain.use(rateLimit());
  // The fallback has no operation to name, and the token exchange is plain OAuth: clients send no id.
  if (route.api === 'ai' && route.method !== 'ANY' && route.credentials !== 'none') chain.use(operationIdRequired());
  if ((route.body ?? 'json') === 'json') chain.use(jsonBody());
  if (route.body === 'stream') chain.use(streamBody());
  const lambda = chain.handler(async (event, context) => {
    const res = await handle(context.platform.req, context.platform as RequestScope);
    // A streamed answer: the local server pipes it; Lambda must return it whole (base64, 6 MB payload).
    if (isReadable(res.body) && !pipesResponse(event)) return { ...res, body: await readWhole(res.body, Number(res.headers?.['content-length'] ?? 0), route.api) };
    return res;
  });
  return lambda as unknown as LambdaHttpHandler;
}

/** Reads a streamed answer into memory for Lambda, refusing one over the Lambda payload limit. */
async function readWhole(body: Readable, declared: number, api: string): Promise<Buffer> {
  const tooLarge = () =>
    new PlatformError(tooLargeCode(api), `The answer is over the ${LAMBDA_MAX_RESPONSE_BYTES} bytes a function behind API Gateway may return.`);
  if (declared > LAMBDA_MAX_RESPONSE_BYTES) {
    body.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      size += (chunk as Buffer).length;
      if (size > LAMBDA_MAX_RESPONSE_BYTES) throw tooLarge();
      chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer));
    }
  } finally {
    body.destroy();
  }
  return Buffer.concat(chunks);
}
