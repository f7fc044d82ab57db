/**
 * Usage and cost of AI calls: tokens in and out, priced by the route
 * (`price_in_per_mtok`, `price_out_per_mtok`, USD per million tokens), and a transcription's seconds
 * of audio (`price_per_minute`, USD per minute).
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import type { ModelRoute } from './model-routes.js';
import { activityCaller, recordActivityDurably } from '../activity/activity.js';

export interface CallUsage {
  inputTokens: number;
  outputTokens: number;
  /** A transcription's seconds of audio (recorded as `audio_seconds`; priced by the route's `price_per_minute`). */
  audioSeconds?: number;
}

/** USD of a call's usage on a route: its tokens, plus its minutes of audio on a route priced by the minute; 0 on an unpriced route. */
export function costOf(route: ModelRoute, usage: CallUsage): number {
  const tokens = ((route.price_in_per_mtok ?? 0) * usage.inputTokens + (route.price_out_per_mtok ?? 0) * usage.outputTokens) / 1_000_000;
  const audio = usage.audioSeconds !== undefined && Number.isFinite(usage.audioSeconds) && usage.audioSeconds > 0 ? ((route.price_per_minute ?? 0) * usage.audioSeconds) / 60 : 0;
  return tokens + audio;
}

export interface UsageRecord {
  route: ModelRoute;
  usage: CallUsage;
  cost: number;
  status: number;
  latencyMs: number;
}

const tokens = (n: number) => (Number.isFinite(n) && n > 0 ? Math.round(n) : 0);
/** Seconds to the millisecond. */
const seconds = (n: number) => (Number.isFinite(n) && n > 0 ? Math.round(n * 1000) / 1000 : 0);

/**
 * Records a call's usage in the activity log (docs/decisions/ai-usage.md): one `ai.usage` event with
 * the route id in `route`, the call's status and latency, and `usage` {prompt_tokens,
 * completion_tokens, total_tokens, cost_usd}, plus `audio_seconds` on a transcription. Resolves once
 * the event is written (the answer waits for it: a call answered has its usage kept, even through a
 * crash); never throws.
 */
export function recordUsage(engine: Engine, principal: Principal, record: UsageRecord): Promise<void> {
  const prompt = tokens(record.usage.inputTokens);
  const completion = tokens(record.usage.outputTokens);
  const cost = Number.isFinite(record.cost) && record.cost > 0 ? Math.round(record.cost * 1e6) / 1e6 : 0;
  return recordActivityDurably(engine, activityCaller(principal, { api: 'ai', method: 'POST', route: record.route.id }), {
    kind: 'ai.usage',
    status: record.status,
    latency_ms: record.latencyMs,
    usage: {
      prompt_tokens: prompt,
      completion_tokens: completion,
      total_tokens: prompt + completion,
      cost_usd: cost,
      ...(record.usage.audioSeconds === undefined ? {} : { audio_seconds: seconds(record.usage.audioSeconds) }),
    },
  });
}
