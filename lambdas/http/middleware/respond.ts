import type middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { errorResponse } from '../error-response.js';
import { toResult } from '../event.js';
import type { HttpResponse, Middleware, PlatformContext } from '../types.js';
import { corsHeaders } from '../cors.js';

type Request = middy.Request<APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2, Error, PlatformContext>;

/**
 * Outermost middleware: turns the handler's HttpResponse, or any error, into the API Gateway result.
 * Errors become the one JSON error shape; anything unexpected is logged and answered as a bare 500
 * with no detail (never a stack trace). Data and Events answers get their CORS headers here, errors too.
 */
export function respond(): Middleware {
  const finish = async (request: Request, res: HttpResponse) => {
    const headers = { ...res.headers };
    const platform = request.context.platform;
    if (platform?.operationId) headers['x-operation-id'] = platform.operationId;
    const origin = platform?.req.headers.origin;
    if (origin !== undefined && platform.route.api !== 'ai' && platform.engine) {
      Object.assign(headers, await corsHeaders(platform.engine, origin, platform.principal).catch(() => ({ vary: 'Origin' })));
    }
    request.response = toResult({ status: res.status, body: res.body, headers });
  };
  return {
    after: (request) => finish(request, request.response as unknown as HttpResponse),
    onError: (request) => finish(request, errorResponse(request.error, request.context.platform?.route.id)),
  };
}
