/**
 * What a rerank provider is given and gives back, and the checks every provider's answer goes through
 * (an upstream's answer is never trusted: the query route orders passages by it).
 */

export interface RerankRequest {
  /** openai-compatible: the base URL `/rerank` is appended to; bedrock: the endpoint, or null for the region's. */
  baseUrl: string | null;
  /** The upstream model (bedrock: the model ARN or id). */
  model: string;
  /** The upstream key when the profile names one. */
  apiKey: string | undefined;
  query: string;
  documents: string[];
  /** 1 to documents.length. */
  topN: number;
  /** Aborted on the profile's timeout or when the caller gives up. */
  signal: AbortSignal;
}

export interface RerankResult {
  /** Position in the request's documents. */
  index: number;
  relevance_score: number;
}

export interface RerankAnswer {
  /** Best first, exactly min(topN, documents) of them, each document at most once. */
  results: RerankResult[];
  /** Tokens the upstream said it used (Jina, Voyage and vLLM report them), else null. */
  tokens: number | null;
}

export type Reranker = (request: RerankRequest) => Promise<RerankAnswer>;

/** A reranker that answered something unusable, or could not be called: the message is the reason (no upstream body in it). */
export class RerankFailure extends Error {
  override name = 'RerankFailure';
}

/**
 * The results an upstream sent, checked and sorted best first (ties keep the candidates' order).
 * Refused: not a list, an item without a whole `index` in range or a finite score, an index twice,
 * fewer than `topN` results (the route would answer short); more than `topN` are cut to it.
 */
export function checkedResults(raw: unknown, documents: number, topN: number, field = 'relevance_score'): RerankResult[] {
  if (!Array.isArray(raw)) throw new RerankFailure('the answer has no results list');
  const seen = new Set<number>();
  const results: RerankResult[] = [];
  for (const item of raw as unknown[]) {
    const { index, [field]: score } = (item ?? {}) as Record<string, unknown>;
    if (!Number.isSafeInteger(index) || (index as number) < 0 || (index as number) >= documents) throw new RerankFailure(`the answer has an index out of range (${String(index).slice(0, 20)})`);
    if (typeof score !== 'number' || !Number.isFinite(score)) throw new RerankFailure(`the answer has a score that is not a finite number (index ${index})`);
    if (seen.has(index as number)) throw new RerankFailure(`the answer has index ${index} twice`);
    seen.add(index as number);
    results.push({ index: index as number, relevance_score: score });
  }
  const wanted = Math.min(topN, documents);
  if (results.length < wanted) throw new RerankFailure(`the answer has only ${results.length} of the ${wanted} results asked for`);
  results.sort((a, b) => b.relevance_score - a.relevance_score || a.index - b.index);
  return results.slice(0, wanted);
}

/** A token count an upstream reported, when it is one (a whole number from 0). */
export const reportedTokens = (v: unknown): number | null => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : null);
