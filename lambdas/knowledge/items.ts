/**
 * A collection's items (docs/ai/collections.md, "Items"; decisions: docs/decisions/knowledge-items.md):
 * a file (a completed upload, or a small inline text) that processing (processing.ts) turns into a
 * package of cited chunks. The item's record is the truth about which package is served: a query
 * shows a chunk only if its item is `done` with that package (chunk-index.ts), so a package replaced
 * or an item deleted disappears in the one write that says so, whatever the index still holds.
 *
 * Every change of an item's state moves the collection's counters in the same transaction
 * (countsWrite), so `counts` stay exact however many processors run.
 */
import { createHash } from 'node:crypto';
import * as z from 'zod/mini';
import { storedPrincipal, type Principal } from '../auth/principal.js';
import type { Engine, KvItem, KvUpdate, KvWrite } from '../engine/ports.js';
import { TransactionCanceledError } from '../engine/errors.js';
import { checkReplay, type OperationContext } from '../ai/operations.js';
import { nextPageCursor, openPage, pageQuerySchema } from '../shared/cursors.js';
import { PlatformError } from '../shared/errors.js';
import { holdMs } from '../shared/hold-margin.js';
import type { OperationCall } from '../shared/operations.js';
import { settings } from '../shared/settings.js';
import { onFirstUse, parseBody, parseQuery } from '../shared/validate.js';
import { wellFormed } from '../vector/passages.js';
import { ADMITTED, admissionWrite, countsWrite, queueFull, readCollection, releaseSlotWrite, sortableId, workspaceOf, type CollectionMode, type ItemState } from './collection-records.js';
import { itemKey, itemsPk, processingKey, queuedItemsKey, sourceBlobKey } from './collection-keys.js';
import { completedUploadSource } from './uploads.js';
import { removePackage } from './chunk-index.js';
import type { ChunkOptions } from './chunks.js';

/** Why an item failed (docs/ai/collections.md, "Failures"). */
export const ITEM_FAILURES = ['unsupported_type', 'parse_error', 'empty_text', 'too_large', 'upstream_error', 'source_expired'] as const;
export type ItemFailure = (typeof ITEM_FAILURES)[number];

/** Inline text: small notes and snippets; files go through an upload. */
export const MAX_INLINE_TEXT_BYTES = 1024 * 1024;
export const MAX_FILENAME_CHARS = 255;
export const MAX_ITEMS_PAGE = 100;
export const DEFAULT_ITEMS_PAGE = 20;
/** Items a collection's own answer lists (the newest); the rest are GET .../items. */
export const ITEMS_IN_COLLECTION = 20;
/** How long a queued or processing item may go unseen before the processing sweep sends it again (KNOWLEDGE_LEASE_S). */
export const leaseSeconds = () => settings().knowledgeLeaseSeconds;
/** Spec 4.10's id shape, for items: `itm_` and 32 hex. */
const ITEM_ID = /^itm_[0-9a-f]{32}$/;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/** Spec 4.10's id shape, for collections (the item's `collection_id`). */
const COLLECTION_ID = /^col_[0-9a-f]{32}$/;
const PACKAGE_ID = /^pkg_[0-9a-f]{32}$/;

/** An item as the routes answer it (docs/ai/collections.md, "Items"); the collection's answer lists its newest. */
export const itemViewSchema = onFirstUse(() =>
  z
    .strictObject({
      item_id: z.string().check(z.regex(ITEM_ID), z.describe('`itm_` and 32 hex: sortable by creation.')),
      object: z.literal('collection.item'),
      collection_id: z.string().check(z.regex(COLLECTION_ID)),
      upload_id: z.nullable(z.string()).check(z.describe('The upload the file came from; null for an inline text.')),
      filename: z.string(),
      content_type: z.string(),
      size: z.int().check(z.minimum(0), z.describe('The file\'s size in bytes.')),
      sha256: z.string().check(z.regex(/^[0-9a-f]{64}$/), z.describe('The SHA-256 of the file\'s bytes, in lowercase hex.')),
      status: z.enum(['queued', 'processing', 'done', 'failed']).check(z.describe('`queued` → `processing` → `done` or `failed`, as the collection\'s `counts` name them; a reprocess puts a `done` or `failed` item back to `queued`.')),
      error: z.nullable(z.strictObject({ code: z.enum(ITEM_FAILURES), message: z.string() })).check(z.describe('Why a `failed` item failed (docs/ai/collections.md, "Failures"); null otherwise.')),
      package_id: z.nullable(z.string().check(z.regex(PACKAGE_ID))).check(z.describe('The package the item serves (its chunks are what queries see); null until its first processing is done.')),
      chunk_count: z.nullable(z.int().check(z.minimum(0))).check(z.describe('The served package\'s chunks; null while no package is served.')),
      vectors_stored: z.nullable(z.int().check(z.minimum(0))).check(z.describe('`local_vectors` only: how many of the served package\'s chunks have their vector; null in other modes or while no package is served.')),
      created_at: z.iso.datetime(),
      processed_at: z.nullable(z.iso.datetime()).check(z.describe('When its last processing ended (`done` or `failed`); null before.')),
    })
    .check(z.meta({ id: 'CollectionItem', description: 'One file of a knowledge collection and the state of its processing.' })),
);
export type ItemView = z.output<ReturnType<typeof itemViewSchema>>;

/** GET /v1/collections/{id}/items's answer. */
export const itemListSchema = onFirstUse(() =>
  z.strictObject({
    object: z.literal('list'),
    data: z.array(itemViewSchema()).check(z.describe('Newest first.')),
    next_cursor: z.nullable(z.string()).check(z.describe('Pass as `cursor` for the next page; null on the last.')),
  }),
);

/** A deleted item's answer. */
export const itemDeletedSchema = onFirstUse(() => z.strictObject({ item_id: z.string(), deleted: z.literal(true) }));

/** The stored item, read through its invariants. */
export interface Item {
  record: KvItem;
  org: string;
  workspace: string;
  collection: string;
  mode: CollectionMode;
  id: string;
  state: ItemState;
  upload_id: string | null;
  filename: string;
  content_type: string;
  size: number;
  sha256: string;
  /** Where the file's bytes are in the blob store. */
  source_key: string;
  /** Where its chunks' vectors go: its collection's index (null: `download`). */
  index: string | null;
  /** The package processing makes now (queued or processing), or made last. */
  pending_package: string;
  /** The package served: its chunks are what queries see. */
  package_id: string | null;
  chunk_count: number;
  skipped_chunks: number;
  vectors_stored: number;
  indexed: boolean;
  attempt: number;
  lease_until: number;
  /** The processing sweep's entry for this item (its sort key), while queued or processing. */
  lease_sk: string | null;
  owner: Principal;
  error_code: ItemFailure | null;
  error_message: string | null;
  created_at: string;
  processed_at: string | null;
  /** Its own chunk sizes (an OpenAI `static` chunking strategy); null: the defaults (chunks.ts). */
  chunking: ChunkOptions | null;
}

export function asItem(record: KvItem): Item {
  const [, org, workspace, collection] = String(record.pk).split('#');
  return {
    record,
    org,
    workspace,
    collection,
    mode: record.mode as CollectionMode,
    id: String(record.sk),
    state: record.state as ItemState,
    upload_id: (record.upload_id as string | null) ?? null,
    filename: String(record.filename),
    content_type: String(record.content_type),
    size: Number(record.size),
    sha256: String(record.sha256),
    source_key: String(record.source_key),
    index: typeof record.index === 'string' ? record.index : null,
    pending_package: String(record.pending_package),
    package_id: (record.package_id as string | null) ?? null,
    chunk_count: Number(record.chunk_count ?? 0),
    skipped_chunks: Number(record.skipped_chunks ?? 0),
    vectors_stored: Number(record.vectors_stored ?? 0),
    indexed: record.indexed === true,
    attempt: Number(record.attempt ?? 0),
    lease_until: Number(record.lease_until ?? 0),
    lease_sk: (record.lease_sk as string | null) ?? null,
    owner: JSON.parse(String(record.owner)) as Principal,
    error_code: (record.error_code as ItemFailure | null) ?? null,
    error_message: (record.error_message as string | null) ?? null,
    created_at: String(record.created_at),
    processed_at: (record.processed_at as string | null) ?? null,
    chunking: typeof record.chunk_max === 'number' ? { maxTokens: record.chunk_max, overlapTokens: Number(record.chunk_overlap ?? 0) } : null,
  };
}

export function itemView(item: Item): ItemView {
  const served = item.package_id !== null;
  return {
    item_id: item.id,
    object: 'collection.item',
    collection_id: item.collection,
    upload_id: item.upload_id,
    filename: item.filename,
    content_type: item.content_type,
    size: item.size,
    sha256: item.sha256,
    status: item.state,
    error: item.state === 'failed' && item.error_code ? { code: item.error_code, message: item.error_message ?? '' } : null,
    package_id: item.package_id,
    chunk_count: served ? item.chunk_count : null,
    vectors_stored: item.mode === 'local_vectors' && served ? item.vectors_stored : null,
    created_at: item.created_at,
    processed_at: item.processed_at,
  };
}

/**
 * The collection-wide counters an item adds while it serves a package: chunks, chunks the index
 * left out, and (local_vectors) chunks with vectors and whether every one has its vector. The
 * write that stops or starts serving a package moves them with the item (see servedDelta).
 */
export const SERVED_ATTRIBUTES = { chunks: 'n_chunks', skipped: 'n_chunks_skipped', vectors: 'n_vectors', indexed: 'n_indexed' } as const;

/** What `item` adds to its collection's served counters (negated when it stops serving). */
export function servedCounters(item: Pick<Item, 'package_id' | 'chunk_count' | 'skipped_chunks' | 'vectors_stored' | 'indexed'>, sign: 1 | -1): Record<string, number> {
  if (item.package_id === null) return {};
  return {
    [SERVED_ATTRIBUTES.chunks]: sign * item.chunk_count,
    [SERVED_ATTRIBUTES.skipped]: sign * item.skipped_chunks,
    [SERVED_ATTRIBUTES.vectors]: sign * item.vectors_stored,
    [SERVED_ATTRIBUTES.indexed]: sign * (item.indexed ? 1 : 0),
  };
}

/** countsWrite with the served counters added in the same update. */
export function collectionWrite(item: Pick<Item, 'org' | 'workspace' | 'collection'>, from: ItemState | null, to: ItemState | null, served: Record<string, number> = {}): KvUpdate {
  const write = countsWrite(item.org, item.workspace, item.collection, from, to);
  for (const [k, v] of Object.entries(served)) if (v !== 0) write.add![k] = (write.add![k] ?? 0) + v;
  return write;
}

// ---------- adding ----------

const uploadItemSchema = onFirstUse(() => z.strictObject({ upload_id: z.string().check(z.minLength(1), z.maxLength(128), z.describe('A completed upload of this workspace.')) }));
const textItemSchema = onFirstUse(() =>
  z.strictObject({
    text: z.string().check(
      z.minLength(1),
      z.refine((s) => Buffer.byteLength(s, 'utf8') <= MAX_INLINE_TEXT_BYTES, `text must be at most ${MAX_INLINE_TEXT_BYTES} bytes as UTF-8; send a larger file as an upload`),
      z.refine(wellFormed, 'text must be well-formed Unicode (no lone surrogates)'),
      z.describe('A small text sent inline: up to 1 MiB as UTF-8 (send a larger file as an upload).'),
    ),
    // A lone surrogate is stored as U+FFFD by DynamoDB and S3: the item would name another file there than locally.
    filename: z.string().check(
      z.minLength(1),
      z.maxLength(MAX_FILENAME_CHARS),
      z.refine((s) => !CONTROL.test(s) && !s.includes('/') && wellFormed(s), 'filename must be well-formed Unicode with no control characters or slashes'),
      z.describe('The text\'s file name (no control characters or slashes); its extension sets the default content type.'),
    ),
    content_type: z.optional(z.string().check(z.minLength(1), z.maxLength(255), z.regex(/^[A-Za-z0-9!#$&^_.+-]+\/[A-Za-z0-9!#$&^_.+-]+(\s*;[^\u0000-\u001f\u007f]*)?$/), z.refine(wellFormed, 'content_type must be well-formed Unicode'), z.describe('Default: from the file name (`.md` Markdown, `.html` HTML, else plain text; UTF-8).'))),
  }),
);
export type AddItem = z.output<ReturnType<typeof uploadItemSchema>> | z.output<ReturnType<typeof textItemSchema>>;
/** The two bodies parseAddItem takes, for the API documents (it picks one by the fields sent). */
export const addItemBodySchema = onFirstUse(() => z.union([uploadItemSchema(), textItemSchema()]));

/** POST .../items's body: `{upload_id}` or `{text, filename, content_type?}`. */
export function parseAddItem(body: unknown): AddItem {
  const keys = body !== null && typeof body === 'object' && !Array.isArray(body) ? Object.keys(body) : [];
  const known = new Set(['upload_id', 'text', 'filename', 'content_type']);
  const unknown = keys.find((k) => !known.has(k));
  if (unknown !== undefined) throw new PlatformError('unsupported_field', `Unknown field "${unknown}".`, unknown);
  if (keys.includes('upload_id') && keys.some((k) => k !== 'upload_id')) {
    throw new PlatformError('invalid_body', 'Send either {upload_id} or {text, filename}, not both.', 'upload_id');
  }
  // One shape or the other, by its fields, so a wrong value is named (a union's error names none).
  return keys.includes('upload_id') ? parseBody(uploadItemSchema(), body, { unknownField: 'unsupported_field' }) : parseBody(textItemSchema(), body, { unknownField: 'unsupported_field' });
}

const textTypeOf = (filename: string) => (/\.(md|markdown)$/i.test(filename) ? 'text/markdown; charset=utf-8' : /\.x?html?$/i.test(filename) ? 'text/html; charset=utf-8' : 'text/plain; charset=utf-8');

/** What the item's file is: the same operation id with another file is `409 operation_id_reused`. */
interface FileToAdd {
  upload_id: string | null;
  filename: string;
  content_type: string;
  size: number;
  sha256: string;
  /** Upload: the stored file's key. Text: its bytes, written under the item. */
  source: { key: string } | { text: Buffer };
}

/** The file an add names, checked before the operation id is claimed (404 upload_not_found, 409 upload_incomplete). */
export async function fileToAdd(engine: Engine, principal: Principal, request: AddItem): Promise<FileToAdd> {
  if ('upload_id' in request) {
    const { upload, key } = await completedUploadSource(engine, principal, request.upload_id);
    return { upload_id: upload.id, filename: upload.filename, content_type: upload.content_type, size: upload.size, sha256: upload.sha256, source: { key } };
  }
  const text = Buffer.from(request.text, 'utf8');
  return {
    upload_id: null,
    filename: request.filename,
    content_type: request.content_type ?? textTypeOf(request.filename),
    size: text.length,
    sha256: createHash('sha256').update(text).digest('hex'),
    source: { text },
  };
}

interface ItemOperationContext extends OperationContext {
  /** The file the id added: another file under the same id is `409 operation_id_reused` (spec 4.1). */
  file: string;
}

/** An add's claim on its operation id: replayed for the same file into the same collection only. */
export function addItemOperation(engine: Engine, principal: Principal, collectionId: string, file: FileToAdd): OperationCall<ItemOperationContext> {
  const context: ItemOperationContext = {
    endpoint: `/v1/collections/${collectionId}/items`,
    route: null,
    application: principal.applicationId,
    capability: 'knowledge',
    file: `${file.upload_id ?? ''}\n${file.filename}\n${file.content_type}\n${file.sha256}`,
  };
  return {
    tenant: principal.organizationId,
    holdSeconds: holdMs(30_000) / 1000,
    context,
    checkReplay: async (kept) => {
      if (kept && kept.endpoint === context.endpoint && kept.file !== context.file) {
        throw new PlatformError('operation_id_reused', 'This X-Operation-Id added another file; use a new id for this file.');
      }
      await checkReplay(engine, principal, context, kept);
    },
  };
}

const nowSeconds = (engine: Engine) => Math.floor(engine.clock.now() / 1000);
const iso = (epochSeconds: number) => new Date(epochSeconds * 1000).toISOString();
export const newPackageId = (nowMs: number) => sortableId('pkg', nowMs);

/** The message that asks a processor to process an item (consumers/knowledge-items.ts). */
export interface ProcessItemMessage {
  org: string;
  workspace: string;
  collection: string;
  item: string;
}

const queuedListeners = new Set<() => void>();

/**
 * Calls `listener` when this process sends an item to be processed now: the local receiver takes it
 * at once instead of at its next poll (only a hint; another process's items are found by polling).
 */
export function onItemQueued(listener: () => void): () => void {
  queuedListeners.add(listener);
  return () => queuedListeners.delete(listener);
}

/** Grouped by organization: processors take organizations in turn, so one's backlog never holds another's item behind it. */
export async function sendProcessing(engine: Engine, item: Pick<Item, 'org' | 'workspace' | 'collection' | 'id'>, delaySeconds = 0): Promise<void> {
  const message: ProcessItemMessage = { org: item.org, workspace: item.workspace, collection: item.collection, item: item.id };
  await engine.queue.send('knowledge', JSON.stringify(message), { group: item.org, ...(delaySeconds ? { delaySeconds } : {}) });
  if (!delaySeconds) for (const listener of queuedListeners) listener();
}

/**
 * POST /v1/collections/{id}/items: the item is written `queued` with the collection's counters, its
 * organization's queued-item slot (429 rate_limited at the cap) and the operation's kept answer in one
 * transaction, then sent for processing. A send that fails is made good by the processing sweep (the
 * item's lease entry is due in leaseSeconds()).
 */
export async function addItem(engine: Engine, principal: Principal, collectionId: string, file: FileToAdd, keep: ((answer: object) => KvUpdate) | undefined, opts: AddItemOptions = {}): Promise<ItemView> {
  const collection = await readCollection(engine, principal, collectionId);
  const org = principal.organizationId;
  // At the cap already: refused before any bytes are written (the transaction below is what decides).
  if (Number((await engine.kv.get(queuedItemsKey(org)))?.n ?? 0) >= settings().knowledgeMaxQueuedItems) throw queueFull();
  const workspace = await workspaceOf(engine, principal);
  const nowMs = engine.clock.now();
  const now = Math.floor(nowMs / 1000);
  const id = sortableId('itm', nowMs);
  let sourceKey: string;
  if ('key' in file.source) sourceKey = file.source.key;
  else {
    sourceKey = sourceBlobKey(org, workspace, collectionId, id);
    await engine.blobs.put(sourceKey, file.source.text);
  }
  const lease = processingKey(now + leaseSeconds(), org, workspace, collectionId, id);
  const record: KvItem = {
    ...itemKey(org, workspace, collectionId, id),
    mode: collection.mode,
    state: 'queued',
    upload_id: file.upload_id,
    filename: file.filename,
    content_type: file.content_type,
    size: file.size,
    sha256: file.sha256,
    source_key: sourceKey,
    index: (collection.index as string | null) ?? null,
    pending_package: newPackageId(nowMs),
    package_id: null,
    attempt: 0,
    chunk_count: 0,
    skipped_chunks: 0,
    vectors_stored: 0,
    indexed: false,
    lease_until: 0,
    lease_sk: lease.sk,
    owner: JSON.stringify(storedPrincipal(principal)),
    created_at: iso(now),
    processed_at: null,
    ...(opts.chunking ? { chunk_max: opts.chunking.maxTokens, chunk_overlap: opts.chunking.overlapTokens } : {}),
    [ADMITTED]: true,
    // No store expiry: the collection's removal (removeCollectionData) must still find the item to
    // remove its package and vectors; every read goes through the collection, which answers 410 first.
  };
  const item = asItem(record);
  const view = itemView(item);
  // The admission write stays last: its failure alone is the cap's 429.
  const writes: KvWrite[] = [{ put: record, condition: { ifAbsent: true } }, collectionWrite(item, null, 'queued'), { put: { ...lease } }, ...(keep ? [keep(view)] : []), ...(opts.extraWrites?.(item) ?? []), admissionWrite(org)];
  try {
    await engine.kv.transact(writes);
  } catch (error) {
    if (error instanceof TransactionCanceledError) {
      // Nothing was written: an inline text's bytes are nobody's (after another error the write may have applied).
      if ('text' in file.source) await engine.blobs.delete(sourceKey).catch(() => undefined);
      await readCollection(engine, principal, collectionId); // deleted or expired meanwhile: its 404 or 410
      if (error.failed.includes(writes.length - 1)) throw queueFull();
    }
    throw error;
  }
  await sendProcessing(engine, item).catch(() => undefined);
  return view;
}

/** What a caller beyond POST .../items may add to an add (the OpenAI vector store files, docs/decisions/openai-vector-stores.md). */
export interface AddItemOptions {
  /** The item's own chunk sizes, kept on it and used by every processing of it. */
  chunking?: { maxTokens: number; overlapTokens: number };
  /** The caller's records, written in the item's transaction (a conditioned one that fails cancels the add: the caller reads why). */
  extraWrites?: (item: Item) => KvWrite[];
}

// ---------- reading ----------

/** The item `itemId` of a live collection of the caller's workspace; 404 item_not_found otherwise. */
export async function readItem(engine: Engine, principal: Principal, collectionId: string, itemId: string): Promise<{ collection: KvItem; item: Item }> {
  const collection = await readCollection(engine, principal, collectionId);
  const notFound = new PlatformError('item_not_found', `No item "${itemId}" in collection "${collectionId}".`, 'item_id');
  if (!ITEM_ID.test(itemId)) throw notFound;
  const record = await engine.kv.get(itemKey(principal.organizationId, await workspaceOf(engine, principal), collectionId, itemId));
  if (!record) throw notFound;
  return { collection, item: asItem(record) };
}

export const getItem = async (engine: Engine, principal: Principal, collectionId: string, itemId: string): Promise<ItemView> => itemView((await readItem(engine, principal, collectionId, itemId)).item);

/** The newest items of a collection, for its own answer. */
export async function newestItems(engine: Engine, org: string, workspace: string, collectionId: string): Promise<ItemView[]> {
  const page = await engine.kv.query({ pk: itemsPk(org, workspace, collectionId), descending: true, limit: ITEMS_IN_COLLECTION });
  return page.items.map((r) => itemView(asItem(r)));
}

/** GET .../items's query, checked before openPage reads it. */
export const itemsQuerySchema = onFirstUse(() => pageQuerySchema({ max: MAX_ITEMS_PAGE, fallback: DEFAULT_ITEMS_PAGE }));
/** A listing's query faults as openPage names them: a cursor the schema refuses is one openPage would not open either. */
export const PAGE_QUERY_CODES = { unknownParameter: 'unsupported_field', invalid: 'invalid_field', fieldCodes: { cursor: 'invalid_cursor' } } as const;

/** GET /v1/collections/{id}/items?limit=&cursor=: newest first. */
export async function listItems(engine: Engine, principal: Principal, collectionId: string, query: Record<string, string>) {
  parseQuery(itemsQuerySchema(), query, PAGE_QUERY_CODES);
  await readCollection(engine, principal, collectionId);
  const workspace = await workspaceOf(engine, principal);
  const binding = `knowledge-items\n${principal.organizationId}\n${workspace}\n${collectionId}`;
  const { limit, position } = await openPage(engine.secret, query, binding, { max: MAX_ITEMS_PAGE, fallback: DEFAULT_ITEMS_PAGE });
  const page = await engine.kv.query({ pk: itemsPk(principal.organizationId, workspace, collectionId), descending: true, limit, cursor: position });
  return { object: 'list' as const, data: page.items.map((r) => itemView(asItem(r))), next_cursor: await nextPageCursor(engine.secret, page.cursor, binding) };
}

// ---------- deleting and re-processing ----------

/**
 * DELETE .../items/{item_id}: the item and its counts go in one transaction, so its chunks leave
 * every query at once (a query shows only chunks of live items); then its package's vectors and
 * blobs are removed. A processor still at work finds the item gone and removes what it made.
 */
export async function deleteItem(engine: Engine, principal: Principal, collectionId: string, itemId: string, opts: DeleteItemOptions = {}): Promise<{ item_id: string; deleted: true }> {
  for (;;) {
    const { item } = await readItem(engine, principal, collectionId, itemId);
    if (opts.onlyWhile && !opts.onlyWhile.includes(item.state)) throw new PlatformError('item_not_ready', `Item "${itemId}" is ${item.state}.`, 'item_id');
    const writes: KvWrite[] = [
      // Conditioned on what the counters it moves were computed from (vectors may arrive meanwhile).
      { delete: { pk: item.record.pk, sk: item.record.sk }, condition: { ifEquals: { state: item.state, attempt: item.attempt, package_id: item.package_id, vectors_stored: item.vectors_stored, indexed: item.indexed } } },
      collectionWrite(item, item.state, null, servedCounters(item, -1)),
      ...releaseSlotWrite(item),
      ...(opts.extraWrites?.(item) ?? []),
    ];
    if (item.lease_sk) writes.push({ delete: { pk: 'kproc', sk: item.lease_sk } });
    try {
      await engine.kv.transact(writes);
    } catch (error) {
      if (error instanceof TransactionCanceledError) continue; // it moved meanwhile: look again
      throw error;
    }
    await removeItemData(engine, item);
    return { item_id: itemId, deleted: true };
  }
}

/** What a caller beyond DELETE .../items/{item_id} may add to a delete (an OpenAI file batch's cancel). */
export interface DeleteItemOptions {
  /** Delete only while the item is in one of these states; otherwise `409 item_not_ready`, nothing deleted. */
  onlyWhile?: ItemState[];
  /** The caller's records, written in the delete's transaction (unconditioned ones: a failed condition is read as the item having moved). */
  extraWrites?: (item: Item) => KvWrite[];
}

/** An item's packages (served and pending), their vectors, and an inline text's bytes. Idempotent. */
export async function removeItemData(engine: Engine, item: Item): Promise<void> {
  for (const pkg of new Set([item.package_id, item.pending_package])) {
    if (pkg) await removePackage(engine, item, pkg);
  }
  if (item.upload_id === null) await engine.blobs.delete(item.source_key);
}

/**
 * POST .../items/{item_id}/reprocess: processes the item's file again into a new package. The package
 * served now stays served until the new one is done, then disappears in the same write (a `failed`
 * item serves none). 409 item_not_ready while it is queued or processing; it takes a queued-item slot
 * as an add does (429 rate_limited at the organization's cap).
 */
export async function reprocessItem(engine: Engine, principal: Principal, collectionId: string, itemId: string): Promise<ItemView> {
  for (;;) {
    const { item } = await readItem(engine, principal, collectionId, itemId);
    if (item.state === 'queued' || item.state === 'processing') throw new PlatformError('item_not_ready', `Item "${itemId}" is ${item.state} already.`, 'item_id');
    const nowMs = engine.clock.now();
    const now = Math.floor(nowMs / 1000);
    const lease = processingKey(now + leaseSeconds(), item.org, item.workspace, item.collection, item.id);
    const set = { state: 'queued', pending_package: newPackageId(nowMs), attempt: 0, lease_until: 0, lease_sk: lease.sk, error_code: null, error_message: null, [ADMITTED]: true };
    const writes: KvWrite[] = [
      { update: { pk: item.record.pk, sk: item.record.sk }, set, condition: { ifEquals: { state: item.state, attempt: item.attempt, pending_package: item.pending_package } } },
      collectionWrite(item, item.state, 'queued'),
      { put: { ...lease } },
      admissionWrite(item.org),
    ];
    try {
      await engine.kv.transact(writes);
    } catch (error) {
      if (!(error instanceof TransactionCanceledError)) throw error;
      if (error.failed.length === 1 && error.failed[0] === writes.length - 1) throw queueFull();
      continue;
    }
    // A failed attempt's package is no longer anyone's.
    if (item.pending_package !== item.package_id) await removePackage(engine, item, item.pending_package);
    const updated = asItem({ ...item.record, ...set });
    await sendProcessing(engine, updated).catch(() => undefined);
    return itemView(updated);
  }
}
