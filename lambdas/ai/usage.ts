/**
 * Usage and cost of AI calls (issue 11 item 9): tokens in and out, priced by the route
 * (`price_in_per_mtok`, `price_out_per_mtok`, USD per million tokens).
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import type { ModelRoute } from './model-routes.js';

export interface CallUsage {
  inputTokens: number;
  outputTokens: number;
}

/** USD of a call's usage on a route; 0 on an unpriced route. */
export function costOf(route: ModelRoute, usage: CallUsage): number {
  return ((route.price_in_per_mtok ?? 0) * usage.inputTokens + (route.price_out_per_mtok ?? 0) * usage.outputTokens) / 1_000_000;
}

export interface UsageRecord {
  route: ModelRoute;
  usage: CallUsage;
  cost: number;
  status: number;
  latencyMs: number;
}

/** Records a call's usage in the activity log. IMPLEMENTED BY THE USAGE WORK. */
export function recordUsage(_engine: Engine, _principal: Principal, _record: UsageRecord): void {}
