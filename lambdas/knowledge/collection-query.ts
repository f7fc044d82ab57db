/**
 * `POST /v1/collections/{id}/query` (spec 4.10; docs/ai/collections.md, "Query"): the best chunks of a
 * `cloud` or `local_vectors` collection, each with its citation, and `indexing`: how much of the
 * collection the answer covered, read after the search so it is true of the moment it answers.
 */
import * as z from 'zod/mini';
import type { Principal } from '../auth/principal.js';
import type { Engine, KvItem } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse } from '../shared/validate.js';
import { embedTexts } from '../vector/embed.js';
import { readDatabase, stampedRoute, whileOpen } from '../vector/databases.js';
import { wellFormed } from '../vector/passages.js';
import { chunkMatchSchema, entriesHaveItem, searchChunks, type ChunkSearch, type ChunkWhere } from './chunk-index.js';
import { collectionKey } from './collection-keys.js';
import { readCollection, workspaceOf, type CollectionMode } from './collection-records.js';
import { SERVED_ATTRIBUTES } from './items.js';

export const MAX_QUERY_CHARS = 8000;
export const MAX_TOP_K = 20;
export const DEFAULT_TOP_K = 5;
/** A local_vectors collection's vectors: as the vector database's. */
export const MAX_DIMENSIONS = 4096;

export interface CollectionQuery {
  query: string;
  top_k: number;
  /** local_vectors: the client's embedding of `query`. */
  vector: Float32Array | null;
}

/** Spec 2's `indexing`: counted in items, chunks only in `skipped_chunks` (docs/ai/collections.md, "Indexing"). */
export const indexingSchema = onFirstUse(() =>
  z
    .strictObject({
      indexed: z.int().check(z.describe('Items whose chunks the search covers.')),
      total: z.int().check(z.describe('Items in the collection.')),
      complete: z.boolean().check(z.describe('`indexed` = `total`: the answer covers every item.')),
      searchable: z.boolean().check(z.describe('Whether any chunk can be found at all.')),
      skipped_items: z.int().check(z.describe('Items that failed.')),
      skipped_chunks: z.int().check(z.describe('Chunks of served items the search does not see (too large for the index; `local_vectors`: without their vector).')),
    })
    .check(z.meta({ id: 'CollectionIndexing' })),
);
export type Indexing = z.output<ReturnType<typeof indexingSchema>>;

/** The vector a `local_vectors` collection is queried with (parseVector's rules, which JSON Schema cannot say all of). */
export const clientVectorSchema = () =>
  z.array(z.number()).check(
    z.minLength(1),
    z.maxLength(MAX_DIMENSIONS),
    z.describe(`\`local_vectors\` only, and required there: the client's embedding of the query, 1 to ${MAX_DIMENSIONS} finite numbers, not all zero, of the collection's dimensions.`),
  );

/**
 * The query body as the document describes it (spec 4.10). parseCollectionQuery reads it by hand (the
 * grounded chat reads `top_k` and `vector` with the same rules, and the items' vectors route the vector):
 * every fault is `400 invalid_body` naming the field, an unknown field `400 unsupported_field`.
 */
export const collectionQueryRequestSchema = onFirstUse(() =>
  z.strictObject({
    query: z.string().check(z.minLength(1), z.maxLength(MAX_QUERY_CHARS), z.regex(/\S/), z.describe(`1 to ${MAX_QUERY_CHARS} characters, not only white space.`)),
    top_k: z.optional(z.nullable(z.int().check(z.minimum(1), z.maximum(MAX_TOP_K), z.describe(`Matches to answer, 1 to ${MAX_TOP_K}; default ${DEFAULT_TOP_K}.`)))),
    vector: z.optional(clientVectorSchema()),
  }),
);

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const invalid = (param: string, message: string) => new PlatformError('invalid_body', message, param);
const FIELDS = new Set(['query', 'top_k', 'vector']);

/** The body: every fault is spec 4.10's `400 invalid_body`, naming the field; unknown fields `unsupported_field`. */
export function parseCollectionQuery(body: unknown, fields: ReadonlySet<string> = FIELDS): CollectionQuery {
  if (!isObject(body)) throw new PlatformError('invalid_body', 'The body is a JSON object with `query`.');
  for (const key of Object.keys(body)) if (!fields.has(key)) throw new PlatformError('unsupported_field', `Unknown field "${key}".`, key);
  return parseQueryFields(body);
}

/** `query`, `top_k` and `vector` of a body already known to be an object (grounded chat reads them from its own body too). */
export function parseQueryFields(body: Record<string, unknown>): CollectionQuery {
  const query = body.query;
  if (query === undefined) throw invalid('query', 'query is required.');
  if (typeof query !== 'string' || query.trim().length === 0 || [...query].length > MAX_QUERY_CHARS || !wellFormed(query)) throw invalid('query', `query is a string of 1 to ${MAX_QUERY_CHARS} characters.`);
  const topK = body.top_k ?? DEFAULT_TOP_K;
  if (typeof topK !== 'number' || !Number.isInteger(topK) || topK < 1 || topK > MAX_TOP_K) throw invalid('top_k', `top_k is a whole number from 1 to ${MAX_TOP_K}.`);
  return { query, top_k: topK, vector: body.vector === undefined ? null : parseVector(body.vector, 'vector') };
}

/** A client's vector: 1 to 4,096 finite numbers, not all zero (a zero vector has no direction). */
export function parseVector(value: unknown, param: string): Float32Array {
  if (!Array.isArray(value) || value.length < 1 || value.length > MAX_DIMENSIONS) throw invalid(param, `${param} is an array of 1 to ${MAX_DIMENSIONS} numbers.`);
  if (!value.every((x) => typeof x === 'number' && Number.isFinite(x))) throw invalid(param, `${param} holds finite numbers only.`);
  const vector = Float32Array.from(value as number[]);
  if (!vector.every(Number.isFinite)) throw invalid(param, `${param} has a component out of the float range.`);
  if (!vector.some((x) => x !== 0)) throw invalid(param, `${param} is all zeros: it has no direction to compare.`);
  return vector;
}

const counter = (c: KvItem, name: string) => Number(c[name] ?? 0);

/** The collection's `indexing` from its counters (docs/ai/collections.md, "Indexing"). */
export function indexingOf(collection: KvItem): Indexing {
  const total = counter(collection, 'n_total');
  const failed = counter(collection, 'n_failed');
  const cloud = collection.mode === 'cloud';
  const indexed = cloud ? counter(collection, 'n_done') : counter(collection, SERVED_ATTRIBUTES.indexed);
  const chunks = counter(collection, SERVED_ATTRIBUTES.chunks);
  const skippedChunks = cloud ? counter(collection, SERVED_ATTRIBUTES.skipped) : chunks - counter(collection, SERVED_ATTRIBUTES.vectors);
  const searchableChunks = cloud ? chunks - counter(collection, SERVED_ATTRIBUTES.skipped) : counter(collection, SERVED_ATTRIBUTES.vectors);
  return { indexed, total, complete: indexed === total, searchable: searchableChunks > 0, skipped_items: failed, skipped_chunks: skippedChunks };
}

/** Where a queryable collection's chunks are, or why it cannot be queried. */
export function queryableMode(collection: KvItem): Exclude<CollectionMode, 'download'> {
  const mode = collection.mode as CollectionMode;
  if (mode === 'download') throw new PlatformError('mode_not_supported', 'A download collection prepares packages for download; it is not queried. Create a cloud or local_vectors collection to query.');
  return mode;
}

/** The answer (spec 4.10): the best chunks with their citations, then `indexing` as it is after the search. */
export const collectionQueryAnswerSchema = onFirstUse(() =>
  z.strictObject({ collection_id: z.string(), matches: z.array(chunkMatchSchema()).check(z.describe('Best first.')), indexing: indexingSchema() }),
);
export type QueryAnswer = z.output<ReturnType<typeof collectionQueryAnswerSchema>>;

/** A `cloud` collection to search (its live record), and the items the search keeps to (every item when absent). */
export interface CloudCollectionSearch {
  collection: KvItem;
  only?: ReadonlySet<string>;
}

/** Where a collection's chunks are, from its record. */
const whereOf = (org: string, workspace: string, collection: KvItem): ChunkWhere => ({
  org,
  workspace,
  collection: String(collection.sk),
  index: String(collection.index),
  itemKeyed: entriesHaveItem(collection),
});

/**
 * `cloud` collections of the caller's workspace searched with each of `queries`, embedded through
 * the workspace's vector database (its route, limits and usage; one call for all of them): answer
 * [c][q] is the `want` best chunks of collection c for query q. A collection whose database was
 * deleted is 409 vector_database_not_created; one being deleted, vector_database_deleting. When no
 * collection may answer anything (every `only` empty), nothing is embedded.
 */
export async function searchCollectionChunks(
  engine: Engine,
  principal: Principal,
  workspace: string,
  searches: CloudCollectionSearch[],
  queries: string[],
  want: number,
  signal?: AbortSignal,
): Promise<ChunkSearch[][]> {
  const database = await readDatabase(engine, workspace);
  for (const { collection } of searches) {
    if (!database || database.database_id !== collection.vector_database_id) {
      throw new PlatformError('vector_database_not_created', "This collection's vector database was deleted; its chunks went with it. Create a new collection.");
    }
  }
  const none = (): ChunkSearch[][] => searches.map(() => queries.map(() => ({ matches: [], items: new Map() })));
  if (!database || searches.every((s) => s.only?.size === 0)) return none();
  if (database.state !== 'active') throw new PlatformError('vector_database_deleting', "This workspace's vector database is being deleted.");
  const route = await stampedRoute(engine, database);
  return whileOpen(engine, database, async () => {
    const vectors = await embedTexts(engine, principal, route, database, queries, signal);
    return Promise.all(searches.map((s) => Promise.all(vectors.map((vector) => searchChunks(engine, whereOf(principal.organizationId, workspace, s.collection), vector, want, s.only)))));
  });
}

/**
 * The matches for a query, then `indexing` as it is after the search. `cloud`: the query embedded
 * through the workspace's vector database (its route, limits, usage), 400 for a `vector`;
 * `local_vectors`: the client's `vector`, required, of the collection's dimensions; no upstream call.
 */
export async function queryCollection(engine: Engine, principal: Principal, collectionId: string, request: CollectionQuery, signal?: AbortSignal): Promise<QueryAnswer> {
  const collection = await readCollection(engine, principal, collectionId);
  const mode = queryableMode(collection);
  const workspace = await workspaceOf(engine, principal);
  let matches: QueryAnswer['matches'];
  if (mode === 'cloud') {
    if (request.vector) throw invalid('vector', 'vector is for local_vectors collections; a cloud collection embeds the query itself.');
    const [[found]] = await searchCollectionChunks(engine, principal, workspace, [{ collection }], [request.query], request.top_k, signal);
    matches = found.matches;
  } else {
    if (!request.vector) throw invalid('vector', 'A local_vectors collection is queried with the client\'s own embedding of the query: send `vector`.');
    const dimensions = Number(collection.dimensions ?? 0);
    if (dimensions === 0) matches = []; // no vectors stored yet: nothing to find
    else if (request.vector.length !== dimensions) throw invalid('vector', `vector has ${request.vector.length} dimensions; this collection's vectors have ${dimensions}.`);
    else matches = (await searchChunks(engine, whereOf(principal.organizationId, workspace, collection), request.vector, request.top_k)).matches;
  }
  const now = await engine.kv.get(collectionKey(principal.organizationId, workspace, collectionId));
  return { collection_id: collectionId, matches, indexing: indexingOf(now ?? collection) };
}
