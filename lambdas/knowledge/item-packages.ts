/**
 * What a client reads of and writes to a processed item (docs/ai/collections.md, "Packages and
 * vectors"): its package (JSON Lines, any mode), its chunks a page at a time, and, in a
 * `local_vectors` collection, the vectors it made of them: stored in the collection's own index and
 * counted once per chunk, so `indexing` knows which items are wholly searchable.
 */
import type { Readable } from 'node:stream';
import * as z from 'zod/mini';
import type { Principal } from '../auth/principal.js';
import type { Engine, KvItem, KvWrite, VectorEntry } from '../engine/ports.js';
import { VECTOR_BATCH_MAX } from '../engine/ports.js';
import { TransactionCanceledError } from '../engine/errors.js';
import { openPage, nextPageCursor, pageQuerySchema } from '../shared/cursors.js';
import { contentionPauseMs, pause } from '../shared/backoff.js';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseQuery } from '../shared/validate.js';
import type { Chunk } from './chunks.js';
import { chunkEntry, putEntries } from './chunk-index.js';
import { collectionKey, vectorMarksPk } from './collection-keys.js';
import { MAX_DIMENSIONS, parseVector } from './collection-query.js';
import { asItem, PAGE_QUERY_CODES, readItem, SERVED_ATTRIBUTES, type Item } from './items.js';
import { packageKey, readChunks } from './packages.js';

export const MAX_CHUNKS_PAGE = 500;
export const DEFAULT_CHUNKS_PAGE = 100;
/** Vectors one PUT stores (the index's batch). */
export const MAX_VECTORS_PER_CALL = 500;
/** Tries of one group's count against calls on the same item at once, before 503. */
const MAX_COUNT_ATTEMPTS = 10;
/** Marks a transaction writes beside the item and the collection (the store's 100 writes). */
const MARKS_PER_TRANSACTION = 90;

/** The item with a package served, or 409 item_not_ready (queued, processing, failed). */
async function servedItem(engine: Engine, principal: Principal, collectionId: string, itemId: string): Promise<{ collection: KvItem; item: Item; pkg: string }> {
  const { collection, item } = await readItem(engine, principal, collectionId, itemId);
  if (item.package_id === null) {
    const why = item.state === 'failed' ? `it failed (${item.error_code})` : `it is ${item.state}`;
    throw new PlatformError('item_not_ready', `Item "${itemId}" has no package yet: ${why}.`, 'item_id');
  }
  return { collection, item, pkg: item.package_id };
}

/** GET .../items/{item_id}/package: the package's JSON Lines, or a URL to fetch them from where the runtime cannot carry them. */
export async function openPackage(engine: Engine, principal: Principal, collectionId: string, itemId: string, inlineBodyBytes: number | undefined) {
  const { item, pkg } = await servedItem(engine, principal, collectionId, itemId);
  const key = packageKey(item, pkg);
  const size = (await engine.blobs.head(key))?.size;
  if (size === undefined) throw new PlatformError('item_not_ready', `Item "${itemId}"'s package is being replaced; try again.`, 'item_id');
  if (inlineBodyBytes !== undefined && size > inlineBodyBytes && engine.blobs.downloadUrl) return { url: await engine.blobs.downloadUrl(key, 900), package_id: pkg };
  const found = await engine.blobs.get(key);
  if (!found) throw new PlatformError('item_not_ready', `Item "${itemId}"'s package is being replaced; try again.`, 'item_id');
  return { body: found.body as Readable, size: found.size, package_id: pkg };
}

/** GET .../chunks's query, checked before openPage reads it. */
export const chunksQuerySchema = onFirstUse(() => pageQuerySchema({ max: MAX_CHUNKS_PAGE, fallback: DEFAULT_CHUNKS_PAGE }));

/** GET .../items/{item_id}/chunks?limit=&cursor=: the package's chunks in order, with a sealed cursor bound to the package. */
export async function listChunks(engine: Engine, principal: Principal, collectionId: string, itemId: string, query: Record<string, string>) {
  parseQuery(chunksQuerySchema(), query, PAGE_QUERY_CODES);
  const { item, pkg } = await servedItem(engine, principal, collectionId, itemId);
  const binding = `knowledge-chunks\n${item.org}\n${item.workspace}\n${collectionId}\n${itemId}\n${pkg}`;
  const { limit, position } = await openPage(engine.secret, query, binding, { max: MAX_CHUNKS_PAGE, fallback: DEFAULT_CHUNKS_PAGE });
  const chunks = (await readChunks(engine, item, pkg)) ?? [];
  const from = position === undefined ? 0 : Number(position);
  const page = chunks.slice(from, from + limit);
  const next = from + limit < chunks.length ? String(from + limit) : undefined;
  return {
    object: 'list' as const,
    item_id: itemId,
    package_id: pkg,
    chunk_count: chunks.length,
    data: page.map((c: Chunk) => ({ chunk_id: c.chunk_id, text: c.text, locator: c.locator, tokens: c.tokens })),
    next_cursor: await nextPageCursor(engine.secret, next, binding),
  };
}

/** A chunk as GET .../chunks answers it (the package's chunk line without its `object`). */
export const chunkViewSchema = onFirstUse(() =>
  z
    .strictObject({
      chunk_id: z.string().check(z.regex(/^chk_\d{6,}$/), z.describe('`chk_` and its position in the document from 000000: the same file gives the same ids.')),
      text: z.string(),
      locator: z.string().check(
        z.describe('Where the text is in its document: `page=12`, `heading=Install > Linux`, `top`, `line=10-42`, `t=00:12:05-00:13:10` (a recording\'s time range).'),
      ),
      tokens: z.int().check(z.minimum(0), z.describe('Its length in cl100k_base tokens.')),
    })
    .check(z.meta({ id: 'CollectionChunk' })),
);

/** GET .../items/{item_id}/chunks's answer. */
export const chunkListSchema = onFirstUse(() =>
  z.strictObject({
    object: z.literal('list'),
    item_id: z.string(),
    package_id: z.string().check(z.describe('The served package the chunks belong to (the cursor is bound to it).')),
    chunk_count: z.int().check(z.minimum(0), z.describe('All the package\'s chunks.')),
    data: z.array(chunkViewSchema()).check(z.describe('In document order.')),
    next_cursor: z.nullable(z.string()).check(z.describe('Pass as `cursor` for the next page; null on the last.')),
  }),
);

/**
 * PUT .../vectors's body as parseVectors reads it, for the API documents (parseVectors checks it by
 * hand, to name the entry at fault and check each chunk once): not used to parse.
 */
export const vectorsBodySchema = onFirstUse(() =>
  z.strictObject({
    vectors: z
      .array(
        z.strictObject({
          chunk_id: z.string().check(z.regex(/^chk_\d{6,}$/), z.describe('A chunk of the item\'s served package, once a call.')),
          vector: z.array(z.number()).check(
            z.minLength(1),
            z.maxLength(MAX_DIMENSIONS),
            z.describe(`1 to ${MAX_DIMENSIONS} finite numbers, not all zero; every entry has the collection's dimensions (fixed by its first vectors).`),
          ),
        }),
      )
      .check(z.minLength(1), z.maxLength(MAX_VECTORS_PER_CALL)),
  }),
);

/** PUT .../vectors's answer. */
export const vectorsStoredSchema = onFirstUse(() =>
  z.strictObject({
    item_id: z.string(),
    package_id: z.string(),
    stored: z.int().check(z.minimum(0), z.describe('Vectors of this call put in the index.')),
    skipped: z.int().check(z.minimum(0), z.describe('Vectors of this call the index could not take (a chunk too large for its entry).')),
    vectors_stored: z.int().check(z.minimum(0), z.describe('The package\'s chunks with their vector stored, this call\'s and earlier ones (each counted once).')),
    chunk_count: z.int().check(z.minimum(0)),
    indexed: z.boolean().check(z.describe('Every chunk has its vector: the item counts in the collection\'s `indexing.indexed`.')),
  }),
);

export interface VectorsRequest {
  vectors: { chunk_id: string; vector: Float32Array }[];
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** PUT .../vectors's body: `{vectors: [{chunk_id, vector}]}`, 1 to 500, one dimension, each chunk once. */
export function parseVectors(body: unknown): VectorsRequest {
  if (!isObject(body)) throw new PlatformError('invalid_body', 'The body is a JSON object with `vectors`.');
  for (const key of Object.keys(body)) if (key !== 'vectors') throw new PlatformError('unsupported_field', `Unknown field "${key}".`, key);
  const list = body.vectors;
  if (!Array.isArray(list) || list.length < 1 || list.length > MAX_VECTORS_PER_CALL) throw new PlatformError('invalid_body', `vectors is an array of 1 to ${MAX_VECTORS_PER_CALL} {chunk_id, vector}.`, 'vectors');
  const seen = new Set<string>();
  const vectors = list.map((entry, i) => {
    const param = `vectors.${i}`;
    if (!isObject(entry)) throw new PlatformError('invalid_body', `${param} is an object {chunk_id, vector}.`, param);
    for (const key of Object.keys(entry)) if (key !== 'chunk_id' && key !== 'vector') throw new PlatformError('unsupported_field', `Unknown field "${param}.${key}".`, `${param}.${key}`);
    if (typeof entry.chunk_id !== 'string' || !/^chk_\d{6,}$/.test(entry.chunk_id)) throw new PlatformError('invalid_body', `${param}.chunk_id is a chunk id of the item's package (chk_000000...).`, `${param}.chunk_id`);
    if (seen.has(entry.chunk_id)) throw new PlatformError('invalid_body', `${param}.chunk_id ${entry.chunk_id} is sent twice.`, `${param}.chunk_id`);
    seen.add(entry.chunk_id);
    return { chunk_id: entry.chunk_id, vector: parseVector(entry.vector, `${param}.vector`) };
  });
  const dimensions = vectors[0].vector.length;
  const other = vectors.findIndex((v) => v.vector.length !== dimensions);
  if (other >= 0) throw new PlatformError('invalid_body', `vectors.${other}.vector has ${vectors[other].vector.length} dimensions, not ${dimensions} as the first.`, `vectors.${other}.vector`);
  return { vectors };
}

/**
 * PUT .../items/{item_id}/vectors (local_vectors): stores the client's vectors of the served package's
 * chunks. The first vectors a collection gets fix its dimensions and make its index; others are
 * `400 invalid_body`. A chunk sent again replaces its vector and is counted once.
 */
export async function storeVectors(engine: Engine, principal: Principal, collectionId: string, itemId: string, request: VectorsRequest) {
  const { collection, item, pkg } = await servedItem(engine, principal, collectionId, itemId);
  if (collection.mode !== 'local_vectors') throw new PlatformError('mode_not_supported', `Vectors are stored in local_vectors collections; this one is ${String(collection.mode)}, which embeds its chunks itself or is not queried.`);
  const chunks = new Map(((await readChunks(engine, item, pkg)) ?? []).map((c) => [c.chunk_id, c]));
  request.vectors.forEach((v, i) => {
    if (!chunks.has(v.chunk_id)) throw new PlatformError('invalid_body', `vectors.${i}.chunk_id ${v.chunk_id} is not a chunk of package ${pkg}.`, `vectors.${i}.chunk_id`);
  });
  const index = String(collection.index);
  await fixDimensions(engine, item, index, collection, request.vectors[0].vector.length);

  const entries: VectorEntry[] = [];
  let skipped = 0;
  for (const v of request.vectors) {
    const entry = chunkEntry(collectionId, item.id, pkg, chunks.get(v.chunk_id)!, v.vector);
    if (entry) entries.push(entry);
    else skipped += 1;
  }
  await putEntries(engine, index, entries);
  const stored = new Set(entries.map((e) => e.key.slice(e.key.lastIndexOf('.') + 1)));
  let counted: { vectors_stored: number; indexed: boolean };
  try {
    counted = await countVectors(engine, item, pkg, [...stored]);
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'item_not_ready') await discardVectors(engine, item, index, entries.map((e) => e.key));
    throw error;
  }
  return { item_id: itemId, package_id: pkg, stored: stored.size, skipped, vectors_stored: counted.vectors_stored, chunk_count: item.chunk_count, indexed: counted.indexed };
}

/**
 * Vectors put for a package that stopped being served meanwhile (the item deleted or re-processed, or
 * the collection deleted, which may have removed its index before this call made it again): the
 * removal that ran first could not see them, so this call removes them, or the whole index.
 */
async function discardVectors(engine: Engine, item: Item, index: string, keys: string[]): Promise<void> {
  if (!(await engine.kv.get(collectionKey(item.org, item.workspace, item.collection)))) {
    await engine.vectors.deleteIndex(index);
    throw new PlatformError('collection_not_found', `No collection "${item.collection}" in this workspace.`, 'id');
  }
  // A collection being deleted may have removed its index already: deleting from it is then nothing.
  for (let i = 0; i < keys.length; i += VECTOR_BATCH_MAX) await engine.vectors.delete(index, keys.slice(i, i + VECTOR_BATCH_MAX));
}

/** The collection's dimensions: fixed by its first vectors (its index made then), checked after. */
async function fixDimensions(engine: Engine, item: Item, index: string, collection: KvItem, dimensions: number): Promise<void> {
  let fixed = Number(collection.dimensions ?? 0);
  if (fixed === 0) {
    const key = collectionKey(item.org, item.workspace, item.collection);
    try {
      await engine.kv.update({ key, set: { dimensions }, condition: { ifEquals: { dimensions: 0 } } });
      fixed = dimensions;
    } catch (error) {
      fixed = Number((await engine.kv.get(key))?.dimensions ?? 0);
      if (!fixed) throw error;
    }
  }
  if (fixed !== dimensions) throw new PlatformError('invalid_body', `These vectors have ${dimensions} dimensions; this collection's have ${fixed} (fixed by its first vectors).`, 'vectors.0.vector');
  await engine.vectors.createIndex(index, fixed);
}

/**
 * Marks each chunk's vector as stored (once per chunk), with the item's and the collection's counts
 * in the same transaction, then marks the item indexed when every chunk has its vector.
 */
async function countVectors(engine: Engine, item: Item, pkg: string, chunkIds: string[]): Promise<{ vectors_stored: number; indexed: boolean }> {
  const pk = vectorMarksPk(item.org, item.workspace, item.collection, item.id, pkg);
  const itemRef = { pk: item.record.pk, sk: item.record.sk };
  for (let i = 0; i < chunkIds.length; i += MARKS_PER_TRANSACTION) {
    const group = chunkIds.slice(i, i + MARKS_PER_TRANSACTION);
    for (let attempt = 0; ; attempt++) {
      const existing = await engine.kv.getMany(group.map((sk) => ({ pk, sk })));
      const fresh = group.filter((_, j) => !existing[j]);
      if (!fresh.length) break;
      const writes: KvWrite[] = [
        ...fresh.map((sk): KvWrite => ({ put: { pk, sk }, condition: { ifAbsent: true } })),
        { update: itemRef, add: { vectors_stored: fresh.length }, condition: { ifEquals: { package_id: pkg } } },
        { update: collectionKey(item.org, item.workspace, item.collection), add: { [SERVED_ATTRIBUTES.vectors]: fresh.length }, condition: { ifExists: true } },
      ];
      try {
        await engine.kv.transact(writes);
        break;
      } catch (error) {
        if (!(error instanceof TransactionCanceledError)) throw error;
        // Another call marked some of these meanwhile, or the item moved on: look again.
        const now = await engine.kv.get(itemRef);
        if (!now || now.package_id !== pkg) throw new PlatformError('item_not_ready', `Item "${item.id}" was deleted or re-processed meanwhile; its package ${pkg} is no longer served.`, 'item_id');
        // Calls on one item's counters keep colliding (DynamoDB cancels a transaction that meets another): the vectors are
        // stored, the count is not; sending the same vectors again completes it.
        if (attempt >= MAX_COUNT_ATTEMPTS) throw new PlatformError('service_unavailable', 'Too many calls stored vectors for this item at once; send these vectors again.', { retryAfterSeconds: 1 });
        await pause(contentionPauseMs(attempt, 200));
      }
    }
  }
  const now = await engine.kv.get(itemRef);
  if (!now || now.package_id !== pkg) throw new PlatformError('item_not_ready', `Item "${item.id}" was deleted or re-processed meanwhile; its package ${pkg} is no longer served.`, 'item_id');
  const current = asItem(now);
  if (!current.indexed && current.vectors_stored >= current.chunk_count) {
    try {
      await engine.kv.transact([
        { update: itemRef, set: { indexed: true }, condition: { ifEquals: { package_id: pkg, indexed: false } } },
        { update: collectionKey(item.org, item.workspace, item.collection), add: { [SERVED_ATTRIBUTES.indexed]: 1 }, condition: { ifExists: true } },
      ]);
    } catch (error) {
      if (!(error instanceof TransactionCanceledError)) throw error; // marked by a call at the same time
    }
    return { vectors_stored: current.vectors_stored, indexed: true };
  }
  return { vectors_stored: current.vectors_stored, indexed: current.indexed };
}

/** A body that must be `{}` (or none): re-processing takes nothing. */
// JSON null is no body, as an absent one is (the parse reads `body ?? {}`).
export const emptyBodySchema = onFirstUse(() => z.nullable(z.strictObject({})));
