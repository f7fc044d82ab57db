import { PlatformError } from '../../shared/errors.js';
import type { Api } from '../routes.js';
import type { Middleware } from '../types.js';

/**
 * Calls per minute per credential, by API. Events: the spec's 600 (section 8). Data: the spec shows no
 * threshold and PocketBase sets none by default, so it is off unless DATA_RATE_LIMIT_PER_MINUTE is set.
 * The AI API's limits belong to its routes and quotas. 0 turns a limit off.
 */
export function limitPerMinute(api: Api): number {
  if (api === 'events') return Number(process.env.EVENTS_RATE_LIMIT_PER_MINUTE ?? 600);
  if (api === 'data') return Number(process.env.DATA_RATE_LIMIT_PER_MINUTE ?? 0);
  return 0;
}

interface Bucket {
  tokens: number;
  at: number;
}

const buckets = new Map<string, Bucket>();
const MAX_BUCKETS = 100_000;

/**
 * A token bucket per credential in this process ("per location" in the spec's words): it refills at
 * the per-minute rate and holds at most a minute's worth. In AWS each function instance counts on its
 * own, so the effective ceiling is the limit times the instances serving a credential.
 */
export function rateLimit(): Middleware {
  return {
    before: ({ context }) => {
      const { route, principal, engine } = context.platform;
      const limit = limitPerMinute(route.api);
      if (!limit || !principal || !engine) return;
      const now = engine.clock.now();
      const key = `${route.api}:${principal.credentialId}`;
      const bucket = buckets.get(key) ?? { tokens: limit, at: now };
      bucket.tokens = Math.min(limit, bucket.tokens + ((now - bucket.at) * limit) / 60_000);
      bucket.at = now;
      if (buckets.size >= MAX_BUCKETS && !buckets.has(key)) buckets.clear();
      buckets.set(key, bucket);
      if (bucket.tokens < 1) {
        const retryAfter = Math.ceil(((1 - bucket.tokens) * 60_000) / limit / 1000);
        throw new PlatformError('rate_limited', `Over ${limit} calls per minute for this credential; retry after ${retryAfter} s.`, { retryAfterSeconds: retryAfter });
      }
      bucket.tokens -= 1;
    },
  };
}
