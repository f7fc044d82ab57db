/**
 * A decision run (spec 4.5, docs/ai/run.md): the route's first tier is asked every question in one
 * chat call; with `escalate`, the questions answered with a confidence under `min_confidence` are
 * asked again on the next tier, up to `max_tier`. Each tier call is an ordinary chat call of the
 * gateway (gateway.ts: the tier route's key, timeout, limits and usage).
 */
import { performance } from 'node:perf_hooks';
import { chatCompletion, type CallScope } from '../gateway.js';
import { estimateChat } from '../estimate.js';
import type { ModelRoute } from '../model-routes.js';
import { PlatformError } from '../../shared/errors.js';
import { bedrockImageProblem } from '../providers/bedrock/images.js';
import { routeUnavailable } from '../upstream-errors.js';
import * as z from 'zod/mini';
import { onFirstUse } from '../../shared/validate.js';
import { decisionAnswerSchema, readAnswers, type Answer } from './answers.js';
import { decisionChatBody, outputTokensFor } from './prompt.js';
import type { DecisionInput, Escalation, Question } from './validate.js';

/** The answer of a decision run (spec 2, "Decision run result"), as runDecision makes it. */
export const decisionResultSchema = onFirstUse(() =>
  z.strictObject({
    model: z.string().check(z.describe('The decision route id.')),
    result: z.strictObject({
      answers: z.record(z.string(), decisionAnswerSchema()).check(z.describe('Keyed by your question ids, in their order.')),
      usage: z.strictObject({ input_tokens: z.int().check(z.nonnegative()), output_tokens: z.int().check(z.nonnegative()) }).check(z.describe('Tokens of every tier asked.')),
    }),
    state: z.literal('Completed'),
    engine: z.strictObject({ tier: z.string().check(z.describe('The route id of the last tier asked.')), latency_ms: z.int().check(z.nonnegative()) }),
  }).check(z.meta({ id: 'DecisionRunResult' })),
);

export type DecisionResult = z.output<ReturnType<typeof decisionResultSchema>>;

/** A tier's count as the answer adds it: a whole number from 0, else none (a fraction, a string, or 1e400 that JSON writes as null). */
const tokenCount = (v: unknown): number => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : 0);

/** A tier's chat route; one that is gone or no longer a chat route leaves the decision route unavailable. */
export function tierRoute(routes: readonly ModelRoute[], id: string): ModelRoute {
  const route = routes.find((r) => r.id === id && r.endpoint === '/v1/chat/completions');
  if (!route) throw routeUnavailable(`its tier "${id}" is not a chat route`);
  return route;
}

/**
 * An image that a tier the run may ask cannot take is a fault of the input (400
 * invalid_decision_input), found before the first tier is called: a bedrock tier takes base64 PNG,
 * JPEG, GIF or WebP only, and would refuse the others with chat's invalid_messages, maybe after an
 * earlier tier was called (and paid for).
 */
function refuseImagesTiersCannotTake(input: DecisionInput, tiers: readonly ModelRoute[]): void {
  if (!input.images?.length || !tiers.some((t) => t.provider === 'bedrock')) return;
  input.images.forEach((url, k) => {
    const problem = bedrockImageProblem(url);
    if (problem) throw new PlatformError('invalid_decision_input', `input.images[${k}]: this route's tiers include Bedrock: ${problem}`, `input.images.${k}`);
  });
}

export async function runDecision(scope: CallScope, route: ModelRoute, routes: readonly ModelRoute[], input: DecisionInput, escalation: Escalation | null): Promise<DecisionResult> {
  const started = performance.now();
  const tiers = route.tiers ?? [];
  if (!tiers.length) throw routeUnavailable('it has no tiers');
  const lastTier = escalation ? escalation.maxTier : 0;
  // Every tier that may be asked; one gone is left to the loop (503 route_unavailable when reached).
  refuseImagesTiersCannotTake(input, tiers.slice(0, lastTier + 1).flatMap((id) => routes.filter((r) => r.id === id && r.endpoint === '/v1/chat/completions')));
  const answers: Record<string, Answer> = {};
  const usage = { input_tokens: 0, output_tokens: 0 };
  let open: Record<string, Question> = input.questions;
  let used = tiers[0];
  for (let t = 0; t <= lastTier && Object.keys(open).length; t++) {
    const tier = tierRoute(routes, tiers[t]);
    const wanted = outputTokensFor(Object.keys(open).length);
    const maxTokens = tier.max_tokens === null ? wanted : Math.min(wanted, tier.max_tokens);
    const body = decisionChatBody(input, open, maxTokens);
    const completion = await chatCompletion(scope, tier, body, estimateChat(body.messages, maxTokens, [body.response_format]));
    usage.input_tokens += tokenCount(completion.usage?.prompt_tokens);
    usage.output_tokens += tokenCount(completion.usage?.completion_tokens);
    used = tier.id;
    Object.assign(answers, readAnswers(completion, open));
    if (!escalation) break;
    open = Object.fromEntries(Object.entries(open).filter(([id]) => answers[id].confidence < escalation.minConfidence));
  }
  // The answers in the order of the questions.
  const ordered = Object.fromEntries(Object.keys(input.questions).map((id) => [id, answers[id]]));
  return { model: route.id, result: { answers: ordered, usage }, state: 'Completed', engine: { tier: used, latency_ms: Math.round(performance.now() - started) } };
}

/** How long a run may hold its operation id: every tier it may ask, each within its own timeout. */
export function decisionTimeoutMs(route: ModelRoute, routes: readonly ModelRoute[], escalation: Escalation | null, defaultMs: number): number {
  const tiers = (route.tiers ?? []).slice(0, (escalation ? escalation.maxTier : 0) + 1);
  return tiers.reduce((sum, id) => sum + (routes.find((r) => r.id === id)?.timeout_ms ?? defaultMs), 0) || defaultMs;
}
