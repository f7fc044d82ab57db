/**
 * A decision run's rules (spec 4.5, docs/ai/run.md), as zod schemas: the `input` (state, questions,
 * images; anything wrong in it is 400 invalid_decision_input) and `escalate` (400 invalid_escalate).
 */
import * as z from 'zod';
import { PlatformError } from '../../shared/errors.js';
import { onFirstUse, parseBody } from '../../shared/validate.js';

/** Spec 8: at most 64 questions and 16 images a run. */
export const MAX_QUESTIONS = 64;
export const MAX_IMAGES = 16;
/** Options of a choice, levels of a score: 2 to 64 (each is answered by its index as a code). */
export const MAX_OPTIONS = 64;
/** A question id: also a property name of the JSON schema the tier answers in. */
export const QUESTION_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
/**
 * Line breaks and other control characters (U+0000-U+001F, U+007F, U+2028, U+2029): a choice label or
 * a question id is written into a line of the prompt (prompt.ts), where one could forge a line.
 */
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f\u2028\u2029]/;
/** min_confidence when escalate does not set it. */
export const DEFAULT_MIN_CONFIDENCE = 0.7;

/** The schemas, built at their first use (onFirstUse): only the run route's decision calls need them. */
const decisionSchemas = onFirstUse(() => {
  const text = z.string().trim().min(1);

  const noulQuestion = z
    .object({
      type: z.literal('noul'),
      instructions: text,
      /** What "yes" (true) and "no" (false) mean here; optional. */
      criteria: z.object({ true: text.optional(), false: text.optional() }).strict().optional().describe('What "yes" (`true`) and "no" (`false`) mean here.'),
    })
    .strict()
    .describe('A yes-or-no question: answered with `noul`, the probability of yes.');

  const choiceQuestion = z
    .object({
      type: z.literal('choice'),
      instructions: text,
      /** label -> what it means; the answer's `choice` is one of the labels. */
      criteria: z
        .record(z.string().min(1).max(128), text)
        .refine((c) => Object.keys(c).length >= 2 && Object.keys(c).length <= MAX_OPTIONS, `a choice has 2 to ${MAX_OPTIONS} options`)
        .describe(`2 to ${MAX_OPTIONS} options: label (1 to 128 characters, no control characters) to what it means.`),
    })
    .strict()
    .describe('Pick one option: answered with `choice`, one of the labels.');

  const scoreQuestion = z
    .object({
      type: z.literal('score'),
      instructions: text,
      /** The levels, lowest first; the answer's indexes ("0", "1", ...) point into it. */
      criteria: z.array(text).min(2).max(MAX_OPTIONS).describe('The levels, lowest first: the answer\'s indexes ("0", "1"...) point into it.'),
    })
    .strict()
    .describe('Pick one level: answered with `score`, the expected level index.');

  const questionSchema = z.discriminatedUnion('type', [noulQuestion, choiceQuestion, scoreQuestion]);

  /** An image: an http(s) URL or a base64 `data:image/...` URL. */
  const image = z
    .string()
    .refine((u) => /^https?:\/\/\S+$/i.test(u) || /^data:image\/[a-z0-9.+-]+;base64,[A-Za-z0-9+/=\s]+$/i.test(u), 'an image is an http(s) URL or a data:image/...;base64 URL');

  const decisionInputSchema = z
    .object({
      state: z
        .unknown()
        .refine((v) => v !== undefined && v !== null, 'state is required and may be any JSON but null')
        .describe('What to judge: any JSON but null (required).'),
      questions: z
        .record(z.string().regex(QUESTION_ID_PATTERN, 'question ids are 1 to 64 letters, digits, "_" or "-"'), questionSchema)
        .refine((q) => Object.keys(q).length >= 1 && Object.keys(q).length <= MAX_QUESTIONS, `1 to ${MAX_QUESTIONS} questions`)
        .describe(`1 to ${MAX_QUESTIONS} questions keyed by your ids (1 to 64 letters, digits, \`_\`, \`-\`); the answers come under the same ids.`),
      images: z.array(image).max(MAX_IMAGES).optional().describe(`At most ${MAX_IMAGES} images, each an http(s) URL or a \`data:image/...;base64,\` URL.`),
    })
    .strict()
    .describe('A decision run\'s input: any other key is `400 invalid_decision_input`.');

  const escalateSchema = z.union([
    z.boolean(),
    z
      .object({
        min_confidence: z.number().min(0).max(1).optional(),
        max_tier: z.union([z.number().int().min(0), z.string().min(1)]).optional(),
      })
      .strict(),
  ]).describe(`Ask the questions answered with a confidence under \`min_confidence\` (0 to 1, default ${DEFAULT_MIN_CONFIDENCE}) again on the next stronger tier, up to \`max_tier\` (a tier index from 0 or a tier's route id; default the last). \`true\`: the defaults.`);

  return {
    question: questionSchema,
    input: z.object({ input: decisionInputSchema }),
    escalate: z.object({ escalate: escalateSchema }),
    decisionInputSchema,
    escalateSchema,
  };
});

/** A decision run's `input` and `escalate` as the parse checks them, for the body's documented schema (run.ts). */
export const decisionRequestSchemas = () => {
  const { decisionInputSchema, escalateSchema } = decisionSchemas();
  return { input: decisionInputSchema, escalate: escalateSchema };
};

export type Question = z.infer<ReturnType<typeof decisionSchemas>['question']>;

export type DecisionInput = z.infer<ReturnType<typeof decisionSchemas>['input']>['input'] & { questions: Record<string, Question> };

/** Parses a decision `input` (already known to be a plain object): any fault is 400 invalid_decision_input. */
export function parseDecisionInput(input: Record<string, unknown>): DecisionInput {
  if (!Object.hasOwn(input, 'state')) throw new PlatformError('invalid_decision_input', 'input.state is required (any JSON but null).', 'input.state');
  if (!Object.hasOwn(input, 'questions')) throw new PlatformError('invalid_decision_input', 'input.questions is required.', 'input.questions');
  // zod's records skip a `__proto__` key without a word, as every plain object carrying the questions
  // would (assigning it sets a prototype): refused here rather than a question silently dropped.
  const questions = input.questions;
  if (questions && typeof questions === 'object' && Object.hasOwn(questions, '__proto__')) {
    throw new PlatformError('invalid_decision_input', 'A question id may not be "__proto__".', 'input.questions.__proto__');
  }
  // The same for a choice's labels: an option would be dropped, and the model asked about one fewer.
  for (const [id, question] of Object.entries(questions && typeof questions === 'object' ? questions : {})) {
    const criteria = (question as { criteria?: unknown } | null)?.criteria;
    if (criteria && typeof criteria === 'object' && Object.hasOwn(criteria, '__proto__')) {
      throw new PlatformError('invalid_decision_input', 'A choice label may not be "__proto__".', `input.questions.${id}.criteria.__proto__`);
    }
  }
  refuseControlCharacters(questions);
  const { input: parsed } = parseBody(decisionSchemas().input, { input }, { unknownField: 'invalid_decision_input', invalid: 'invalid_decision_input' });
  return parsed as DecisionInput;
}

/** A text in an error message as JSON, U+2028 and U+2029 escaped too (JSON.stringify leaves them). */
const shown = (text: string) => JSON.stringify(text).replace(/[\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);

/**
 * Question ids and choice labels with a control character are refused by name (JSON-escaped): zod
 * would say only "Invalid key in record", with the raw character in `param`.
 */
function refuseControlCharacters(questions: unknown): void {
  if (!questions || typeof questions !== 'object' || Array.isArray(questions)) return;
  for (const [id, question] of Object.entries(questions)) {
    if (CONTROL_CHARACTER.test(id)) throw new PlatformError('invalid_decision_input', `The question id ${shown(id)} has a control character; ids are 1 to 64 letters, digits, "_" or "-".`, 'input.questions');
    const { type, criteria } = (question ?? {}) as { type?: unknown; criteria?: unknown };
    if (type !== 'choice' || !criteria || typeof criteria !== 'object' || Array.isArray(criteria)) continue;
    const label = Object.keys(criteria).find((l) => CONTROL_CHARACTER.test(l));
    if (label !== undefined) {
      throw new PlatformError('invalid_decision_input', `The choice label ${shown(label)} has a control character (line breaks, U+0000-U+001F, U+007F, U+2028, U+2029 are refused).`, `input.questions.${id}.criteria`);
    }
  }
}

export interface Escalation {
  minConfidence: number;
  /** Index into the route's tiers of the strongest tier that may be asked. */
  maxTier: number;
}


/**
 * `escalate` as sent (absent or false: only the first tier is asked): true or an object of
 * `min_confidence` (0 to 1, default 0.7) and `max_tier` (a tier index from 0, or a tier's route id;
 * default the last tier). Anything else is 400 invalid_escalate.
 */
export function parseEscalate(value: unknown, tiers: readonly string[]): Escalation | null {
  if (value === undefined || value === false) return null;
  const parsed = parseBody(decisionSchemas().escalate, { escalate: value }, { unknownField: 'invalid_escalate', invalid: 'invalid_escalate' }).escalate;
  if (parsed === false) return null;
  const options = parsed === true ? {} : parsed;
  let maxTier = tiers.length - 1;
  if (typeof options.max_tier === 'number') {
    if (options.max_tier >= tiers.length) throw new PlatformError('invalid_escalate', `escalate.max_tier: this route has tiers 0 to ${tiers.length - 1}.`, 'escalate.max_tier');
    maxTier = options.max_tier;
  } else if (typeof options.max_tier === 'string') {
    maxTier = tiers.indexOf(options.max_tier);
    if (maxTier < 0) throw new PlatformError('invalid_escalate', `escalate.max_tier: "${options.max_tier}" is not a tier of this route.`, 'escalate.max_tier');
  }
  return { minConfidence: options.min_confidence ?? DEFAULT_MIN_CONFIDENCE, maxTier };
}
