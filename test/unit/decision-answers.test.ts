/**
 * readAnswers (lambdas/ai/decision/answers.ts) on its own: the written option wins every
 * tie for any option count, and logprobs with no alternative code fall back to the stated
 * confidence.
 */
import { describe, expect, it } from 'vitest';
import { readAnswers } from '../../lambdas/ai/decision/answers.js';
import type { Question } from '../../lambdas/ai/decision/validate.js';
import type { ChatCompletion } from '../../lambdas/ai/types.js';

const choice = (n: number): Question => ({
  type: 'choice',
  instructions: 'Pick one.',
  criteria: Object.fromEntries(Array.from({ length: n }, (_, i) => [`opt${i}`, `option ${i}`])),
});
const score = (n: number): Question => ({ type: 'score', instructions: 'Rate.', criteria: Array.from({ length: n }, (_, i) => `level ${i}`) });

/** A reply without logprobs: the stated confidence is all there is. */
const reply = (answers: Record<string, { answer: string; confidence: number }>, logprobs: unknown = null): ChatCompletion =>
  ({ choices: [{ index: 0, message: { role: 'assistant', content: JSON.stringify(answers) }, finish_reason: 'stop', logprobs }] }) as unknown as ChatCompletion;

describe('decision answers: the written option wins every tie', () => {
  it('stated confidence 0 or 1/n, any written option: choice is the written label and confidence its probability, n = 2..64', () => {
    const wrong: string[] = [];
    for (let n = 2; n <= 64; n++) {
      for (let written = 0; written < n; written++) {
        for (const stated of [0, 1 / n]) {
          const a = readAnswers(reply({ c: { answer: String(written), confidence: stated }, s: { answer: String(written), confidence: stated } }), { c: choice(n), s: score(n) });
          const c = a.c as { choice: string; confidence: number; probabilities: Record<string, number> };
          if (c.choice !== `opt${written}` || c.confidence !== c.probabilities[`opt${written}`]) wrong.push(`n=${n} written=${written} stated=${stated}: ${c.choice}`);
          const s = a.s as { confidence: number; probabilities: Record<string, number> };
          if (s.confidence !== s.probabilities[String(written)]) wrong.push(`score n=${n} written=${written}`);
        }
      }
    }
    expect(wrong).toEqual([]);
  });

  it('a higher stated confidence still splits the rest evenly', () => {
    const a = readAnswers(reply({ c: { answer: '2', confidence: 0.7 } }), { c: choice(4) });
    expect(a.c).toEqual({ type: 'choice', choice: 'opt2', confidence: 0.7, probabilities: { opt0: 0.1, opt1: 0.1, opt2: 0.7, opt3: 0.1 } });
  });
});

describe('decision answers: logprobs without another code', () => {
  /** Logprobs spelling out `content`, the answer token `"1` with these alternatives. */
  const withLogprobs = (top: { token: string; logprob: number }[]) => {
    const tokens = ['{"c":{"answer":', '"1', '","confidence":0.6}}'];
    return reply({ c: { answer: '1', confidence: 0.6 } }, { content: tokens.map((token) => ({ token, logprob: Math.log(0.9), top_logprobs: token === '"1' ? top : [] })) });
  };

  it('top_logprobs [] or only the written code: the stated confidence', () => {
    for (const top of [[], [{ token: '"1', logprob: Math.log(0.9) }, { token: '1', logprob: Math.log(0.05) }, { token: ' hello', logprob: Math.log(0.01) }]]) {
      expect(readAnswers(withLogprobs(top), { c: choice(3) }).c, JSON.stringify(top)).toMatchObject({ choice: 'opt1', confidence: 0.6, probabilities: { opt0: 0.2, opt1: 0.6, opt2: 0.2 } });
    }
  });

  it('another code among the alternatives: the logprobs', () => {
    const a = readAnswers(withLogprobs([{ token: '"1', logprob: Math.log(0.75) }, { token: '"0', logprob: Math.log(0.25) }]), { c: choice(3) });
    expect(a.c).toMatchObject({ choice: 'opt1', confidence: 0.75, probabilities: { opt0: 0.25, opt1: 0.75, opt2: 0 } });
  });
});
