/**
 * One upstream call of the AI API, whatever the endpoint: the route's provider and key, its timeout
 * (504 timeout_error), the client's disconnect (aborts the upstream), the limits admitted before and
 * settled after with the call's real usage (limits.ts), and the usage recorded (usage.ts).
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { timeoutOf, type ModelRoute } from './model-routes.js';
import { providerOf } from './providers/index.js';
import { httpRun } from './providers/http/index.js';
import { transcribe, type AudioFile, type Transcript } from './providers/openai-compatible/transcription.js';
import { admitCall, type Admission, type CallEstimate, type HeldBudget } from './limits.js';
import { costOf, recordUsage, type CallUsage } from './usage.js';
import { fetchFailure, routeUnavailable } from './upstream-errors.js';
import type { ChatBody, ChatChunk, ChatCompletion, EmbeddingList, EmbeddingsBody, UpstreamCall } from './types.js';
import { log } from '../shared/log.js';

export interface CallScope {
  engine: Engine;
  principal: Principal;
  /** Aborted when the client goes away (a streamed answer's reader is destroyed). */
  signal?: AbortSignal;
  /** Set by withUsageWrites: the call's usage write goes here, awaited by the answer instead of the call. */
  usageWrites?: Promise<void>[];
  /** A knowledge job's calls: their cost is held by the job (limits.ts HeldBudget), not by each call against the budgets. */
  heldBudget?: HeldBudget;
}

/**
 * Runs `answer` (an operation's answer around one or more calls) so that it leaves only once each
 * call's usage is committed, without each call waiting for its own: the usage write and the kept
 * answer's write are queued in the same turn and share the commit (group-commit.ts), one commit where
 * a call that waited for its usage first, then kept its answer, made two in a row.
 */
export async function withUsageWrites<T>(scope: CallScope, answer: (scope: CallScope) => Promise<T>): Promise<T> {
  const usageWrites: Promise<void>[] = [];
  try {
    return await answer({ ...scope, usageWrites });
  } finally {
    await Promise.all(usageWrites);
  }
}

/**
 * The upstream call's frame: its key, its deadline, and which of the two signals ended it.
 * `onTimeout` runs when the deadline passes, whatever the call is doing then.
 */
async function upstreamCall(scope: CallScope, route: ModelRoute, onTimeout?: () => void): Promise<{ call: UpstreamCall; timedOut: () => boolean; timeoutMs: number; done: () => void }> {
  const timeoutMs = timeoutOf(route);
  // One controller for both ends, not AbortSignal.any(): that one registers weak references and
  // finalizers for every call, work the garbage collector then does on the request's path.
  const upstream = new AbortController();
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    upstream.abort(new Error('timeout'));
    onTimeout?.();
  }, timeoutMs);
  const client = scope.signal;
  const clientLeft = () => upstream.abort(client?.reason);
  if (client?.aborted) clientLeft();
  else client?.addEventListener('abort', clientLeft, { once: true });
  const done = () => {
    clearTimeout(timer);
    client?.removeEventListener('abort', clientLeft);
  };
  let apiKey: string | undefined;
  if (route.api_key_env !== null) {
    apiKey = await scope.engine.upstreamKeys.get(route.api_key_env);
    if (apiKey === undefined) {
      done();
      throw routeUnavailable('its API key is not configured');
    }
  }
  return { call: { route, apiKey, signal: upstream.signal }, timedOut: () => timedOut, timeoutMs, done };
}

/** A token count as an upstream may write it: a whole number from 0 (JSON's 1e400 is Infinity, and an Infinity cost is no cost). */
const tokenCount = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 0;

/**
 * The upstream's own count, when its answer carries a valid one; `{}`, strings, negative or
 * non-finite counts are no report (the call is then charged as `unreported`).
 */
const reportedUsage = (c: { usage?: unknown }, output: 'with output' | 'input only' = 'with output'): CallUsage | undefined => {
  const u = c.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | null | undefined;
  if (!u || typeof u !== 'object' || !tokenCount(u.prompt_tokens)) return undefined;
  if (output === 'input only') return { inputTokens: u.prompt_tokens, outputTokens: 0 };
  return tokenCount(u.completion_tokens) ? { inputTokens: u.prompt_tokens, outputTokens: u.completion_tokens } : undefined;
};

/** UTF-8 bytes of every string in `value`: a bound on the tokens of generated text (a token is at least a byte). */
function textBytes(value: unknown): number {
  let bytes = 0;
  const stack = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') bytes += Buffer.byteLength(v, 'utf8');
    else if (v !== null && typeof v === 'object') for (const member of Object.values(v)) stack.push(member);
  }
  return bytes;
}

/**
 * What a call is charged when its upstream did not say what it used (docs/decisions/ai-limits.md): an
 * answer that came whole, its input's worst case and its output's bytes (at most the ceiling); a call
 * cut short (the client left, the route timed out, the upstream broke off), the worst case it held,
 * since the upstream bills what it generated, which the gateway never saw (a transcription cut
 * short: the seconds of audio it held too).
 */
const unreported = (estimate: CallEstimate, outputBytes: number | 'cut short'): CallUsage => ({
  inputTokens: estimate.inputTokensBound,
  outputTokens: outputBytes === 'cut short' ? estimate.maxOutputTokens : Math.min(estimate.maxOutputTokens, outputBytes),
  ...(outputBytes === 'cut short' && estimate.audioSeconds !== undefined ? { audioSeconds: estimate.audioSeconds } : {}),
});

/** Runs `work` inside the limits and the timeout; settles and records the usage it reports (a failed call: see `unreported`). */
async function admitted<T>(scope: CallScope, route: ModelRoute, estimate: CallEstimate, work: (call: UpstreamCall) => Promise<{ value: T; usage: CallUsage }>): Promise<T> {
  const admission = await admitCall(scope.engine, scope.principal, route, estimate, scope.heldBudget);
  const started = performance.now();
  let frame: Awaited<ReturnType<typeof upstreamCall>> | undefined;
  let done: { value: T; usage: CallUsage };
  try {
    frame = await upstreamCall(scope, route);
    done = await work(frame.call);
  } catch (error) {
    const failure = frame ? fetchFailure(error, frame.timedOut(), frame.timeoutMs) : error;
    // A call that timed out may have been generating (and billed) all along; one the upstream refused was not.
    const usage = frame?.timedOut() ? unreported(estimate, 'cut short') : { inputTokens: 0, outputTokens: 0 };
    await settle(scope, route, admission, usage, failure instanceof Error && 'status' in failure ? Number(failure.status) : 500, started);
    throw failure;
  } finally {
    frame?.done();
  }
  // Settled once, outside the try: a failing settle must not settle the call a second time as failed.
  await settle(scope, route, admission, done.usage, 200, started);
  return done.value;
}

async function settle(scope: CallScope, route: ModelRoute, admission: Admission, usage: CallUsage, status: number, started: number): Promise<void> {
  const cost = costOf(route, usage);
  // Both before the answer (or a stream's end) leaves: here, or where withUsageWrites waits for it.
  const usageWritten = recordUsage(scope.engine, scope.principal, { route, usage, cost, status, latencyMs: Math.round(performance.now() - started) });
  if (scope.usageWrites) scope.usageWrites.push(usageWritten);
  await Promise.all([admission.settle(usage, cost), scope.usageWrites ? undefined : usageWritten]);
}

/**
 * The answer's `usage` in spec 2's shape, whole counts: the upstream's own (its other fields kept, a
 * missing or junk `total_tokens` made the sum); where it reported none or junk, the counts the call
 * was charged, which its usage record holds too.
 */
function answerUsage(completion: ChatCompletion, reported: CallUsage | undefined, charged: CallUsage): void {
  if (!reported) {
    completion.usage = { prompt_tokens: charged.inputTokens, completion_tokens: charged.outputTokens, total_tokens: charged.inputTokens + charged.outputTokens };
  } else if (!tokenCount(completion.usage.total_tokens)) {
    completion.usage.total_tokens = reported.inputTokens + reported.outputTokens;
  }
}

export function chatCompletion(scope: CallScope, route: ModelRoute, body: ChatBody, estimate: CallEstimate): Promise<ChatCompletion> {
  return admitted(scope, route, estimate, async (call) => {
    const completion = await providerOf(route).chat(call, body);
    const reported = reportedUsage(completion);
    const usage = reported ?? unreported(estimate, textBytes(completion.choices?.map((c) => c?.message)));
    answerUsage(completion, reported, usage);
    return { value: completion, usage };
  });
}

export function embeddings(scope: CallScope, route: ModelRoute, body: EmbeddingsBody, estimate: CallEstimate): Promise<EmbeddingList> {
  return admitted(scope, route, estimate, async (call) => {
    const list = await providerOf(route).embed(call, body);
    const reported = reportedUsage(list, 'input only');
    const usage = reported ?? unreported(estimate, 0);
    // Whole counts in the answer, as in a chat's (answerUsage): the upstream's, or those charged.
    const total = (list.usage as { total_tokens?: unknown } | undefined)?.total_tokens;
    list.usage = { prompt_tokens: usage.inputTokens, total_tokens: reported && tokenCount(total) ? total : usage.inputTokens };
    return { value: list, usage };
  });
}

/** A generic run (`/v1/run` on an `http` route), `input` as JSON text: one call of 0 tokens, inside the same limits, timeout and usage record. */
export function genericRun(scope: CallScope, route: ModelRoute, input: string): Promise<object> {
  return admitted(scope, route, { inputTokens: 0, inputTokensBound: 0, maxOutputTokens: 0 }, async (call) => ({ value: await httpRun(call, input), usage: { inputTokens: 0, outputTokens: 0 } }));
}

/**
 * A transcription (`/v1/audio/transcriptions`, openai-compatible routes only): one call estimated at 0
 * tokens, inside the same limits, timeout and usage record, charged the tokens the upstream reports
 * and its seconds of audio at the route's `price_per_minute`. `audio.audioSecondsFallback` (the
 * file's length, when the caller measured it) is what a route priced by the minute holds against the
 * budget, and what the call is charged when the upstream reports no duration; without it the hold
 * is 0 and an upstream silent on the duration is charged up to its last segment's end.
 */
export function transcription(scope: CallScope, route: ModelRoute, audio: AudioFile): Promise<Transcript> {
  return admitted(scope, route, { inputTokens: 0, inputTokensBound: 0, maxOutputTokens: 0, audioSeconds: audio.audioSecondsFallback }, async (call) => {
    const transcript = await transcribe(call, audio);
    return { value: transcript, usage: transcript.usage };
  });
}

/**
 * A streamed chat: admitted before the first chunk; yields each upstream chunk as it arrives; the
 * usage chunk (asked of the upstream always) is passed on only when the client asked for it; the
 * limits settle and the usage is recorded once, when the stream ends however it ends, or at the
 * route's timeout if that comes first: a client that stops reading holds the stream (and its
 * generator) open past it, and its budget hold must not outlive the call (docs/decisions/ai-limits.md).
 */
export async function chatStream(scope: CallScope, route: ModelRoute, body: ChatBody, estimate: CallEstimate, includeUsage: boolean): Promise<AsyncGenerator<ChatChunk>> {
  const admission = await admitCall(scope.engine, scope.principal, route, estimate, scope.heldBudget);
  const started = performance.now();
  // The upstream's count: the final one (its usage chunk, without choices), or the last running count
  // of a stream that came whole; else the bytes of text passed on so far.
  let finalUsage: CallUsage | undefined;
  let runningUsage: CallUsage | undefined;
  let outputBytes = 0;
  let whole = false;
  let settled: Promise<void> | undefined;
  const charged = () => finalUsage ?? (whole ? (runningUsage ?? unreported(estimate, outputBytes)) : unreported(estimate, 'cut short'));
  const settleOnce = (status: number) => (settled ??= settle(scope, route, admission, charged(), status, started));
  // A client gone is a 499 whatever the abort did to the upstream read (docs/decisions/ai-usage.md).
  const statusOf = (failure: { status: number }) => (scope.signal?.aborted ? 499 : failure.status);
  let frame: Awaited<ReturnType<typeof upstreamCall>>;
  try {
    frame = await upstreamCall(scope, route, () => void settleOnce(504).catch((error) => log.warn('AI stream not settled at its timeout', { error: String(error) })));
  } catch (error) {
    await settleOnce(error instanceof Error && 'status' in error ? Number(error.status) : 503);
    throw error;
  }
  const upstream = providerOf(route).chatStream(frame.call, body)[Symbol.asyncIterator]();
  // The first chunk before answering: a route that fails at once answers its status, not a broken stream.
  let first: IteratorResult<ChatChunk>;
  try {
    first = await upstream.next();
  } catch (error) {
    frame.done();
    const failure = fetchFailure(error, frame.timedOut(), frame.timeoutMs);
    await settleOnce(statusOf(failure));
    throw failure;
  }
  const f = frame;
  return (async function* () {
    let status = 200;
    try {
      for (let step = first; !step.done; step = await upstream.next()) {
        const chunk = step.value;
        const reported = reportedUsage(chunk);
        // A running count (vLLM's continuous usage) rides on chunks with choices; OpenAI's final one has none.
        if (reported && !chunk.choices?.length) finalUsage = reported;
        else if (reported) runningUsage = reported;
        outputBytes += textBytes(chunk.choices?.map((c) => c?.delta));
        // The usage-only chunk (no choices) goes to clients that asked for it; others see no usage field.
        if (!includeUsage) {
          if (!chunk.choices?.length && chunk.usage) continue;
          delete chunk.usage;
        }
        yield chunk;
      }
      whole = true;
    } catch (error) {
      const failure = fetchFailure(error, f.timedOut(), f.timeoutMs);
      status = statusOf(failure);
      throw failure;
    } finally {
      f.done();
      await upstream.return?.(undefined).catch(() => undefined);
      // The reader stopped pulling (the client left between chunks): no error reached the loop.
      if (scope.signal?.aborted && status === 200) status = 499;
      await settleOnce(status);
    }
  })();
}
