/**
 * What a decision tier is asked (docs/ai/run.md): one chat call with every question still open, the
 * state and images in the user message, and a strict JSON schema the answer must follow. Every
 * question is answered by a short code (`yes`/`no`, or an option's or level's index) so that the
 * logprobs of that one token give the probability of each possible answer.
 */
import type { ChatBody } from '../types.js';
import type { DecisionInput, Question } from './validate.js';

/** The codes a question is answered with, in order: noul yes/no; choice and score their indexes. */
export function codesOf(question: Question): string[] {
  if (question.type === 'noul') return ['yes', 'no'];
  const n = question.type === 'choice' ? Object.keys(question.criteria).length : question.criteria.length;
  return Array.from({ length: n }, (_, i) => String(i));
}

/** The response_format's schema: per question id, `{answer: one of its codes, confidence: 0..1}`, every field required. */
export function answerSchema(questions: Record<string, Question>): Record<string, unknown> {
  const properties: Record<string, unknown> = {};
  for (const [id, q] of Object.entries(questions)) {
    properties[id] = {
      type: 'object',
      additionalProperties: false,
      required: ['answer', 'confidence'],
      properties: {
        answer: { type: 'string', enum: codesOf(q) },
        confidence: { type: 'number', description: 'Your probability, 0 to 1, that this answer is right.' },
      },
    };
  }
  return { type: 'object', additionalProperties: false, required: Object.keys(questions), properties };
}

const SYSTEM = [
  'You are a careful, calibrated judge. Read the state and answer every question about it.',
  'Answer each question with one of its codes only, and with your confidence: your probability, from 0 to 1, that the answer is right.',
  'Reply with JSON that follows the given schema, nothing else.',
].join(' ');

/**
 * A caller's text on one line of the prompt: line breaks and other control characters become spaces,
 * so an instruction, a meaning or a level cannot start a line of its own and pass for an option.
 * (Labels and question ids with them are refused outright: validate.ts.)
 */
const oneLine = (text: string) => text.replace(/[\u0000-\u001f\u007f\u2028\u2029]+/g, ' ');

function describe(id: string, q: Question): string {
  const lines = [`Question "${id}" (${q.type === 'noul' ? 'yes or no' : q.type === 'choice' ? 'pick one option' : 'pick one level'}): ${oneLine(q.instructions)}`];
  if (q.type === 'noul') {
    lines.push(`  "yes": ${oneLine(q.criteria?.true ?? 'the statement holds')}`);
    lines.push(`  "no": ${oneLine(q.criteria?.false ?? 'it does not')}`);
  } else if (q.type === 'choice') {
    Object.entries(q.criteria).forEach(([label, meaning], i) => lines.push(`  "${i}": ${label}: ${oneLine(meaning)}`));
  } else {
    lines.push('  Levels, lowest first:');
    q.criteria.forEach((level, i) => lines.push(`  "${i}": ${oneLine(level)}`));
  }
  return lines.join('\n');
}

const stateText = (state: unknown) => (typeof state === 'string' ? state : JSON.stringify(state, null, 2));

/** The chat messages: the state, the questions with their codes, and the images as image parts. */
export function decisionMessages(input: DecisionInput, questions: Record<string, Question>): ChatBody['messages'] {
  const text = [
    'STATE:',
    stateText(input.state),
    '',
    'QUESTIONS (answer each with one of the quoted codes):',
    ...Object.entries(questions).map(([id, q]) => describe(id, q)),
  ].join('\n');
  const content = input.images?.length ? [{ type: 'text', text }, ...input.images.map((url) => ({ type: 'image_url', image_url: { url } }))] : text;
  return [
    { role: 'system', content: SYSTEM },
    { role: 'user', content },
  ];
}

/** Output tokens a tier may use: the JSON of every answer with room to spare. */
export const outputTokensFor = (questionCount: number) => 64 + 48 * questionCount;

/** The chat request of one tier call (the route's upstream model is set by the provider). */
export function decisionChatBody(input: DecisionInput, questions: Record<string, Question>, maxTokens: number): ChatBody {
  return {
    messages: decisionMessages(input, questions),
    response_format: { type: 'json_schema', json_schema: { name: 'decision_answers', strict: true, schema: answerSchema(questions) } },
    temperature: 0,
    logprobs: true,
    top_logprobs: 5,
    max_tokens: maxTokens,
  };
}
