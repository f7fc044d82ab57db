/**
 * How an upstream failure answers: the upstream answered with an error, or with
 * something that is no answer: 502 upstream_error; it could not be reached: 503 route_unavailable;
 * it did not answer within the route's timeout: 504 timeout_error. The message never carries the
 * upstream's body (it may echo the API key or another tenant's data), only its status.
 */
import { PlatformError } from '../shared/errors.js';

export const upstreamError = (detail: string) => new PlatformError('upstream_error', `The model route's upstream failed: ${detail}.`);
export const routeUnavailable = (detail: string) => new PlatformError('route_unavailable', `The model route's upstream cannot be reached: ${detail}.`);
export const upstreamTimeout = (ms: number) => new PlatformError('timeout_error', `The model route's upstream did not answer within ${ms} ms.`);

/** A fetch failure (no answer at all) as the platform answers it; `timedOut` when the route's timeout aborted it. */
export function fetchFailure(error: unknown, timedOut: boolean, timeoutMs: number): PlatformError {
  if (error instanceof PlatformError) return error;
  if (timedOut) return upstreamTimeout(timeoutMs);
  const cause = (error as { cause?: { code?: string } })?.cause?.code ?? (error as { code?: string })?.code ?? (error as Error)?.name ?? 'network error';
  // Node's HTTP parser refused what came back (not HTTP, headers past its limit): reached, but no answer.
  if (String(cause).startsWith('HPE_')) return upstreamError('the answer is not HTTP');
  return routeUnavailable(String(cause));
}
