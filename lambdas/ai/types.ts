/**
 * The AI API's wire shapes (OpenAI's chat completions and embeddings, spec 2 and 4.3 to 4.5) and the
 * contract every provider implements (one folder per provider under providers/).
 */
import * as z from 'zod/mini';
import { onFirstUse } from '../shared/validate.js';
import type { ModelRoute } from './model-routes.js';

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A chat request as validated (chat.ts): OpenAI's fields, the route resolved, values already capped. */
export type ChatBody = Record<string, unknown> & { messages: unknown[] };

export interface ChatCompletion {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: { index: number; message: Record<string, unknown> & { role: string; content: unknown }; finish_reason: string | null; logprobs?: unknown }[];
  usage: Usage;
  [field: string]: unknown;
}

/** One server-sent chunk of a streamed chat (OpenAI's `chat.completion.chunk`). */
export interface ChatChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: { index: number; delta: Record<string, unknown>; finish_reason: string | null; logprobs?: unknown }[];
  usage?: Usage | null;
  [field: string]: unknown;
}

/** A token count as the answers carry it. */
const tokens = () => z.int().check(z.nonnegative());

/** Usage of a chat answer; an upstream's further fields (`prompt_tokens_details`...) are passed on. */
const chatUsageSchema = onFirstUse(() =>
  z.looseObject({ prompt_tokens: tokens(), completion_tokens: tokens(), total_tokens: tokens() }).check(z.meta({ id: 'ChatUsage', description: 'Tokens the call used, as the upstream counted them; where it reported no valid counts, the ones the call was charged (its usage record’s). Further fields of the upstream’s (`prompt_tokens_details`...) are passed on.' })),
);

/**
 * The answer of a non-streamed chat (spec 2, "Chat completion"): the upstream's answer as it came, its
 * `model` the route id. Open objects: whatever else an OpenAI-compatible upstream writes (`system_fingerprint`,
 * `service_tier`, a message's `tool_calls`, `refusal`, `annotations`, a choice's `logprobs`) is passed on unchanged.
 */
export const chatCompletionSchema = onFirstUse(() =>
  z
    .looseObject({
      id: z.string(),
      object: z.literal('chat.completion'),
      created: z.int().check(z.describe('Unix seconds.')),
      model: z.string().check(z.describe('The route id the request named (or the default route).')),
      choices: z.array(
        z.looseObject({
          index: z.int(),
          message: z.looseObject({
            role: z.string().check(z.describe('`assistant`.')),
            content: z.nullable(z.string()).check(z.describe('The reply; null when the reply is only `tool_calls`.')),
          }),
          finish_reason: z.nullable(z.string()).check(z.describe('`stop`, `length`, `tool_calls`, `content_filter`...')),
        }),
      ),
      usage: chatUsageSchema(),
    })
    .check(
      z.describe(
        'OpenAI’s chat completion: the fields here are always there; any other field the route’s upstream answers (`system_fingerprint`, `service_tier`, a message’s `tool_calls`, `refusal`, `annotations`, a choice’s `logprobs`) is passed on unchanged.',
      ),
    ),
);

/**
 * One chunk of a streamed chat (OpenAI's `chat.completion.chunk`), the JSON of one `data:` line: the
 * upstream's chunk as it came, its `model` the route id; `usage` only when the client asked for it.
 */
export const chatCompletionChunkSchema = onFirstUse(() =>
  z
    .looseObject({
      id: z.string(),
      object: z.literal('chat.completion.chunk'),
      created: z.int().check(z.describe('Unix seconds.')),
      model: z.string().check(z.describe('The route id.')),
      choices: z
        .array(
          z.looseObject({
            index: z.int(),
            delta: z.looseObject({}).check(z.describe('What this chunk adds to the message: `role` (first chunk), `content`, `tool_calls`...')),
            finish_reason: z.nullable(z.string()).check(z.describe('Null until the last chunk of the choice.')),
          }),
        )
        .check(z.describe('Empty in the final usage chunk.')),
      usage: z
        .optional(z.nullable(z.looseObject({ prompt_tokens: tokens(), completion_tokens: tokens(), total_tokens: tokens() })))
        .check(z.describe('Only with `stream_options.include_usage`: the upstream’s counts as it sent them, in the final chunk (`choices: []`), and in others where it counts as it goes.')),
    })
    .check(
      z.describe(
        'The JSON of one `data:` line of a streamed chat. The stream is `data: <chunk>` events as the upstream sends them and ends `data: [DONE]`; a failure once streaming is one event `data: {"error": {"code", "message", "type", "param"}}` and the stream ends without `[DONE]`. Fields beyond these, the upstream’s, are passed on unchanged.',
      ),
    ),
);

export type EmbeddingsBody = Record<string, unknown> & { input: string[] };

export interface EmbeddingList {
  object: 'list';
  data: { object: 'embedding'; index: number; embedding: number[] | string }[];
  model: string;
  usage: { prompt_tokens: number; total_tokens: number };
}

/** What a provider is given for one upstream call. */
export interface UpstreamCall {
  route: ModelRoute;
  /** The upstream API key, when the route names one (providers/credentials.ts). */
  apiKey: string | undefined;
  /** Aborts the upstream call: the client left, or the route's timeout passed. */
  signal: AbortSignal;
}

/** A chat and embeddings provider: how a request maps out, and how an answer and a stream map back. */
export interface ModelProvider {
  chat(call: UpstreamCall, body: ChatBody): Promise<ChatCompletion>;
  /** Yields chunks as the upstream sends them; never buffers the whole answer. */
  chatStream(call: UpstreamCall, body: ChatBody): AsyncIterable<ChatChunk>;
  embed(call: UpstreamCall, body: EmbeddingsBody): Promise<EmbeddingList>;
}
