import type { Engine } from '../../engine/ports.js';
import { Counters } from '../../shared/counters.js';
import { PlatformError } from '../../shared/errors.js';
import type { Middleware } from '../types.js';

export interface RateLimitOptions {
  perMinute: number;
  /** Keeps the APIs' counts apart for one credential. */
  scope: string;
}

/** One Counters per engine: it remembers the previous window's count for the rest of the window. */
const countersOf = new WeakMap<Engine, Counters>();

/**
 * Calls a minute per credential, counted in the key-value store (shared/counters.ts, a sliding
 * window): the limit holds across worker processes and Lambda instances, not per instance
 * (docs/decisions/rate-limits.md). One atomic write a call.
 */
export function rateLimit({ perMinute, scope }: RateLimitOptions): Middleware {
  return {
    before: async ({ context }) => {
      const { principal, engine } = context.platform;
      if (!principal || !engine) return;
      let counters = countersOf.get(engine);
      if (!counters) countersOf.set(engine, (counters = new Counters(engine.kv, engine.clock)));
      // An end user's id is the application's own user id: only with the organization and application is it one caller.
      const caller = `${scope}:${principal.organizationId}:${principal.applicationId ?? ''}:${principal.kind}:${principal.credentialId}`;
      const taken = await counters.take(caller, { limit: perMinute, windowMs: 60_000 });
      if (!taken.allowed) {
        const retryAfter = Math.max(1, Math.ceil(taken.retryAfterMs / 1000));
        throw new PlatformError('rate_limited', `Over ${perMinute} calls per minute for this credential; retry after ${retryAfter} s.`, { retryAfterSeconds: retryAfter });
      }
    },
  };
}
