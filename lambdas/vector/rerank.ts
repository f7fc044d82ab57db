/**
 * One rerank call for a vector query: the profile's provider, its key, its deadline, and the caller's
 * abort. It never throws: whatever goes wrong, the query answers in vector order with an outcome
 * saying why (`rerank_failed`, `rerank_timeout`). Every call, whatever its outcome, is metered as an
 * `ai.rerank` activity event (docs/decisions/rerank.md).
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { activityCaller, recordActivity } from '../activity/activity.js';
import { RERANKERS } from '../ai/providers/rerank/index.js';
import type { RerankAnswer, RerankResult } from '../ai/providers/rerank/types.js';
import { log } from '../shared/log.js';
import type { RerankProfile } from './rerank-profiles.js';

export type { RerankResult } from '../ai/providers/rerank/types.js';

export type RerankOutcome =
  | { outcome: 'reranked'; results: RerankResult[] }
  | { outcome: 'rerank_failed' | 'rerank_timeout'; reason: string };

const MAX_REASON = 200;

/** Why a call failed, for the logs: never an upstream's body (it may echo the key or the documents). */
function reasonOf(error: unknown): string {
  const e = error as { code?: unknown; cause?: { code?: unknown }; message?: unknown } | null;
  const code = e?.code ?? e?.cause?.code;
  let reason: string;
  if (typeof code === 'string' && code.startsWith('HPE_')) reason = 'the answer is not HTTP';
  // A system error's code (ECONNREFUSED, ENOTFOUND…); a platform error's code is no network failure.
  else if (typeof code === 'string' && /^E[A-Z0-9_]+$/.test(code)) reason = `the reranker cannot be reached (${code})`;
  else reason = typeof e?.message === 'string' && e.message ? e.message : String(error);
  return reason.slice(0, MAX_REASON);
}

/**
 * Reranks `documents` for `query` and gives the best `topN` (at most all of them), best first, each
 * with its index in `documents`. No documents: nothing to call, an empty ranking.
 */
export async function rerank(
  engine: Engine,
  principal: Principal,
  profile: RerankProfile,
  query: string,
  documents: string[],
  topN: number,
  signal?: AbortSignal,
): Promise<RerankOutcome> {
  if (!documents.length) return { outcome: 'reranked', results: [] };
  const n = Math.min(documents.length, Math.max(1, Number.isFinite(topN) ? Math.floor(topN) : documents.length));
  const started = performance.now();
  // One controller for the deadline and the caller: whichever ends first aborts the upstream request.
  const upstream = new AbortController();
  let timedOut = false;
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => {
      timedOut = true;
      upstream.abort(new Error('timeout'));
      resolve('timeout');
    }, profile.timeout_ms);
  });
  const callerLeft = () => upstream.abort(signal?.reason ?? new Error('aborted'));
  if (signal?.aborted) callerLeft();
  else signal?.addEventListener('abort', callerLeft, { once: true });

  const work = (async (): Promise<RerankAnswer> => {
    let apiKey: string | undefined;
    if (profile.api_key_env !== null) {
      apiKey = await engine.upstreamKeys.get(profile.api_key_env);
      if (apiKey === undefined) throw new Error(`its API key (${profile.api_key_env}) is not configured`);
    }
    if (upstream.signal.aborted) throw upstream.signal.reason;
    return RERANKERS[profile.provider]({ baseUrl: profile.base_url, model: profile.model, apiKey, query, documents, topN: n, signal: upstream.signal });
  })();
  // The deadline may win the race; the call's own rejection then has no reader.
  work.catch(() => undefined);

  let outcome: RerankOutcome;
  let tokens: number | null = null;
  try {
    // Raced, not only aborted: a provider that does not stop on the signal still cannot hold the query.
    const answer = await Promise.race([work, deadline]);
    if (answer === 'timeout') throw new Error('timeout');
    outcome = { outcome: 'reranked', results: answer.results };
    tokens = answer.tokens;
  } catch (error) {
    if (timedOut) outcome = { outcome: 'rerank_timeout', reason: `no answer within ${profile.timeout_ms} ms` };
    else if (signal?.aborted) outcome = { outcome: 'rerank_failed', reason: 'the caller went away' };
    else outcome = { outcome: 'rerank_failed', reason: reasonOf(error) };
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', callerLeft);
  }

  const status = outcome.outcome === 'reranked' ? 200 : outcome.outcome === 'rerank_timeout' ? 504 : signal?.aborted ? 499 : 502;
  recordActivity(engine, activityCaller(principal, { api: 'ai', method: 'POST', route: profile.id }), {
    kind: 'ai.rerank',
    status,
    error_code: outcome.outcome === 'reranked' ? null : outcome.outcome,
    latency_ms: Math.round(performance.now() - started),
    bytes_in: documents.reduce((bytes, d) => bytes + Buffer.byteLength(d, 'utf8'), Buffer.byteLength(query, 'utf8')),
    usage: { prompt_tokens: tokens ?? 0, completion_tokens: 0, total_tokens: tokens ?? 0, cost_usd: 0 },
  });
  if (outcome.outcome !== 'reranked') log.warn('rerank failed; the query answers in vector order', { profile: profile.id, provider: profile.provider, outcome: outcome.outcome, reason: outcome.reason });
  return outcome;
}
