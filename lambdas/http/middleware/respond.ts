import type middy from '@middy/core';
import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { ApiError } from '../errors.js';
import { toResult } from '../event.js';
import type { HttpResponse, Middleware, PlatformContext } from '../types.js';
import { log } from '../../shared/log.js';
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
    onError: async (request) => {
      const error = request.error;
      if (error instanceof ApiError) {
        await finish(request, { status: error.status, body: error.toBody(), headers: error.headers });
        return;
      }
      const mapped = mapEngineError(error);
      if (!mapped) log.error('unhandled error', { route: request.context.platform?.route.id, error: String(error?.stack ?? error) });
      const apiError = mapped ?? new ApiError(500, 'internal_error', 'The service failed to answer; retry later.');
      await finish(request, { status: apiError.status, body: apiError.toBody() });
    },
  };
}

function mapEngineError(error: Error | null | undefined): ApiError | undefined {
  if (error?.name === 'EngineUnavailableError') return new ApiError(503, 'service_unavailable', 'The service is briefly unavailable; retry.');
  return undefined;
}
