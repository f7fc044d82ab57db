/**
 * Vector store search (docs/ai/openai-compatibility.md, "Search"): the search behind
 * `POST /v1/vector_stores/{id}/search` and the Responses API's `file_search` tool. The signature is
 * the contract between them (docs/plans/issue-38-openai-retrieval.md, 2.6); the search part fills in the body.
 */
import * as z from 'zod/mini';
import type { Principal } from '../../auth/principal.js';
import type { Engine, KvItem } from '../../engine/ports.js';
import { citationFields } from '../../knowledge/chunk-index.js';
import { collectionKey } from '../../knowledge/collection-keys.js';
import { indexingOf, MAX_QUERY_CHARS, searchCollectionChunks, type CloudCollectionSearch, type Indexing } from '../../knowledge/collection-query.js';
import { readCollection, workspaceOf } from '../../knowledge/collection-records.js';
import { PlatformError } from '../../shared/errors.js';
import { onFirstUse, isJsonObject } from '../../shared/validate.js';
import { wellFormed } from '../../vector/passages.js';
import { attributesOf, evaluateFilter, MAX_FILTER_COMPARISONS, MAX_FILTER_DEPTH, MAX_FILTER_KEY_CHARS, MAX_FILTER_VALUES, parseFilters } from './filters.js';
import { vectorStoreId } from './ids.js';
import { vectorStoreFileKey, vectorStoreFilesPartition, type Attributes, type VectorStoreFileRecord } from './keys.js';
import type { AttributeFilter } from './filters.js';
/** A comparison or compound filter on a vector store file's attributes (OpenAI's shapes; defined beside their parse). */
export type { AttributeFilter, ComparisonFilter, CompoundFilter } from './filters.js';

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

export const MAX_SEARCH_QUERIES = 5;
export const MAX_SEARCH_RESULTS = 50;
export const DEFAULT_SEARCH_RESULTS = 10;
const RANKERS = ['none', 'auto', 'default-2024-11-15'] as const;

/** `POST /v1/vector_stores/{id}/search`'s body, read: what searchVectorStores takes but the stores. */
export interface SearchRequest {
  queries: string[];
  filters?: AttributeFilter;
  maxResults: number;
  scoreThreshold?: number;
}

const invalid = (param: string, message: string) => new PlatformError('invalid_body', message, param);
const SEARCH_FIELDS = new Set(['query', 'filters', 'max_num_results', 'ranking_options', 'rewrite_query']);

/** One query: 1 to 8,000 characters (as collection query), not only white space, well-formed Unicode. */
function parseQuery(value: unknown, param: string): string {
  if (typeof value !== 'string' || value.trim().length === 0 || [...value].length > MAX_QUERY_CHARS || !wellFormed(value)) {
    throw invalid(param, `${param} is a string of 1 to ${MAX_QUERY_CHARS} characters, not only white space.`);
  }
  return value;
}

/** `max_num_results` as OpenAI bounds it (1…50), for the search route and the `file_search` tool alike. */
export function parseMaxResults(value: unknown, param = 'max_num_results'): number {
  if (value === undefined || value === null) return DEFAULT_SEARCH_RESULTS;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_SEARCH_RESULTS) throw invalid(param, `${param} is a whole number from 1 to ${MAX_SEARCH_RESULTS}.`);
  return value;
}

/**
 * `ranking_options` {ranker?, score_threshold?}: the ranker is accepted and not applied (no reranker
 * here); the threshold (0…1) drops results under it. `extra` names fields a caller takes besides
 * (the Responses tool's `hybrid_search`), accepted and ignored.
 */
export function parseRankingOptions(value: unknown, param = 'ranking_options', extra: readonly string[] = []): { scoreThreshold?: number } {
  if (value === undefined || value === null) return {};
  if (!isJsonObject(value)) throw invalid(param, `${param} is an object {ranker?, score_threshold?}.`);
  for (const key of Object.keys(value)) {
    if (key !== 'ranker' && key !== 'score_threshold' && !extra.includes(key)) throw new PlatformError('unsupported_field', `Unknown field "${key.slice(0, 64)}" in ${param}.`, `${param}.${key.slice(0, 64)}`);
  }
  if (value.ranker !== undefined && value.ranker !== null && !(RANKERS as readonly unknown[]).includes(value.ranker)) throw invalid(`${param}.ranker`, `${param}.ranker is one of ${RANKERS.join(', ')}.`);
  const threshold = value.score_threshold;
  if (threshold === undefined || threshold === null) return {};
  if (typeof threshold !== 'number' || !Number.isFinite(threshold) || threshold < 0 || threshold > 1) throw invalid(`${param}.score_threshold`, `${param}.score_threshold is a number from 0 to 1.`);
  return { scoreThreshold: threshold };
}

/** The search body: every fault `400 invalid_body` naming the field, an unknown field `400 unsupported_field`. */
export function parseVectorStoreSearch(body: unknown): SearchRequest {
  if (!isJsonObject(body)) throw new PlatformError('invalid_body', 'The body is a JSON object with `query`.');
  for (const key of Object.keys(body)) if (!SEARCH_FIELDS.has(key)) throw new PlatformError('unsupported_field', `Unknown field "${key.slice(0, 64)}".`, key.slice(0, 64));
  const query = body.query;
  if (query === undefined || query === null) throw invalid('query', 'query is required.');
  let queries: string[];
  if (Array.isArray(query)) {
    if (query.length < 1 || query.length > MAX_SEARCH_QUERIES) throw invalid('query', `query is a string or an array of 1 to ${MAX_SEARCH_QUERIES} strings.`);
    queries = query.map((q, i) => parseQuery(q, `query.${i}`));
  } else queries = [parseQuery(query, 'query')];
  if (body.rewrite_query !== undefined && body.rewrite_query !== null && typeof body.rewrite_query !== 'boolean') throw invalid('rewrite_query', 'rewrite_query is a boolean.');
  const filters = body.filters === undefined || body.filters === null ? undefined : parseFilters(body.filters, 'filters');
  return { queries, filters, maxResults: parseMaxResults(body.max_num_results), ...parseRankingOptions(body.ranking_options) };
}

/** A vector store of the caller's workspace: a live `cloud` collection; anything else is the same 404 as an unknown one. */
async function readVectorStore(engine: Engine, principal: Principal, collectionId: string): Promise<KvItem> {
  const notFound = () => new PlatformError('collection_not_found', `No vector store ${vectorStoreId(collectionId)} in this workspace.`, 'vector_store_id');
  let collection: KvItem;
  try {
    collection = await readCollection(engine, principal, collectionId);
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'collection_not_found') throw notFound();
    throw error;
  }
  if (collection.mode !== 'cloud') throw notFound();
  return collection;
}

/** Every vector store file record of a store, by item id (a store of many thousand files reads them all: docs' "Search"). */
async function storeFiles(engine: Engine, org: string, workspace: string, collectionId: string): Promise<Map<string, VectorStoreFileRecord>> {
  const files = new Map<string, VectorStoreFileRecord>();
  let cursor: string | undefined;
  do {
    const page = await engine.kv.query({ pk: vectorStoreFilesPartition(org, workspace, collectionId), cursor });
    for (const item of page.items) files.set(String(item.sk), item as unknown as VectorStoreFileRecord);
    cursor = page.cursor;
  } while (cursor);
  return files;
}

/** The records of some items' vector store files (100 keys a read). */
async function someFiles(engine: Engine, org: string, workspace: string, collectionId: string, itemIds: string[]): Promise<Map<string, VectorStoreFileRecord>> {
  const files = new Map<string, VectorStoreFileRecord>();
  for (let i = 0; i < itemIds.length; i += 100) {
    const ids = itemIds.slice(i, i + 100);
    const records = await engine.kv.getMany(ids.map((id) => vectorStoreFileKey(org, workspace, collectionId, id)));
    ids.forEach((id, j) => records[j] && files.set(id, records[j] as unknown as VectorStoreFileRecord));
  }
  return files;
}

/**
 * The search: each store read in the caller's workspace (404 for another's, a non-cloud collection or
 * an unknown id; 410 past its end), `filters` evaluated on every file's attributes to the items a
 * store may answer (none: nothing is embedded), the queries embedded once through the workspace's
 * vector database and each store searched with each, then merged by score, one result a chunk (its
 * best score), those under `scoreThreshold` dropped, the best `maxResults` kept.
 */
export async function searchVectorStores(engine: Engine, principal: Principal, search: VectorStoreSearch): Promise<VectorStoreSearchAnswer> {
  const org = principal.organizationId;
  const workspace = await workspaceOf(engine, principal);
  const ids = [...new Set(search.collectionIds)];
  const collections = await Promise.all(ids.map((id) => readVectorStore(engine, principal, id)));
  const filters = search.filters;
  const filesByStore = new Map<string, Map<string, VectorStoreFileRecord>>();
  const searches: CloudCollectionSearch[] = [];
  for (const [i, collection] of collections.entries()) {
    if (!filters) {
      searches.push({ collection });
      continue;
    }
    const files = await storeFiles(engine, org, workspace, ids[i]);
    filesByStore.set(ids[i], files);
    const allowed = new Set([...files].filter(([, file]) => evaluateFilter(filters, attributesOf(file.attributes))).map(([itemId]) => itemId));
    searches.push({ collection, only: allowed });
  }
  const found = await searchCollectionChunks(engine, principal, workspace, searches, search.queries, search.maxResults, search.signal);

  type Found = { collectionId: string; match: (typeof found)[number][number]['matches'][number]; item: KvItem };
  const best = new Map<string, Found>();
  found.forEach((perQuery, i) => {
    for (const { matches, items } of perQuery) {
      for (const match of matches) {
        const c = match.citation;
        const key = `${c.collection_id}/${c.item_id}/${c.package_id}/${c.chunk_id}`;
        const seen = best.get(key);
        if (!seen || seen.match.score < match.score) best.set(key, { collectionId: ids[i], match, item: items.get(c.item_id)! });
      }
    }
  });
  const threshold = search.scoreThreshold;
  const kept = [...best.values()]
    .filter((f) => threshold === undefined || f.match.score >= threshold)
    .sort((a, b) => b.match.score - a.match.score)
    .slice(0, search.maxResults);

  // Attributes of the files answered: read with the filter already, else now (at most maxResults items).
  for (const id of ids) {
    if (filesByStore.has(id)) continue;
    const itemIds = [...new Set(kept.filter((f) => f.collectionId === id).map((f) => f.match.citation.item_id))];
    filesByStore.set(id, await someFiles(engine, org, workspace, id, itemIds));
  }
  const results = kept.map(({ collectionId, match, item }): VectorStoreSearchResult => {
    const file = filesByStore.get(collectionId)?.get(match.citation.item_id);
    return {
      file_id: (item.upload_id as string | null | undefined) ?? match.citation.item_id,
      filename: String(item.filename),
      score: match.score,
      attributes: file ? (attributesOf(file.attributes) as Attributes) : null,
      content: [{ type: 'text', text: match.text }],
      citation: match.citation,
      vector_store_id: vectorStoreId(collectionId),
    };
  });

  // `indexing` as it is after the search, so it is true of the moment the answer leaves.
  const now = await engine.kv.getMany(ids.map((id) => collectionKey(org, workspace, id)));
  const indexing = Object.fromEntries(ids.map((id, i) => [vectorStoreId(id), indexingOf(now[i] ?? collections[i])]));
  return { results, indexing };
}

/** OpenAI's search page: our `citation` rides on each result (the SDK keeps fields it does not know). */
export function searchPage(queries: string[], answer: VectorStoreSearchAnswer) {
  return {
    object: 'vector_store.search_results.page' as const,
    search_query: queries,
    data: answer.results.map(({ vector_store_id: _store, ...result }) => result),
    has_more: false as const,
    next_page: null,
  };
}

// ---- The documents' schemas (lambdas/openapi/ai-openai.ts); parseVectorStoreSearch reads the body by hand.

const comparisonSchema = () =>
  z.strictObject({
    type: z.enum(['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin']),
    key: z.string().check(z.minLength(1), z.maxLength(MAX_FILTER_KEY_CHARS), z.describe('The attribute to compare.')),
    value: z.union([z.string(), z.number(), z.boolean(), z.array(z.union([z.string(), z.number()])).check(z.minLength(1), z.maxLength(MAX_FILTER_VALUES))]).check(
      z.describe(`\`in\`/\`nin\`: 1 to ${MAX_FILTER_VALUES} strings or numbers; \`gt\`…\`lte\`: a string or a number; \`eq\`/\`ne\`: a string, number or boolean.`),
    ),
  });

export const attributeFilterSchema = onFirstUse(() =>
  z
    .union([
      comparisonSchema().check(z.meta({ id: 'OpenAIComparisonFilter' })),
      z
        .strictObject({
          type: z.enum(['and', 'or']),
          filters: z
            .array(z.record(z.string(), z.unknown()))
            .check(z.minLength(1), z.maxLength(MAX_FILTER_COMPARISONS), z.describe('Comparison or compound filters, nested.')),
        })
        .check(z.meta({ id: 'OpenAICompoundFilter' })),
    ])
    .check(
      z.describe(
        `A filter on the files' attributes: at most ${MAX_FILTER_DEPTH} levels deep and ${MAX_FILTER_COMPARISONS} comparisons. A file without the key never matches (\`ne\`, \`nin\` too); values of different types never match; strings order lexicographically.`,
      ),
    ),
);

export const vectorStoreSearchRequestSchema = onFirstUse(() =>
  z.strictObject({
    query: z
      .union([z.string().check(z.minLength(1), z.maxLength(MAX_QUERY_CHARS)), z.array(z.string().check(z.minLength(1), z.maxLength(MAX_QUERY_CHARS))).check(z.minLength(1), z.maxLength(MAX_SEARCH_QUERIES))])
      .check(z.describe(`A query, or 1 to ${MAX_SEARCH_QUERIES}, each 1 to ${MAX_QUERY_CHARS} characters; each is searched and the results merged.`)),
    filters: z.optional(z.nullable(attributeFilterSchema())),
    max_num_results: z.optional(z.nullable(z.int().check(z.minimum(1), z.maximum(MAX_SEARCH_RESULTS), z.describe(`1 to ${MAX_SEARCH_RESULTS}; default ${DEFAULT_SEARCH_RESULTS}.`)))),
    ranking_options: z.optional(
      z.nullable(z.strictObject({
        ranker: z.optional(z.enum(RANKERS).check(z.describe('Accepted; no reranker runs.'))),
        score_threshold: z.optional(z.number().check(z.minimum(0), z.maximum(1), z.describe('Results under this cosine similarity are dropped.'))),
      })),
    ),
    rewrite_query: z.optional(z.boolean().check(z.describe('Accepted; the query is never rewritten (`search_query` is the query as sent).'))),
  }),
);

export const vectorStoreSearchPageSchema = onFirstUse(() =>
  z.strictObject({
    object: z.literal('vector_store.search_results.page'),
    search_query: z.array(z.string()).check(z.describe('The queries as sent.')),
    data: z.array(
      z
        .strictObject({
          file_id: z.string().check(z.describe('The file (upload) the chunk came from; an item added as text: its item id.')),
          filename: z.string(),
          score: z.number().check(z.describe('The cosine similarity: higher is closer.')),
          attributes: z.nullable(z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]))),
          content: z.array(z.strictObject({ type: z.literal('text'), text: z.string() })),
          citation: z.strictObject(citationFields()).check(z.describe('Beyond OpenAI: where the chunk is, as a collection query cites it.')),
        })
        .check(z.meta({ id: 'OpenAIVectorStoreSearchResult' })),
    ),
    has_more: z.literal(false),
    next_page: z.null(),
  }),
);
