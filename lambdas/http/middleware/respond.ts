import type middy from '@middy/core';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { errorBody, errorResponse } from '../error-response.js';
import { toResult } from '../event.js';
import type { HttpResponse, Middleware, PlatformContext, RouteResult } from '../types.js';
import { corsHeaders } from '../cors.js';
import type { LogContext } from '../../shared/log.js';
import { PlatformError } from '../../shared/errors.js';
import { clearedCookies } from '../cookies.js';
import { secureCookies } from '../console-origin.js';
import { CONSOLE_SECURITY_HEADERS } from '../../shared/console-headers.js';

type Request = middy.Request<APIGatewayProxyEventV2, RouteResult, Error, PlatformContext>;

export interface RespondOptions {
  /** Data and Events: answers to a browser carry CORS headers, errors too. The AI API answers none. */
  cors: boolean;
  /**
   * The console API: every answer carries the console's security headers (CONSOLE_SECURITY_HEADERS),
   * and a `401 not_signed_in` clears the session cookies the browser still holds.
   */
  console?: boolean;
  /**
   * The OpenAI compatibility routes: the official SDK retries every 409 unless told not to. A conflict
   * a retry cannot change (an id used for another call, a state to change first) says so with
   * `x-should-retry: false`; `operation_in_progress` (the same call still running) stays retryable.
   */
  openAiRetries?: boolean;
}

/**
 * Outermost middleware but for activity(): turns the handler's HttpResponse, or any error, into the
 * route's result. Errors become the one JSON error shape; anything unexpected is logged and answered as
 * a bare 500 with no detail (never a stack trace). Every answer carries `x-request-id`, the id its log
 * lines and activity records carry, and echoes the operation id when there is one.
 */
export function respond(options: RespondOptions): Middleware {
  const finish = async (request: Request, res: HttpResponse) => {
    const headers = { ...res.headers };
    const platform = request.context.platform;
    // The first step may have failed before it set the platform: the route function named the request.
    const requestId = platform?.requestId ?? (request.context as { logIds?: LogContext }).logIds?.request_id;
    if (requestId) headers['x-request-id'] = requestId;
    if (platform?.operationId) headers['x-operation-id'] = platform.operationId;
    const origin = platform?.req.headers.origin;
    if (options.cors && origin !== undefined && platform.engine) {
      Object.assign(headers, await corsHeaders(platform.engine, origin, platform.principal).catch(() => ({ vary: 'Origin' })));
    }
    let cookies = res.cookies;
    if (options.console) {
      Object.assign(headers, CONSOLE_SECURITY_HEADERS, { 'cache-control': 'no-store' });
      if (request.error instanceof PlatformError && request.error.code === 'not_signed_in') cookies = clearedCookies(secureCookies());
    }
    request.response = toResult({ status: res.status, body: res.body, headers, cookies }, request.context.transport?.mode ?? 'buffered');
  };
  return {
    after: (request) => finish(request, request.response as unknown as HttpResponse),
    onError: (request) => {
      const res = errorResponse(request.error, request.context.platform?.route.id, request.context.platform?.logIds);
      if (options.openAiRetries && res.status === 409 && (res.body as ReturnType<typeof errorBody>).error.code !== 'operation_in_progress') res.headers = { ...res.headers, 'x-should-retry': 'false' };
      return finish(request, res);
    },
  };
}
