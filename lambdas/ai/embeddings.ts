/**
 * `POST /v1/embeddings` (spec 4.4): one vector per input string, in order. The upstream is always asked
 * for floats; `encoding_format: "base64"` is then answered as OpenAI does (each vector as little-endian
 * float32 bytes, base64), whatever the upstream supports.
 */
import * as z from 'zod';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseBody } from '../shared/validate.js';
import type { EmbeddingList } from './types.js';

/** Inputs per call, and characters per input (OpenAI's 2,048 inputs; about 8k tokens each). */
export const MAX_EMBEDDING_INPUTS = 2048;
export const MAX_EMBEDDING_INPUT_CHARS = 32_000;

export const embeddingsRequestSchema = onFirstUse(() =>
  z
    .object({
      input: z
        .union([z.string(), z.array(z.string())])
        .describe(`A non-empty string, or 1 to ${MAX_EMBEDDING_INPUTS} non-empty strings of at most ${MAX_EMBEDDING_INPUT_CHARS} characters each: one vector per string, in order.`),
      model: z.string().min(1).optional().describe('An embeddings route id of the organization; `auto` or absent: its default embeddings route.'),
      encoding_format: z.enum(['float', 'base64']).optional().describe('`base64`: each vector as its little-endian float32 bytes in base64, as OpenAI answers it. Default `float`.'),
      dimensions: z.number().int().min(1).max(65_536).optional().describe('Passed to the upstream where it supports it.'),
      user: z.string().optional().describe('Replaced by a value derived from the organization before it leaves the service.'),
    })
    .strict(),
);

/** The answer (spec 2, "Embedding list"), as shapeEmbeddings makes it. */
export const embeddingListSchema = onFirstUse(() =>
  z.strictObject({
    object: z.literal('list'),
    data: z.array(
      z.strictObject({
        object: z.literal('embedding'),
        index: z.number().int().describe("The input's position."),
        embedding: z.union([z.array(z.number()), z.string().describe('`encoding_format: base64`: the little-endian float32 bytes, base64.')]),
      }),
    ),
    model: z.string().describe('The route id.'),
    usage: z
      .strictObject({ prompt_tokens: z.number().int().min(0), total_tokens: z.number().int().min(0) })
      .describe("The upstream's counts; where it reported no valid ones, those the call was charged (its usage record's)."),
  }),
);

export type EmbeddingsRequest = z.infer<ReturnType<typeof embeddingsRequestSchema>>;

export function parseEmbeddingsRequest(body: unknown): EmbeddingsRequest & { inputs: string[] } {
  const request = parseBody(embeddingsRequestSchema(), body, { unknownField: 'unsupported_field' });
  const inputs = typeof request.input === 'string' ? [request.input] : request.input;
  if (!inputs.length || inputs.some((s) => s.length === 0)) throw new PlatformError('invalid_body', 'input is a non-empty string or a non-empty array of non-empty strings.', 'input');
  if (inputs.length > MAX_EMBEDDING_INPUTS) throw new PlatformError('input_too_large', `At most ${MAX_EMBEDDING_INPUTS} inputs a call.`, 'input');
  if (inputs.some((s) => s.length > MAX_EMBEDDING_INPUT_CHARS)) throw new PlatformError('input_too_large', `An input is at most ${MAX_EMBEDDING_INPUT_CHARS} characters.`, 'input');
  return { ...request, inputs };
}

/** The upstream's answer checked (one vector per input, numbers) and put in input order, encoded as asked. */
export function shapeEmbeddings(list: EmbeddingList, inputs: number, encoding: 'float' | 'base64'): EmbeddingList {
  const data = [...list.data].sort((a, b) => a.index - b.index);
  if (data.length !== inputs || data.some((d, i) => d.index !== i || !Array.isArray(d.embedding) || !d.embedding.every((x) => typeof x === 'number'))) {
    throw new PlatformError('upstream_error', "The model route's upstream failed: it did not answer one vector of numbers per input.");
  }
  return {
    object: 'list',
    data: data.map((d) => ({ object: 'embedding', index: d.index, embedding: encoding === 'base64' ? base64Floats(d.embedding as number[]) : d.embedding })),
    model: list.model,
    usage: { prompt_tokens: list.usage?.prompt_tokens ?? 0, total_tokens: list.usage?.total_tokens ?? list.usage?.prompt_tokens ?? 0 },
  };
}

function base64Floats(vector: number[]): string {
  const bytes = Buffer.alloc(vector.length * 4);
  vector.forEach((x, i) => bytes.writeFloatLE(x, i * 4));
  return bytes.toString('base64');
}
