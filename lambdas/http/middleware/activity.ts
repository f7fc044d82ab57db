import type middy from '@middy/core';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { performance } from 'node:perf_hooks';
import { authenticate } from '../../auth/credentials.js';
import type { Principal } from '../../auth/principal.js';
import { activityCaller, flushActivity, recordActivity } from '../../activity/activity.js';
import { log } from '../../shared/log.js';
import type { Middleware, PlatformContext, RouteResult } from '../types.js';

type Request = middy.Request<APIGatewayProxyEventV2, RouteResult, Error, PlatformContext>;

export interface ActivityOptions {
  /** Whether the route reads a credential at all (preflights and the token exchange do not: nothing is recorded). */
  credentialed: boolean;
  /** Data: the database, collection and record the path names become the record's `related`. */
  relatedFromPath: boolean;
  /**
   * A 403 from the credential checks is recorded under the credential resolved again from the
   * Authorization header (the public APIs). The console's steps set the principal before they refuse,
   * and its routes read no Authorization header at all (default true).
   */
  resolveAgain?: boolean;
}

/**
 * Records every call as `api.call`. Registered first in the chain, so its `after` / `onError` run last,
 * once respond() has built the final answer (errors included); the latency counts from the chain's
 * first step (`startedAt`).
 *
 * Calls answered 401 have no organization and are not recorded. A call refused with 403 by the
 * credential checks themselves (browser, origin, capability) is recorded: the credential is resolved
 * again here, from the cache that checked it.
 *
 * In Lambda nothing runs after the answer is returned, so there the buffered events are written before
 * returning (one batched write per call); locally they are written in the background.
 */
export function activity(options: ActivityOptions): Middleware {
  const record = async (request: Request): Promise<void> => {
    const platform = request.context.platform;
    try {
      const result = request.response;
      if (!platform || !result || !options.credentialed) return;
      const status = result.statusCode ?? 200;
      if (status === 401) return;
      const principal = platform.principal ?? (options.resolveAgain === false ? undefined : await resolveAgain(platform));
      if (!principal || !platform.engine) return;
      const start = platform.startedAt;
      const { req, call } = platform;
      recordActivity(platform.engine, activityCaller(principal, call, platform.logIds), {
        kind: 'api.call',
        status,
        error_code: status >= 400 ? errorCode(result) : null,
        latency_ms: start === undefined ? null : Math.max(0, Math.round(performance.now() - start)),
        bytes_in: bytesIn(req),
        bytes_out: bytesOut(req.method, result),
        file_sha256: req.params.sha256 ?? null,
        related: options.relatedFromPath && req.params.database !== undefined
          ? { database: req.params.database, collection_id: req.params.collection ?? null, record_id: req.params.id ?? null }
          : null,
      });
    } catch (error) {
      log.error('api.call not recorded', { ...platform?.logIds, route: platform?.route.id, error: String(error) });
    } finally {
      if (platform?.engine?.name === 'aws') await flushActivity(platform.engine);
    }
  };
  return { after: record, onError: record };
}

/** The credential checks threw after resolving the credential (a 403): resolve it again, from the cache. */
async function resolveAgain(platform: PlatformContext['platform']): Promise<Principal | undefined> {
  if (!platform.engine) return undefined;
  return authenticate(platform.engine, platform.req.headers.authorization).catch(() => undefined);
}

function bytesIn(req: PlatformContext['platform']['req']): number {
  const declared = req.headers['content-length'];
  if (declared !== undefined && /^\d{1,15}$/.test(declared)) return Number(declared);
  return req.body.length;
}

/** The body's bytes; a streamed answer declares its length in Content-Length. */
function bytesOut(method: string, result: RouteResult): number {
  if (method === 'HEAD') return 0;
  if (result.body) return Buffer.byteLength(result.body, result.isBase64Encoded ? 'base64' : 'utf8');
  const declared = String(result.headers?.['content-length'] ?? '');
  return /^\d{1,15}$/.test(declared) ? Number(declared) : 0;
}

function errorCode(result: RouteResult): string | null {
  if (!result.body || result.isBase64Encoded || !/json/i.test(String(result.headers?.['content-type'] ?? ''))) return null;
  try {
    const code = (JSON.parse(result.body) as { error?: { code?: unknown } })?.error?.code;
    return typeof code === 'string' ? code : null;
  } catch {
    return null;
  }
}
