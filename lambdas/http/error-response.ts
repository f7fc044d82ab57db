/**
 * Turns any error into the one JSON error shape every API answers, compatible with OpenAI clients:
 * {"error": {"code", "message", "type", "param"}}. The status comes from the code (shared/errors.ts);
 * `type` follows the status, as OpenAI's does (docs/decisions/errors.md).
 */
import { EngineUnavailableError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { log, type LogContext } from '../shared/log.js';
import type { HttpResponse } from './types.js';

const TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  405: 'invalid_request_error',
  409: 'conflict_error',
  410: 'not_found_error',
  411: 'invalid_request_error',
  413: 'invalid_request_error',
  426: 'invalid_request_error',
  429: 'rate_limit_error',
  431: 'invalid_request_error',
  502: 'api_error',
  503: 'api_error',
  504: 'timeout_error',
};

export const errorType = (status: number): string => TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');

export function errorBody(error: PlatformError) {
  return { error: { code: error.code, message: error.message, type: errorType(error.status), param: error.param } };
}

/** A PlatformError as is; an unavailable engine as 503; anything else logged and answered 500 without detail. */
export function toPlatformError(error: unknown, routeId?: string, logIds?: LogContext): PlatformError {
  if (error instanceof PlatformError) return error;
  if (error instanceof EngineUnavailableError) return new PlatformError('service_unavailable', 'The service is briefly unavailable; retry.');
  log.error('unhandled error', { ...logIds, route: routeId, error: String((error as Error)?.stack ?? error) });
  return new PlatformError('internal_error', 'The service failed to answer; retry later.');
}

/** The answer for an error (never a stack trace). */
export function errorResponse(error: unknown, routeId?: string, logIds?: LogContext): HttpResponse {
  const e = toPlatformError(error, routeId, logIds);
  const headers: Record<string, string> = {};
  if (e.retryAfterSeconds !== undefined) headers['retry-after'] = String(e.retryAfterSeconds);
  return { status: e.status, body: errorBody(e), headers };
}
