/**
 * A collection's chunks in a vector index (docs/decisions/knowledge-items.md): a `cloud` collection's
 * in its workspace database's index, a `local_vectors` one's in an index of its own. Each entry is
 * keyed by item, package and chunk, so a retried processing writes the same keys again (never a chunk
 * twice), and is filtered by the collection's scope (`col.<id>`), which `/v1/vector/query` never asks
 * for. The item records decide what is seen: a hit counts only when its item serves that package,
 * so a deleted item or a replaced package is gone from queries the moment its record says so, and
 * the index is cleaned after.
 */
import * as z from 'zod/mini';
import type { Engine, KvItem, VectorEntry, VectorFilter, VectorHit } from '../engine/ports.js';
import { VECTOR_BATCH_MAX, VECTOR_PAYLOAD_BYTES_MAX, VECTOR_TOP_K_MAX } from '../engine/ports.js';
import { log } from '../shared/log.js';
import { onFirstUse } from '../shared/validate.js';
import { decodePayload, encodePayload } from '../vector/payload.js';
import type { Chunk } from './chunks.js';
import { itemKey, vectorMarksPk } from './collection-keys.js';
import { readChunks, packageKey, type PackageOwner } from './packages.js';

/** Where a chunk comes from (spec 2's `citation`): its collection, item, package, chunk and place in the file. */
export const citationFields = () => ({
  collection_id: z.string(),
  item_id: z.string(),
  package_id: z.string(),
  chunk_id: z.string(),
  locator: z.string().check(z.describe('The place in the file: `page=12`, `heading=Install > Linux`, `line=10-42`, `t=00:12:05-00:13:10`.')),
});

/** What a query shows of a chunk: spec 2's query match. */
export const chunkMatchSchema = onFirstUse(() =>
  z
    .strictObject({
      score: z.number().check(z.describe('The cosine similarity: higher is closer.')),
      text: z.string(),
      citation: z.strictObject(citationFields()),
    })
    .check(z.meta({ id: 'CollectionMatch' })),
);
export type ChunkMatch = z.output<ReturnType<typeof chunkMatchSchema>>;

export const collectionScope = (collectionId: string) => `col.${collectionId}`;
export const entryKey = (item: string, pkg: string, chunk: string) => `${item}.${pkg}.${chunk}`;

/** An index entry for a chunk; undefined when its payload would not fit the index (counted as skipped). */
export function chunkEntry(collectionId: string, item: string, pkg: string, chunk: Chunk, vector: Float32Array): VectorEntry | undefined {
  const payload = encodePayload({ id: chunk.chunk_id, text: chunk.text, metadata: { locator: chunk.locator, package_id: pkg }, scope: 'shared', document_id: item });
  if (Buffer.byteLength(JSON.stringify(payload), 'utf8') > VECTOR_PAYLOAD_BYTES_MAX) return undefined;
  // `item` lets a search keep to some items in the index itself (searchChunks' `only`).
  return { key: entryKey(item, pkg, chunk.chunk_id), vector, filterable: { scope: collectionScope(collectionId), item }, payload };
}

/**
 * Set on a collection's record when every entry of it carries the filterable `item` key (collections
 * created after the key existed); entries of older collections lack it, and a filter on it would
 * never find them, so their searches keep to items by reading the hits instead.
 */
export const ENTRIES_HAVE_ITEM = 'entries_have_item';
export const entriesHaveItem = (collection: KvItem): boolean => collection[ENTRIES_HAVE_ITEM] === true;

export async function putEntries(engine: Engine, index: string, entries: VectorEntry[]): Promise<void> {
  for (let i = 0; i < entries.length; i += VECTOR_BATCH_MAX) await engine.vectors.put(index, entries.slice(i, i + VECTOR_BATCH_MAX));
}

/**
 * Removes a package: its vectors (the keys its chunks name), local_vectors' marks, and its blob.
 * Idempotent; a package never written has nothing to remove. `chunkIds`: the package's chunks when
 * the caller made them, for its processor, whose vectors may arrive after another removal took the
 * blob that names them.
 */
export async function removePackage(engine: Engine, item: PackageOwner & { index: string | null }, pkg: string, chunkIds?: readonly string[]): Promise<void> {
  const ids = chunkIds ?? (await readChunks(engine, item, pkg))?.map((c) => c.chunk_id);
  const index = item.index;
  if (ids?.length && index) {
    const keys = ids.map((id) => entryKey(item.id, pkg, id));
    for (let i = 0; i < keys.length; i += VECTOR_BATCH_MAX) {
      // An index already gone (its vector database deleted, a collection never given vectors) holds none.
      await engine.vectors.delete(index, keys.slice(i, i + VECTOR_BATCH_MAX)).catch((error) => log.warn('package vectors not removed', { index, error: String(error) }));
    }
  }
  for (;;) {
    const marks = await engine.kv.query({ pk: vectorMarksPk(item.org, item.workspace, item.collection, item.id, pkg), limit: 100 });
    if (!marks.items.length) break;
    await Promise.all(marks.items.map((m) => engine.kv.delete({ pk: m.pk, sk: m.sk })));
  }
  await engine.blobs.delete(packageKey(item, pkg));
}

/** Where a collection's chunks are: its workspace, the collection, its index, and whether its entries carry `item`. */
export interface ChunkWhere {
  org: string;
  workspace: string;
  collection: string;
  index: string;
  /** Every entry carries the filterable `item` key (ENTRIES_HAVE_ITEM); absent: unknown, so not relied on. */
  itemKeyed?: boolean;
}

/** The matches, best first, and the item record of each matched item (its filename, its upload). */
export interface ChunkSearch {
  matches: ChunkMatch[];
  items: ReadonlyMap<string, KvItem>;
}

/**
 * Most items a search restricted to some items asks the index for by name (`item $in`, 20 a query,
 * so 5 queries); above it, or for entries without the key, the hits are read and the others dropped.
 */
const IN_VALUES_MAX = 20; // the port's `$in` (VectorFilter)
export const ITEM_PUSHDOWN_MAX = 5 * IN_VALUES_MAX;

/**
 * The `want` best chunks of a collection for `vector`, best first, counting only hits whose item
 * serves their package and, with `only`, is one of those items. Hidden hits are skipped and more asked
 * for (up to the index's 100), so a full answer comes whenever that many visible chunks exist; with
 * `only` kept by reading the hits (too many items, or entries without `item`), among the 100 best.
 */
export async function searchChunks(engine: Engine, where: ChunkWhere, vector: Float32Array, want: number, only?: ReadonlySet<string>): Promise<ChunkSearch> {
  if (only && only.size === 0) return { matches: [], items: new Map() };
  const scope = { scope: collectionScope(where.collection) };
  if (!only || !where.itemKeyed || only.size > ITEM_PUSHDOWN_MAX) return bestVisible(engine, where, vector, want, scope, only);
  // The index keeps to the items itself: 20 names a query (the port's $in), the answers merged by score.
  const names = [...only];
  const groups: string[][] = [];
  for (let i = 0; i < names.length; i += IN_VALUES_MAX) groups.push(names.slice(i, i + IN_VALUES_MAX));
  const found = await Promise.all(groups.map((group) => bestVisible(engine, where, vector, want, { ...scope, item: { $in: group } })));
  const items = new Map(found.flatMap((f) => [...f.items]));
  const matches = found.flatMap((f) => f.matches).sort((a, b) => b.score - a.score).slice(0, want);
  return { matches, items };
}

async function bestVisible(engine: Engine, where: ChunkWhere, vector: Float32Array, want: number, filter: VectorFilter, only?: ReadonlySet<string>): Promise<ChunkSearch> {
  let found: ChunkSearch = { matches: [], items: new Map() };
  for (let topK = Math.min(VECTOR_TOP_K_MAX, want * 2); ; topK = Math.min(VECTOR_TOP_K_MAX, topK * 2)) {
    const hits = await engine.vectors.query(where.index, { vector, topK, filter });
    found = await visible(engine, where, hits, only);
    if (found.matches.length >= want || hits.length < topK || topK === VECTOR_TOP_K_MAX) break;
  }
  return { matches: found.matches.slice(0, want), items: found.items };
}

async function visible(engine: Engine, where: ChunkWhere, hits: VectorHit[], only?: ReadonlySet<string>): Promise<ChunkSearch> {
  const decoded = hits.map((hit) => ({ hit, payload: decodePayload(hit.payload) })).filter(({ payload }) => !only || only.has(payload.document_id!));
  const ids = [...new Set(decoded.map((d) => d.payload.document_id!))];
  const records = await engine.kv.getMany(ids.map((id) => itemKey(where.org, where.workspace, where.collection, id)));
  const items = new Map<string, KvItem>();
  ids.forEach((id, i) => records[i] && items.set(id, records[i]!));
  const matches = decoded
    .filter(({ payload }) => (items.get(payload.document_id!)?.package_id as string | null | undefined) === payload.metadata.package_id)
    .map(({ hit, payload }) => ({
      score: hit.score,
      text: payload.text,
      citation: {
        collection_id: where.collection,
        item_id: payload.document_id!,
        package_id: String(payload.metadata.package_id),
        chunk_id: payload.id,
        locator: String(payload.metadata.locator),
      },
    }));
  return { matches, items };
}
