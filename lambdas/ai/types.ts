/**
 * The AI API's wire shapes (OpenAI's chat completions and embeddings, spec 2 and 4.3 to 4.5) and the
 * contract every provider implements (one folder per provider under providers/).
 */
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
