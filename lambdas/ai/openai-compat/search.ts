/**
 * Vector store search (docs/ai/openai-compatibility.md, "Search"): the search behind
 * `POST /v1/vector_stores/{id}/search` and the Responses API's `file_search` tool. The signature is
 * the contract between them (docs/plans/issue-38-openai-retrieval.md, 2.6); the search part fills in the body.
 */
import type { Principal } from '../../auth/principal.js';
import type { Engine } from '../../engine/ports.js';
import type { Indexing } from '../../knowledge/collection-query.js';
import type { Attributes } from './keys.js';

/** A comparison or compound filter on a vector store file's attributes (OpenAI's shapes). */
export type ComparisonFilter = { type: 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte' | 'in' | 'nin'; key: string; value: string | number | boolean | Array<string | number> };
export type CompoundFilter = { type: 'and' | 'or'; filters: Array<ComparisonFilter | CompoundFilter> };
export type AttributeFilter = ComparisonFilter | CompoundFilter;

export interface VectorStoreSearch {
  /** Collection ids (`col_…`), already parsed from `vs_` ids; each read in the caller's workspace (404 otherwise). */
  collectionIds: string[];
  /** 1 to 5 queries, each 1 to 8,000 characters; embedded once each. */
  queries: string[];
  filters?: AttributeFilter;
  /** 1…50 (default 10). */
  maxResults: number;
  /** Results under it are dropped (cosine, 0…1). */
  scoreThreshold?: number;
  signal?: AbortSignal;
}

/** One result in OpenAI's shape, with our citation as an extra field the SDK keeps. */
export interface VectorStoreSearchResult {
  file_id: string;
  filename: string;
  score: number;
  attributes: Attributes | null;
  content: Array<{ type: 'text'; text: string }>;
  citation: { collection_id: string; item_id: string; package_id: string; chunk_id: string; locator: string };
  /** The vector store (`vs_…`) the result came from. */
  vector_store_id: string;
}

export interface VectorStoreSearchAnswer {
  results: VectorStoreSearchResult[];
  /** Per store, how much of it the search covered (the collection's `indexing`, read after the search). */
  indexing: Record<string, Indexing>;
}

export async function searchVectorStores(_engine: Engine, _principal: Principal, _search: VectorStoreSearch): Promise<VectorStoreSearchAnswer> {
  throw new Error('searchVectorStores: not built yet (issue 38, search part)');
}
