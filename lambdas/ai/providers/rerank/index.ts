/** The rerank providers by name: a new one is one file here and one line below. */
import { openAiCompatibleReranker } from './openai-compatible.js';
import type { Reranker } from './types.js';

export const RERANK_PROVIDERS = ['openai-compatible', 'bedrock'] as const;
export type RerankProviderName = (typeof RERANK_PROVIDERS)[number];

export const RERANKERS: Record<RerankProviderName, Reranker> = {
  'openai-compatible': openAiCompatibleReranker,
  // Loaded at its first call: only a function that reranks through Bedrock evaluates its SDK.
  bedrock: async (request) => (await import('./bedrock.js')).bedrockReranker(request),
};
