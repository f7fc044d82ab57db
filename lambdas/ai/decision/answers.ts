/**
 * A tier's reply read back into answers (docs/ai/run.md). Each question's probabilities come from the
 * logprobs of its answer token when the route returned them (the alternatives among the top
 * logprobs that are codes of the question, renormalized; another code must be among them), else from
 * the model's stated confidence (the written answer gets it, at least 1/n; the other codes share the
 * rest evenly).
 */
import * as z from 'zod/mini';
import { onFirstUse } from '../../shared/validate.js';
import type { ChatCompletion } from '../types.js';
import { upstreamError } from '../upstream-errors.js';
import { codesOf } from './prompt.js';
import type { Question } from './validate.js';

/** An answer as `shape` makes it, by the question's type (spec 2 shows `score`'s; `noul`'s and `choice`'s are ours). */
export const decisionAnswerSchema = onFirstUse(() => {
  const probability = () => z.number().check(z.gte(0), z.lte(1));
  const confidence = () => probability().check(z.describe('The probability of the answer given (4 decimals).'));
  /** A level's index as text: "0", "1"... */
  const level = () => z.string().check(z.regex(/^\d+$/));
  return z
    .discriminatedUnion('type', [
      z.strictObject({ type: z.literal('noul'), noul: probability().check(z.describe('The probability of yes.')), confidence: confidence() }).check(z.meta({ id: 'NoulAnswer' })),
      z
        .strictObject({
          type: z.literal('choice'),
          choice: z.string().check(z.describe('The most probable label.')),
          confidence: confidence(),
          probabilities: z.record(z.string(), probability()).check(z.describe('Each label’s probability.')),
        })
        .check(z.meta({ id: 'ChoiceAnswer' })),
      z
        .strictObject({
          type: z.literal('score'),
          score: z.number().check(z.gte(0), z.describe('The expected level index: the levels’ indexes weighted by their probabilities.')),
          confidence: confidence(),
          legend: z.record(level(), z.string()).check(z.describe('Level index to the criterion’s text.')),
          probabilities: z.record(level(), probability()).check(z.describe('Level index to its probability.')),
        })
        .check(z.meta({ id: 'ScoreAnswer' })),
    ])
    .check(z.meta({ id: 'DecisionAnswer' }));
});

export type Answer = z.output<ReturnType<typeof decisionAnswerSchema>>;

interface TokenLogprob {
  token: string;
  logprob: number;
  top_logprobs?: { token: string; logprob: number }[] | null;
}

const round = (x: number) => Math.round(x * 10_000) / 10_000;
/** A token as a code: without the JSON quotes, separators and spaces around it, lower case. */
const asCode = (token: string) => token.replace(/^[\s"]+|[\s",}\]]+$/g, '').toLowerCase();

/** The logprob tokens of the reply, when they spell out exactly its content. */
function tokensOf(completion: ChatCompletion, content: string): { tokens: TokenLogprob[]; starts: number[] } | null {
  const raw = (completion.choices[0]?.logprobs as { content?: unknown } | null | undefined)?.content;
  if (!Array.isArray(raw) || !raw.length) return null;
  const tokens = raw as TokenLogprob[];
  if (!tokens.every((t) => t && typeof t.token === 'string' && typeof t.logprob === 'number')) return null;
  const starts: number[] = [];
  let at = 0;
  for (const t of tokens) {
    starts.push(at);
    at += t.token.length;
  }
  return tokens.map((t) => t.token).join('') === content ? { tokens, starts } : null;
}

/**
 * Probabilities of a question's codes from the token that wrote its answer, or null when they cannot
 * be read: no such token, or no other code among its alternatives.
 */
function fromLogprobs(lp: NonNullable<ReturnType<typeof tokensOf>>, content: string, id: string, codes: string[], written: string): number[] | null {
  const match = new RegExp(`"${id}"\\s*:\\s*\\{[^{}]*?"answer"\\s*:\\s*"`).exec(content);
  if (!match) return null;
  const valueAt = match.index + match[0].length;
  // The token holding the value's first character (it may carry the opening quote or the closing one too).
  const token = lp.tokens[lp.starts.findIndex((s, k) => s <= valueAt && valueAt < s + lp.tokens[k].token.length)];
  if (!token || asCode(token.token) !== written) return null;
  const alternatives = new Map<string, number>([[token.token, token.logprob]]);
  for (const alt of token.top_logprobs ?? []) if (alt && typeof alt.token === 'string' && typeof alt.logprob === 'number') alternatives.set(alt.token, alt.logprob);
  const mass = codes.map(() => 0);
  let others = false;
  for (const [text, logprob] of alternatives) {
    const k = codes.indexOf(asCode(text));
    if (k >= 0) mass[k] += Math.exp(logprob);
    if (k >= 0 && codes[k] !== written) others = true;
  }
  // No other code among the alternatives (top_logprobs [] say): renormalized, the written one would be 1.
  if (!others) return null;
  const total = mass.reduce((a, b) => a + b, 0);
  return total > 0 ? mass.map((m) => m / total) : null;
}

/** Probabilities from the model's own confidence in its written answer. */
function fromStated(codes: string[], written: string, stated: unknown): number[] {
  const n = codes.length;
  const c = Math.min(1, Math.max(1 / n, typeof stated === 'number' && Number.isFinite(stated) ? stated : 0.5));
  // At c = 1/n, (1 - c) / (n - 1) can round above c (n = 3: 0.33333333333333337): never above the written answer.
  const rest = Math.min(c, (1 - c) / (n - 1));
  return codes.map((code) => (code === written ? c : rest));
}

/** The index of the most probable code as the answer shows it (4 decimals); the written one wins every tie. */
function mostProbable(p: number[], written: number): number {
  let best = written;
  p.forEach((x, k) => {
    if (round(x) > round(p[best])) best = k;
  });
  return best;
}

function shape(question: Question, written: string, p: number[]): Answer {
  const codes = codesOf(question);
  if (question.type === 'noul') return { type: 'noul', noul: round(p[0]), confidence: round(Math.max(p[0], p[1])) };
  const best = mostProbable(p, codes.indexOf(written));
  if (question.type === 'choice') {
    const labels = Object.keys(question.criteria);
    return { type: 'choice', choice: labels[best], confidence: round(p[best]), probabilities: Object.fromEntries(labels.map((l, k) => [l, round(p[k])])) };
  }
  return {
    type: 'score',
    score: round(p.reduce((sum, x, k) => sum + x * k, 0)),
    confidence: round(p[best]),
    legend: Object.fromEntries(question.criteria.map((c, k) => [String(k), c])),
    probabilities: Object.fromEntries(p.map((x, k) => [String(k), round(x)])),
  };
}

/** The answers of one tier call to `questions`; a reply that is not JSON, or misses or garbles an answer, is 502 upstream_error. */
export function readAnswers(completion: ChatCompletion, questions: Record<string, Question>): Record<string, Answer> {
  const content = completion.choices[0]?.message?.content;
  let reply: unknown;
  try {
    reply = typeof content === 'string' ? JSON.parse(content) : undefined;
  } catch {
    reply = undefined;
  }
  if (!reply || typeof reply !== 'object' || Array.isArray(reply)) throw upstreamError('the decision reply is not a JSON object');
  const lp = tokensOf(completion, content as string);
  const answers: Record<string, Answer> = {};
  for (const [id, question] of Object.entries(questions)) {
    const entry = (reply as Record<string, { answer?: unknown; confidence?: unknown } | undefined>)[id];
    const codes = codesOf(question);
    const written = typeof entry?.answer === 'string' ? entry.answer.trim().toLowerCase() : undefined;
    if (written === undefined || !codes.includes(written)) throw upstreamError(`the decision reply has no valid answer to "${id}"`);
    const p = (lp && fromLogprobs(lp, content as string, id, codes, written)) ?? fromStated(codes, written, entry!.confidence);
    answers[id] = shape(question, written, p);
  }
  return answers;
}
