/**
 * Limits of AI calls (issue 11 item 7), per organization and per key where set: requests and tokens a
 * minute, concurrent calls, and a budget in USD. IMPLEMENTED BY THE LIMITS WORK: this file fixes the
 * interface gateway.ts calls.
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import type { ModelRoute } from './model-routes.js';
import type { CallUsage } from './usage.js';

/** What a call may use at most, known before it runs: its input tokens (estimated) and its output ceiling. */
export interface CallEstimate {
  inputTokens: number;
  maxOutputTokens: number;
}

/** An admitted call: settle once it ended with what it really used (releases its concurrency slot, settles its reserved cost). */
export interface Admission {
  settle(usage: CallUsage, costUsd: number): Promise<void>;
}

export async function admitCall(_engine: Engine, _principal: Principal, _route: ModelRoute, _estimate: CallEstimate): Promise<Admission> {
  return { settle: async () => undefined };
}
