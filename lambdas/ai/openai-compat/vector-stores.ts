/**
 * OpenAI's vector stores over `cloud` collections (docs/ai/openai-compatibility.md, "Vector stores";
 * docs/decisions/openai-vector-stores.md). A vector store *is* a cloud collection (`vs_<hex>` names
 * `col_<hex>`): its `file_counts` and `status` come from the collection's exact counters, its files are
 * the collection's items. What OpenAI has and a collection lacks (description, metadata, the
 * `expires_after` asked, bytes, cancelled files, last activity) is a side record (`oaivs`, keys.ts)
 * written in the same transactions as the collection's own changes.
 */
import * as z from 'zod/mini';
import type { Principal } from '../../auth/principal.js';
import type { Engine, KvItem, KvValue, KvWrite } from '../../engine/ports.js';
import { collectionsPk } from '../../knowledge/collection-keys.js';
import { createCollection, deleteCollection, EXPIRED_ANSWER_SECONDS, MAX_NAME_CHARS, readCollection, setCollectionEnd, setCollectionName, viewOf, workspaceOf } from '../../knowledge/collections.js';
import { queuedItemsKey } from '../../knowledge/collection-keys.js';
import { queueFull } from '../../knowledge/collection-records.js';
import { PlatformError } from '../../shared/errors.js';
import { log } from '../../shared/log.js';
import { settings } from '../../shared/settings.js';
import { onFirstUse } from '../../shared/validate.js';
import { mapOf, mapText, parseMetadata } from './attributes.js';
import { listPage, parseListQuery, type ListPage } from './http.js';
import { collectionIdOf, unixSeconds, vectorStoreId } from './ids.js';
import { fileBatchKey, vectorStoreFileByFileKey, vectorStoreFilesPartition, vectorStoreKey } from './keys.js';

const DAY_SECONDS = 86_400;
/** OpenAI's `expires_after.days` is 1…365; a collection lives at most the spec's 30 days (D7). */
export const MAX_EXPIRES_AFTER_DAYS = 30;
export const MAX_DESCRIPTION_CHARS = 512;
/** `file_ids` on create are attached at once, each a queued item (more go through file batches). */
export const MAX_CREATE_FILE_IDS = 500;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

export interface FileCounts {
  in_progress: number;
  completed: number;
  failed: number;
  cancelled: number;
  total: number;
}

export interface VectorStoreView {
  id: string;
  object: 'vector_store';
  created_at: number;
  name: string;
  description: string | null;
  usage_bytes: number;
  file_counts: FileCounts;
  status: 'expired' | 'in_progress' | 'completed';
  last_active_at: number | null;
  metadata: Record<string, string> | null;
  expires_after?: { anchor: 'last_active_at'; days: number };
  expires_at: number | null;
}

/** The body fields a route takes; any other is `400 unsupported_field`, a non-object body `400 invalid_body`. */
export function bodyFields(body: unknown, known: readonly string[]): Record<string, unknown> {
  if (body === undefined || body === null) return {};
  if (typeof body !== 'object' || Array.isArray(body)) throw new PlatformError('invalid_body', 'The body must be a JSON object.');
  for (const name of Object.keys(body)) if (!known.includes(name)) throw new PlatformError('unsupported_field', `Unknown field "${name.slice(0, 64)}".`, name.slice(0, 64));
  return body as Record<string, unknown>;
}

const notFound = (id: string) => new PlatformError('collection_not_found', `No vector store ${JSON.stringify(id.slice(0, 140))} in this workspace.`, 'vector_store_id');

/**
 * The live cloud collection a vector store id names: `404 collection_not_found` for an unknown,
 * malformed, another workspace's or organization's id, or a collection of another mode (only cloud
 * collections are vector stores); `410 collection_expired` past its end.
 */
export async function readStore(engine: Engine, principal: Principal, vectorStoreIdOrCollectionId: string): Promise<{ id: string; collection: KvItem }> {
  let id: string;
  let collection: KvItem;
  try {
    id = collectionIdOf(vectorStoreIdOrCollectionId);
    collection = await readCollection(engine, principal, id);
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'collection_not_found') throw notFound(vectorStoreIdOrCollectionId);
    throw error;
  }
  if (collection.mode !== 'cloud') throw notFound(vectorStoreIdOrCollectionId);
  return { id, collection };
}

/** The side record's TTL: past the latest end a collection made at `createdAt` can have, and its 410 time. */
export const sideExpiry = (createdAtSeconds: number) => createdAtSeconds + settings().collectionRetentionSeconds + EXPIRED_ANSWER_SECONDS;

function counts(collection: KvItem, side: KvItem | undefined): FileCounts {
  const c = viewOf(collection).counts;
  const cancelled = Math.max(0, Number(side?.n_cancelled ?? 0));
  return { in_progress: c.queued + c.processing, completed: c.done, failed: c.failed, cancelled, total: c.total + cancelled };
}

function storeView(id: string, collection: KvItem | undefined, side: KvItem | undefined): VectorStoreView {
  const createdAt = collection ? unixSeconds(String(collection.created_at)) : Number(side?.created_at ?? 0);
  const endsAt = collection ? Number(collection.ends_at) : Number(side?.ends_at ?? 0);
  const fileCounts = collection ? counts(collection, side) : { in_progress: 0, completed: 0, failed: 0, cancelled: 0, total: 0 };
  const days = Number(side?.expires_after_days ?? 0);
  const name = collection ? collection.name : side?.name;
  return {
    id: vectorStoreId(id),
    object: 'vector_store',
    created_at: createdAt,
    name: typeof name === 'string' ? name : '',
    description: typeof side?.description === 'string' ? side.description : null,
    usage_bytes: Math.max(0, Number(side?.usage_bytes ?? 0)),
    file_counts: fileCounts,
    // OpenAI's rule (D8): in progress while any file is; our partial and failed show in file_counts.
    status: !collection ? 'expired' : fileCounts.in_progress > 0 ? 'in_progress' : 'completed',
    last_active_at: typeof side?.last_active_at === 'number' ? side.last_active_at : createdAt,
    metadata: typeof side?.metadata === 'string' ? (mapOf(side.metadata) as Record<string, string>) : null,
    ...(days > 0 ? { expires_after: { anchor: 'last_active_at' as const, days } } : {}),
    expires_at: endsAt || null,
  };
}

// ---------- parsing ----------

function parseName(value: unknown, nullable: boolean): string | null | undefined {
  if (value === undefined) return undefined;
  if (value === null && nullable) return null;
  if (typeof value !== 'string' || value.length < 1 || value.length > MAX_NAME_CHARS || CONTROL.test(value)) {
    throw new PlatformError('invalid_body', `\`name\` must be 1 to ${MAX_NAME_CHARS} characters without control characters (a collection's name).`, 'name');
  }
  return value;
}

/** `expires_after {anchor: 'last_active_at', days}`: days 1…30 (a collection's life); null removes it (update). */
function parseExpiresAfter(value: unknown): number | null | undefined {
  if (value === undefined) return undefined;
  if (value === null) return null;
  const bad = () => new PlatformError('invalid_body', `\`expires_after\` must be {anchor: "last_active_at", days: 1…${MAX_EXPIRES_AFTER_DAYS}}: a vector store lives at most 30 days.`, 'expires_after');
  if (typeof value !== 'object' || Array.isArray(value)) throw bad();
  const { anchor, days, ...rest } = value as Record<string, unknown>;
  if (Object.keys(rest).length || anchor !== 'last_active_at' || typeof days !== 'number' || !Number.isInteger(days) || days < 1 || days > MAX_EXPIRES_AFTER_DAYS) throw bad();
  return days;
}

function parseDescription(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length > MAX_DESCRIPTION_CHARS) throw new PlatformError('invalid_body', `\`description\` must be a string of at most ${MAX_DESCRIPTION_CHARS} characters.`, 'description');
  return value;
}

export interface CreateVectorStore {
  name?: string;
  description?: string;
  metadata: Record<string, string> | null;
  expiresAfterDays?: number;
  fileIds: string[];
  chunking: unknown;
}

export function parseCreateVectorStore(body: unknown): CreateVectorStore {
  const b = bodyFields(body, ['name', 'description', 'metadata', 'expires_after', 'file_ids', 'chunking_strategy']);
  const fileIds = b.file_ids === undefined ? [] : b.file_ids;
  if (!Array.isArray(fileIds) || fileIds.length > MAX_CREATE_FILE_IDS || !fileIds.every((f) => typeof f === 'string' && f.length > 0 && f.length <= 128)) {
    throw new PlatformError('invalid_body', `\`file_ids\` must be up to ${MAX_CREATE_FILE_IDS} file ids (more go through file batches).`, 'file_ids');
  }
  if (b.chunking_strategy !== undefined && !fileIds.length) throw new PlatformError('invalid_body', '`chunking_strategy` applies to `file_ids`; send it with them.', 'chunking_strategy');
  return {
    name: parseName(b.name, false) ?? undefined,
    description: parseDescription(b.description),
    metadata: b.metadata === undefined ? null : parseMetadata(b.metadata),
    expiresAfterDays: parseExpiresAfter(b.expires_after) ?? undefined,
    fileIds: [...new Set(fileIds as string[])],
    chunking: b.chunking_strategy,
  };
}

export interface UpdateVectorStore {
  name?: string | null;
  metadata?: Record<string, string> | null;
  expiresAfterDays?: number | null;
}

export function parseUpdateVectorStore(body: unknown): UpdateVectorStore {
  const b = bodyFields(body, ['name', 'metadata', 'expires_after']);
  return {
    ...(b.name !== undefined ? { name: parseName(b.name, true) } : {}),
    ...(b.metadata !== undefined ? { metadata: parseMetadata(b.metadata) } : {}),
    ...(b.expires_after !== undefined ? { expiresAfterDays: parseExpiresAfter(b.expires_after) } : {}),
  };
}

// ---------- the routes' work ----------

/** A creation's file_ids need this many free slots of the organization's queued-item cap: else 429 before anything is made. */
async function checkSlots(engine: Engine, principal: Principal, needed: number): Promise<void> {
  if (!needed) return;
  const held = Number((await engine.kv.get(queuedItemsKey(principal.organizationId)))?.n ?? 0);
  if (held + needed > settings().knowledgeMaxQueuedItems) throw queueFull();
}

/**
 * POST /v1/vector_stores: a cloud collection with the side record in one transaction (kept answer
 * too, with an Idempotency-Key), then its `file_ids` attached as vector store files. Every file is
 * checked first, and the organization's free queued-item slots: a missing file or too few slots
 * answer before anything is made.
 */
export async function createVectorStore(
  engine: Engine,
  principal: Principal,
  request: CreateVectorStore,
  attach: (collectionId: string, fileIds: string[]) => Promise<void>,
  checkFiles: (fileIds: string[]) => Promise<void>,
): Promise<VectorStoreView> {
  await checkFiles(request.fileIds);
  await checkSlots(engine, principal, request.fileIds.length);
  const workspace = await workspaceOf(engine, principal);
  const now = Math.floor(engine.clock.now() / 1000);
  const view = await createCollection(engine, principal, { mode: 'cloud', ...(request.name !== undefined ? { name: request.name } : {}) }, undefined, {
    ...(request.expiresAfterDays ? { endsAt: now + request.expiresAfterDays * DAY_SECONDS } : {}),
    extraWrites: (id, endsAt) => [
      {
        put: {
          ...vectorStoreKey(principal.organizationId, workspace, id),
          name: request.name ?? null,
          description: request.description ?? null,
          metadata: request.metadata ? mapText(request.metadata) : null,
          expires_after_days: request.expiresAfterDays ?? null,
          usage_bytes: 0,
          n_cancelled: 0,
          last_active_at: now,
          created_at: now,
          ends_at: endsAt,
          expires_at: sideExpiry(now),
        },
      },
    ],
  });
  if (request.fileIds.length) {
    try {
      await attach(view.id, request.fileIds);
    } catch (error) {
      // A file deleted, or the organization's queue filled, since the checks: the caller gets the error
      // and no store id, so no store is left half made (a retry would make another).
      await deleteVectorStore(engine, principal, view.id).catch((cleanup) => log.warn('vector store left after a failed create', { collection: view.id, error: String(cleanup) }));
      throw error;
    }
  }
  return getVectorStore(engine, principal, view.id);
}

/** GET /v1/vector_stores/{id}: past its end the store answers `status: expired` (from the side record) while its 410 would last. */
export async function getVectorStore(engine: Engine, principal: Principal, vectorStoreIdOrCollectionId: string): Promise<VectorStoreView> {
  try {
    const { id, collection } = await readStore(engine, principal, vectorStoreIdOrCollectionId);
    const side = await engine.kv.get(vectorStoreKey(principal.organizationId, await workspaceOf(engine, principal), id));
    return storeView(id, collection, side);
  } catch (error) {
    if (!(error instanceof PlatformError && error.code === 'collection_expired')) throw error;
    const id = collectionIdOf(vectorStoreIdOrCollectionId);
    const side = await engine.kv.get(vectorStoreKey(principal.organizationId, await workspaceOf(engine, principal), id));
    if (!side) throw error;
    return storeView(id, undefined, side);
  }
}

/** POST /v1/vector_stores/{id}: name (the collection's), metadata, and `expires_after` (moves the collection's end; null: back to 30 days from creation). */
export async function updateVectorStore(engine: Engine, principal: Principal, vectorStoreIdOrCollectionId: string, request: UpdateVectorStore): Promise<VectorStoreView> {
  const { id, collection } = await readStore(engine, principal, vectorStoreIdOrCollectionId);
  const workspace = await workspaceOf(engine, principal);
  const sideKey = vectorStoreKey(principal.organizationId, workspace, id);
  const createdAt = unixSeconds(String(collection.created_at));
  const sideSet = (set: Record<string, KvValue>): KvWrite => ({ update: sideKey, set: { ...set, expires_at: sideExpiry(createdAt), created_at: createdAt } });
  if (request.metadata !== undefined) await engine.kv.update({ key: sideKey, set: { metadata: request.metadata ? mapText(request.metadata) : null, expires_at: sideExpiry(createdAt), created_at: createdAt } });
  if (request.name !== undefined) await setCollectionName(engine, principal, id, request.name, [sideSet({ name: request.name })]);
  if (request.expiresAfterDays !== undefined) {
    const now = Math.floor(engine.clock.now() / 1000);
    const endsAt = request.expiresAfterDays === null ? createdAt + settings().collectionRetentionSeconds : now + request.expiresAfterDays * DAY_SECONDS;
    await setCollectionEnd(engine, principal, id, endsAt, (end) => [sideSet({ ends_at: end, expires_after_days: request.expiresAfterDays ?? null })]);
  }
  return getVectorStore(engine, principal, id);
}

/** GET /v1/vector_stores: the workspace's cloud collections, by id (creation time), `after`/`before` an id. */
export async function listVectorStores(engine: Engine, principal: Principal, query: Record<string, string | undefined>): Promise<ListPage<VectorStoreView>> {
  const q = parseListQuery(query);
  const bound = (name: 'after' | 'before') => {
    const v = q[name];
    if (v === undefined) return undefined;
    try {
      return collectionIdOf(v);
    } catch {
      throw new PlatformError('invalid_body', `\`${name}\` must be a vector store id.`, name);
    }
  };
  const after = bound('after');
  const before = bound('before');
  const workspace = await workspaceOf(engine, principal);
  // Listing order is `order`; `before` reads toward the start of it, then turns the page round.
  const towardStart = before !== undefined && after === undefined;
  const descending = (q.order === 'desc') !== towardStart;
  const from = towardStart ? before : after;
  const stores: KvItem[] = [];
  let cursor: string | undefined;
  do {
    const page = await engine.kv.query({ pk: collectionsPk(principal.organizationId, workspace), ...(from ? { sk: descending ? { lt: from } : { gt: from } } : {}), descending, limit: 100, cursor });
    for (const c of page.items) {
      if (c.mode !== 'cloud' || Number(c.ends_at) <= Math.floor(engine.clock.now() / 1000)) continue;
      if (after !== undefined && before !== undefined && (q.order === 'desc' ? String(c.sk) <= before : String(c.sk) >= before)) continue;
      stores.push(c);
    }
    cursor = page.cursor;
  } while (cursor && stores.length <= q.limit);
  const hasMore = stores.length > q.limit;
  const kept = stores.slice(0, q.limit);
  if (towardStart) kept.reverse();
  const sides = kept.length ? await engine.kv.getMany(kept.map((c) => vectorStoreKey(principal.organizationId, workspace, String(c.sk)))) : [];
  return listPage(
    kept.map((c, i) => storeView(String(c.sk), c, sides[i])),
    hasMore,
  );
}

/** Removes every record of a partition (the store's files, lookups, batches), a page at a time. */
async function clearPartition(engine: Engine, pk: string): Promise<void> {
  for (;;) {
    const page = await engine.kv.query({ pk, limit: 100 });
    if (!page.items.length) return;
    for (let i = 0; i < page.items.length; i += 25) await engine.kv.transact(page.items.slice(i, i + 25).map((r) => ({ delete: { pk: r.pk, sk: r.sk } })));
  }
}

/** DELETE /v1/vector_stores/{id}: the collection (items, packages, vectors), then the side records. */
export async function deleteVectorStore(engine: Engine, principal: Principal, vectorStoreIdOrCollectionId: string): Promise<{ id: string; object: 'vector_store.deleted'; deleted: true }> {
  const { id } = await readStore(engine, principal, vectorStoreIdOrCollectionId);
  const org = principal.organizationId;
  const workspace = await workspaceOf(engine, principal);
  await deleteCollection(engine, principal, id);
  await clearPartition(engine, vectorStoreFilesPartition(org, workspace, id));
  await clearPartition(engine, vectorStoreFileByFileKey(org, workspace, id, '').pk);
  await clearPartition(engine, fileBatchKey(org, workspace, id, '').pk);
  await engine.kv.delete(vectorStoreKey(org, workspace, id));
  return { id: vectorStoreId(id), object: 'vector_store.deleted', deleted: true };
}

/** The side record's counters moved with an item's write (bytes, cancelled files); created (TTL and all) if a native cloud collection has none. */
export function sideCounters(org: string, workspace: string, collection: KvItem, add: { usage_bytes?: number; n_cancelled?: number }, lastActive?: number): KvWrite {
  const createdAt = unixSeconds(String(collection.created_at));
  const adds = Object.fromEntries(Object.entries(add).filter(([, v]) => v !== 0)) as Record<string, number>;
  return {
    update: vectorStoreKey(org, workspace, String(collection.sk)),
    ...(Object.keys(adds).length ? { add: adds } : {}),
    set: { expires_at: sideExpiry(createdAt), created_at: createdAt, ...(lastActive !== undefined ? { last_active_at: lastActive } : {}) },
  };
}

// ---------- OpenAI's shapes, for the API documents (lambdas/openapi/ai-openai.ts) ----------

const int = () => z.int();
export const vectorStoreIdSchema = () => z.string().check(z.regex(/^(vs|col)_[0-9a-f]{32}$/));
export const attributesSchema = () => z.record(z.string().check(z.minLength(1), z.maxLength(64)), z.union([z.string().check(z.maxLength(512)), z.number(), z.boolean()]));
export const chunkingStrategyParamSchema = () =>
  z.union([
    z.strictObject({ type: z.literal('auto') }),
    z.strictObject({
      type: z.literal('static'),
      static: z.strictObject({ max_chunk_size_tokens: int().check(z.minimum(100), z.maximum(4096)), chunk_overlap_tokens: int().check(z.minimum(0), z.maximum(2048)) }),
    }),
  ]);
const chunkingStrategySchema = () =>
  z.strictObject({ type: z.literal('static'), static: z.strictObject({ max_chunk_size_tokens: int(), chunk_overlap_tokens: int() }) }).check(z.describe('`auto` is answered as its sizes (800 and 400).'));
export const fileCountsSchema = () => z.strictObject({ in_progress: int(), completed: int(), failed: int(), cancelled: int(), total: int() });
const expiresAfterSchema = () => z.strictObject({ anchor: z.literal('last_active_at'), days: int().check(z.minimum(1), z.maximum(MAX_EXPIRES_AFTER_DAYS)) });

export const vectorStoreSchema = onFirstUse(() =>
  z.strictObject({
    id: z.string().check(z.regex(/^vs_[0-9a-f]{32}$/)),
    object: z.literal('vector_store'),
    created_at: int(),
    name: z.string(),
    description: z.nullable(z.string()),
    usage_bytes: int().check(z.describe('The files’ bytes (OpenAI counts its index’s).')),
    file_counts: fileCountsSchema(),
    status: z.enum(['expired', 'in_progress', 'completed']),
    last_active_at: z.nullable(int()),
    metadata: z.nullable(z.record(z.string(), z.string())),
    expires_after: z.optional(expiresAfterSchema()),
    expires_at: z.nullable(int()),
  }),
);
export const vectorStoreListSchema = onFirstUse(() => z.strictObject({ object: z.literal('list'), data: z.array(vectorStoreSchema()), first_id: z.nullable(z.string()), last_id: z.nullable(z.string()), has_more: z.boolean() }));
export const vectorStoreDeletedSchema = onFirstUse(() => z.strictObject({ id: z.string(), object: z.literal('vector_store.deleted'), deleted: z.literal(true) }));
export const createVectorStoreSchema = onFirstUse(() =>
  z.strictObject({
    name: z.optional(z.string().check(z.minLength(1), z.maxLength(MAX_NAME_CHARS))),
    description: z.optional(z.string().check(z.maxLength(MAX_DESCRIPTION_CHARS))),
    metadata: z.optional(z.nullable(z.record(z.string(), z.string()))),
    expires_after: z.optional(expiresAfterSchema()),
    file_ids: z.optional(z.array(z.string()).check(z.maxLength(MAX_CREATE_FILE_IDS))),
    chunking_strategy: z.optional(chunkingStrategyParamSchema()),
  }),
);
export const updateVectorStoreSchema = onFirstUse(() =>
  z.strictObject({
    name: z.optional(z.nullable(z.string().check(z.minLength(1), z.maxLength(MAX_NAME_CHARS)))),
    metadata: z.optional(z.nullable(z.record(z.string(), z.string()))),
    expires_after: z.optional(z.nullable(expiresAfterSchema())),
  }),
);
const listQueryShape = () => ({
  after: z.optional(z.string()),
  before: z.optional(z.string()),
  limit: z.optional(z.string().check(z.regex(/^\d{1,3}$/), z.describe('1 to 100, default 20.'))),
  order: z.optional(z.enum(['asc', 'desc'])),
});
export const vectorStoresQuerySchema = onFirstUse(() => z.strictObject(listQueryShape()));
export const storeFilesQuerySchema = onFirstUse(() => z.strictObject({ ...listQueryShape(), filter: z.optional(z.enum(['in_progress', 'completed', 'failed', 'cancelled'])) }));

export const vectorStoreFileSchema = onFirstUse(() =>
  z.strictObject({
    id: z.string(),
    object: z.literal('vector_store.file'),
    created_at: int(),
    vector_store_id: z.string(),
    status: z.enum(['in_progress', 'completed', 'failed', 'cancelled']),
    usage_bytes: int(),
    last_error: z.nullable(z.strictObject({ code: z.enum(['server_error', 'unsupported_file', 'invalid_file']), message: z.string().check(z.describe('Our failure code, a colon, and its message.')) })),
    attributes: z.record(z.string(), z.union([z.string(), z.number(), z.boolean()])),
    chunking_strategy: chunkingStrategySchema(),
  }),
);
export const vectorStoreFileListSchema = onFirstUse(() => z.strictObject({ object: z.literal('list'), data: z.array(vectorStoreFileSchema()), first_id: z.nullable(z.string()), last_id: z.nullable(z.string()), has_more: z.boolean() }));
export const vectorStoreFileDeletedSchema = onFirstUse(() => z.strictObject({ id: z.string(), object: z.literal('vector_store.file.deleted'), deleted: z.literal(true) }));
export const vectorStoreFileContentSchema = onFirstUse(() =>
  z.strictObject({ object: z.literal('vector_store.file_content.page'), data: z.array(z.strictObject({ type: z.literal('text'), text: z.string() })), has_more: z.literal(false), next_page: z.null() }),
);
export const attachFileSchema = onFirstUse(() =>
  z.strictObject({ file_id: z.string().check(z.minLength(1), z.maxLength(128)), attributes: z.optional(z.nullable(attributesSchema())), chunking_strategy: z.optional(chunkingStrategyParamSchema()) }),
);
export const updateFileSchema = onFirstUse(() => z.strictObject({ attributes: z.nullable(attributesSchema()) }));
export const fileBatchSchema = onFirstUse(() =>
  z.strictObject({
    id: z.string().check(z.regex(/^vsfb_[0-9a-f]{32}$/)),
    object: z.literal('vector_store.files_batch'),
    created_at: int(),
    vector_store_id: z.string(),
    status: z.enum(['in_progress', 'completed', 'cancelled', 'failed']),
    file_counts: fileCountsSchema(),
  }),
);
export const createFileBatchSchema = onFirstUse(() =>
  z.strictObject({
    file_ids: z.optional(z.array(z.string()).check(z.minLength(1), z.maxLength(2000))),
    files: z.optional(z.array(z.strictObject({ file_id: z.string(), attributes: z.optional(z.nullable(attributesSchema())), chunking_strategy: z.optional(chunkingStrategyParamSchema()) })).check(z.minLength(1), z.maxLength(2000))),
    attributes: z.optional(z.nullable(attributesSchema())),
    chunking_strategy: z.optional(chunkingStrategyParamSchema()),
  }),
);
