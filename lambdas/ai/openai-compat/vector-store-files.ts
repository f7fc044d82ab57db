/**
 * OpenAI's vector store files over collection items (docs/ai/openai-compatibility.md, "Vector stores";
 * docs/decisions/openai-vector-stores.md). A file attached to a store is an item of its collection
 * made from the upload the file is; the item, the collection's counters, the organization's
 * queued-item slot and our records (`oaivsf`: attributes, chunking, bytes; `oaivsfid`: which item a
 * file became; the store's bytes) are one transaction (addItem's `extraWrites`), and so is a delete.
 * A file is in a store once: the lookup is written only if absent, so concurrent adds of one file make
 * one item and answer it alike.
 */
import type { Principal } from '../../auth/principal.js';
import { TransactionCanceledError } from '../../engine/errors.js';
import type { Engine, KvItem, KvWrite } from '../../engine/ports.js';
import { itemKey } from '../../knowledge/collection-keys.js';
import { workspaceOf } from '../../knowledge/collections.js';
import { DEFAULT_MAX_TOKENS, DEFAULT_OVERLAP_TOKENS } from '../../knowledge/chunks.js';
import { addItem, asItem, deleteItem, fileToAdd, type Item, type ItemFailure } from '../../knowledge/items.js';
import { readChunks } from '../../knowledge/packages.js';
import { keepSourceUntil } from '../../knowledge/uploads.js';
import { PlatformError } from '../../shared/errors.js';
import { mapOf, mapText, parseAttributes } from './attributes.js';
import { listPage, parseListQuery, type ListPage } from './http.js';
import { unixSeconds, vectorStoreId } from './ids.js';
import { vectorStoreFileByFileKey, vectorStoreFileKey, vectorStoreFilesPartition, type Attributes, type VectorStoreFileRecord } from './keys.js';
import { bodyFields, readStore, sideCounters, sideExpiry } from './vector-stores.js';

/** OpenAI's bounds of a `static` chunking strategy. */
export const MIN_CHUNK_TOKENS = 100;
export const MAX_CHUNK_TOKENS = 4096;

export type FileStatus = 'in_progress' | 'completed' | 'failed' | 'cancelled';
export const FILE_STATUSES: readonly FileStatus[] = ['in_progress', 'completed', 'failed', 'cancelled'];

export interface Chunking {
  maxTokens: number;
  overlapTokens: number;
}

export interface VectorStoreFileView {
  id: string;
  object: 'vector_store.file';
  created_at: number;
  vector_store_id: string;
  status: FileStatus;
  usage_bytes: number;
  last_error: { code: 'server_error' | 'unsupported_file' | 'invalid_file'; message: string } | null;
  attributes: Attributes;
  chunking_strategy: { type: 'static'; static: { max_chunk_size_tokens: number; chunk_overlap_tokens: number } };
}

/** `chunking_strategy`: `auto` (ours is OpenAI's, 800/400: undefined here) or `static` within OpenAI's bounds (D9). */
export function parseChunking(value: unknown, param = 'chunking_strategy'): Chunking | undefined {
  if (value === undefined) return undefined;
  const bad = (why: string) => new PlatformError('invalid_body', `\`${param}\` ${why}`, param);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw bad('must be {type: "auto"} or {type: "static", static: {…}}.');
  const v = value as Record<string, unknown>;
  if (v.type === 'auto') {
    if (Object.keys(v).some((k) => k !== 'type')) throw bad('of type `auto` takes no other field.');
    return undefined;
  }
  if (v.type !== 'static' || Object.keys(v).some((k) => k !== 'type' && k !== 'static')) throw bad('must be {type: "auto"} or {type: "static", static: {…}}.');
  const s = v.static;
  if (s === null || typeof s !== 'object' || Array.isArray(s) || Object.keys(s).some((k) => k !== 'max_chunk_size_tokens' && k !== 'chunk_overlap_tokens')) {
    throw bad('`static` must be {max_chunk_size_tokens, chunk_overlap_tokens}.');
  }
  const { max_chunk_size_tokens: max, chunk_overlap_tokens: overlap } = s as Record<string, unknown>;
  if (typeof max !== 'number' || !Number.isInteger(max) || max < MIN_CHUNK_TOKENS || max > MAX_CHUNK_TOKENS) throw bad(`\`static.max_chunk_size_tokens\` must be an integer from ${MIN_CHUNK_TOKENS} to ${MAX_CHUNK_TOKENS}.`);
  if (typeof overlap !== 'number' || !Number.isInteger(overlap) || overlap < 0 || overlap > max / 2) throw bad('`static.chunk_overlap_tokens` must be an integer from 0 to half of `max_chunk_size_tokens`.');
  return { maxTokens: max, overlapTokens: overlap };
}

const chunkingView = (c: Chunking | null | undefined): VectorStoreFileView['chunking_strategy'] => ({
  type: 'static',
  static: { max_chunk_size_tokens: c?.maxTokens ?? DEFAULT_MAX_TOKENS, chunk_overlap_tokens: c?.overlapTokens ?? DEFAULT_OVERLAP_TOKENS },
});

/** An item's failure as OpenAI's `last_error` (2.4): our code and message stay readable in the message. */
const LAST_ERROR_CODES: Record<ItemFailure, 'server_error' | 'unsupported_file' | 'invalid_file'> = {
  unsupported_type: 'unsupported_file',
  parse_error: 'invalid_file',
  empty_text: 'invalid_file',
  too_large: 'invalid_file',
  source_expired: 'invalid_file',
  upstream_error: 'server_error',
};

export function statusOf(record: KvItem, item: Item | undefined): FileStatus | undefined {
  if (record.cancelled === true) return 'cancelled';
  if (!item) return undefined; // the item was deleted through /v1/collections: the file is gone
  return item.state === 'done' ? 'completed' : item.state === 'failed' ? 'failed' : 'in_progress';
}

/** The file's object, from its record and its item (undefined: gone, unless cancelled). */
export function fileView(collectionId: string, record: KvItem, item: Item | undefined): VectorStoreFileView | undefined {
  const status = statusOf(record, item);
  if (!status) return undefined;
  const r = record as unknown as VectorStoreFileRecord;
  return {
    id: r.file_id,
    object: 'vector_store.file',
    created_at: unixSeconds(r.created_at),
    vector_store_id: vectorStoreId(collectionId),
    status,
    usage_bytes: Number(r.bytes ?? 0),
    last_error: status === 'failed' && item ? { code: item.error_code ? LAST_ERROR_CODES[item.error_code] : 'server_error', message: `${item.error_code ?? 'failed'}: ${item.error_message ?? ''}` } : null,
    attributes: mapOf(r.attributes),
    chunking_strategy: chunkingView(r.chunking ? { maxTokens: r.chunking.max_chunk_size_tokens, overlapTokens: r.chunking.chunk_overlap_tokens } : null),
  };
}

export interface Scope {
  org: string;
  workspace: string;
  collectionId: string;
  collection: KvItem;
}

/** The store a route names (readStore: 404 for another workspace's or organization's, 410 past its end), before anything else is read. */
export async function scopeOf(engine: Engine, principal: Principal, storeId: string): Promise<Scope> {
  const { id, collection } = await readStore(engine, principal, storeId);
  return { org: principal.organizationId, workspace: await workspaceOf(engine, principal), collectionId: id, collection };
}

const fileNotFound = (fileId: string, collectionId: string) =>
  new PlatformError('item_not_found', `No file ${JSON.stringify(fileId.slice(0, 140))} in vector store ${vectorStoreId(collectionId)}.`, 'file_id');

/**
 * A file id's shape: an upload id's (8 to 128 letters, digits, `_`, `-`; lambdas/knowledge/uploads.ts).
 * Another string (a path's id of 1,100 characters) names no member and is never part of a key read:
 * DynamoDB refuses a sort key over 1,024 bytes, which would be a 500 on AWS.
 */
const FILE_ID = /^[A-Za-z0-9_-]{8,128}$/;

/** A member's record and item by file id: [lookup, record, item] (each undefined when absent). */
export async function readMembers(engine: Engine, s: Omit<Scope, 'collection'>, fileIds: string[]): Promise<Map<string, { record: KvItem; item: Item | undefined }>> {
  const out = new Map<string, { record: KvItem; item: Item | undefined }>();
  const wellFormed = fileIds.filter((f) => FILE_ID.test(f));
  for (let i = 0; i < wellFormed.length; i += 100) {
    const ids = wellFormed.slice(i, i + 100);
    const lookups = await engine.kv.getMany(ids.map((f) => vectorStoreFileByFileKey(s.org, s.workspace, s.collectionId, f)));
    const itemIds = lookups.map((l) => (l ? String(l.item_id) : undefined));
    const present = itemIds.filter((x): x is string => x !== undefined);
    const records = present.length ? await engine.kv.getMany(present.map((id) => vectorStoreFileKey(s.org, s.workspace, s.collectionId, id))) : [];
    const items = present.length ? await engine.kv.getMany(present.map((id) => itemKey(s.org, s.workspace, s.collectionId, id))) : [];
    let k = 0;
    ids.forEach((fileId, j) => {
      if (itemIds[j] === undefined) return;
      const record = records[k];
      const item = items[k];
      k += 1;
      if (record && record.file_id === fileId) out.set(fileId, { record, item: item ? asItem(item) : undefined });
    });
  }
  return out;
}

export interface AttachFile {
  fileId: string;
  attributes: Attributes | null;
  chunking?: Chunking;
}

/** The file an attach names, checked before anything is written: `404 upload_not_found` ("No file …"), `409 upload_incomplete`. */
export async function checkFile(engine: Engine, principal: Principal, fileId: string) {
  try {
    return await fileToAdd(engine, principal, { upload_id: fileId });
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'upload_not_found') throw new PlatformError('upload_not_found', `No file ${JSON.stringify(fileId.slice(0, 140))} in this workspace.`, 'file_id');
    throw error;
  }
}

/**
 * Attaches a file (POST …/files, and each file of a batch): an attached one answers as it is (OpenAI's
 * re-attach is a no-op too); a cancelled one, or one whose item was deleted natively, is attached
 * anew. Otherwise an item queued from the upload (its bytes kept as long as the store, D6) with our
 * records, in one transaction; `429 rate_limited` at the organization's queued-item cap.
 */
export async function attachFile(engine: Engine, principal: Principal, storeId: string, spec: AttachFile, batchId?: string): Promise<VectorStoreFileView> {
  const s = await scopeOf(engine, principal, storeId);
  const collectionId = s.collectionId;
  for (let attempt = 0; ; attempt++) {
    const { collection } = attempt ? await readStore(engine, principal, collectionId) : s;
    const lookupKey = vectorStoreFileByFileKey(s.org, s.workspace, collectionId, spec.fileId);
    const existing = (await readMembers(engine, s, [spec.fileId])).get(spec.fileId);
    const lookup = await engine.kv.get(lookupKey);
    if (existing) {
      const view = fileView(collectionId, existing.record, existing.item);
      if (view && view.status !== 'cancelled') return view;
    }
    const file = await checkFile(engine, principal, spec.fileId);
    await keepSourceUntil(engine, principal, spec.fileId, Number(collection.ends_at));
    const now = engine.clock.now();
    const ttl = sideExpiry(unixSeconds(String(collection.created_at)));
    const extraWrites = (item: Item): KvWrite[] => {
      const record: VectorStoreFileRecord = {
        file_id: spec.fileId,
        attributes: mapText(spec.attributes),
        ...(spec.chunking ? { chunking: { max_chunk_size_tokens: spec.chunking.maxTokens, chunk_overlap_tokens: spec.chunking.overlapTokens } } : {}),
        bytes: file.size,
        ...(batchId ? { batch_id: batchId } : {}),
        created_at: new Date(now).toISOString(),
      };
      const writes: KvWrite[] = [
        { put: { ...vectorStoreFileKey(s.org, s.workspace, collectionId, item.id), ...record, expires_at: ttl } },
        // One item per file and store, however many adds run at once.
        { put: { ...lookupKey, item_id: item.id, expires_at: ttl }, condition: lookup ? { ifEquals: { item_id: String(lookup.item_id) } } : { ifAbsent: true } },
      ];
      const wasCancelled = existing?.record.cancelled === true;
      // The record it replaces (cancelled, or its item deleted natively): counted out once.
      if (lookup && existing) writes.push({ delete: { pk: existing.record.pk, sk: existing.record.sk }, condition: wasCancelled ? { ifEquals: { cancelled: true } } : { ifExists: true } });
      writes.push(sideCounters(s.org, s.workspace, collection, { usage_bytes: file.size, n_cancelled: wasCancelled ? -1 : 0 }, Math.floor(now / 1000)));
      return writes;
    };
    try {
      await addItem(engine, principal, collectionId, file, undefined, { ...(spec.chunking ? { chunking: spec.chunking } : {}), extraWrites });
      return await getStoreFile(engine, principal, collectionId, spec.fileId);
    } catch (error) {
      // Another add of the same file won (or a cancel or delete moved it): read it again.
      if (error instanceof TransactionCanceledError && attempt < 3) continue;
      throw error;
    }
  }
}

/** GET …/files/{file_id}. */
export async function getStoreFile(engine: Engine, principal: Principal, storeId: string, fileId: string): Promise<VectorStoreFileView> {
  const s = await scopeOf(engine, principal, storeId);
  const collectionId = s.collectionId;
  const member = (await readMembers(engine, s, [fileId])).get(fileId);
  const view = member && fileView(collectionId, member.record, member.item);
  if (!view) throw fileNotFound(fileId, collectionId);
  return view;
}

/** The item id a file id's listing position is (an `after`/`before` cursor); an id of no file of the store is `400`. */
async function positionOf(engine: Engine, s: Omit<Scope, 'collection'>, fileId: string, param: string): Promise<string> {
  const lookup = FILE_ID.test(fileId) ? await engine.kv.get(vectorStoreFileByFileKey(s.org, s.workspace, s.collectionId, fileId)) : undefined;
  if (!lookup) throw new PlatformError('invalid_body', `\`${param}\` must be the id of a file of this vector store.`, param);
  return String(lookup.item_id);
}

/** GET …/files: by creation (item ids sort by it), `filter` by status, `after`/`before` a file id. */
export async function listStoreFiles(engine: Engine, principal: Principal, storeId: string, query: Record<string, string | undefined>): Promise<ListPage<VectorStoreFileView>> {
  const q = parseListQuery(query, ['filter']);
  const filter = q.extra.filter;
  if (filter !== undefined && !FILE_STATUSES.includes(filter as FileStatus)) throw new PlatformError('invalid_body', '`filter` must be in_progress, completed, failed or cancelled.', 'filter');
  const s = await scopeOf(engine, principal, storeId);
  const collectionId = s.collectionId;
  const after = q.after !== undefined ? await positionOf(engine, s, q.after, 'after') : undefined;
  const before = q.before !== undefined && after === undefined ? await positionOf(engine, s, q.before, 'before') : undefined;
  const towardStart = before !== undefined;
  const descending = (q.order === 'desc') !== towardStart;
  const from = after ?? before;
  const out: VectorStoreFileView[] = [];
  let cursor: string | undefined;
  do {
    const page = await engine.kv.query({ pk: vectorStoreFilesPartition(s.org, s.workspace, collectionId), ...(from ? { sk: descending ? { lt: from } : { gt: from } } : {}), descending, limit: 100, cursor });
    const items = page.items.length ? await engine.kv.getMany(page.items.map((r) => itemKey(s.org, s.workspace, collectionId, String(r.sk)))) : [];
    page.items.forEach((record, i) => {
      const view = fileView(collectionId, record, items[i] ? asItem(items[i]!) : undefined);
      if (view && (filter === undefined || view.status === filter)) out.push(view);
    });
    cursor = page.cursor;
  } while (cursor && out.length <= q.limit);
  const data = out.slice(0, q.limit);
  if (towardStart) data.reverse();
  return listPage(data, out.length > q.limit);
}

/** POST …/files/{file_id} {attributes}: the record only (filters read it live). */
export async function updateStoreFile(engine: Engine, principal: Principal, storeId: string, fileId: string, attributes: Attributes | null): Promise<VectorStoreFileView> {
  const s = await scopeOf(engine, principal, storeId);
  const collectionId = s.collectionId;
  const member = (await readMembers(engine, s, [fileId])).get(fileId);
  if (!member || !fileView(collectionId, member.record, member.item)) throw fileNotFound(fileId, collectionId);
  try {
    await engine.kv.update({ key: { pk: member.record.pk, sk: member.record.sk }, set: { attributes: mapText(attributes) }, condition: { ifEquals: { file_id: fileId } } });
  } catch {
    throw fileNotFound(fileId, collectionId); // deleted meanwhile
  }
  return getStoreFile(engine, principal, collectionId, fileId);
}

export function parseUpdateStoreFile(body: unknown): Attributes | null {
  const b = bodyFields(body, ['attributes']);
  if (!('attributes' in b)) throw new PlatformError('invalid_body', '`attributes` is required.', 'attributes');
  return parseAttributes(b.attributes);
}

export function parseAttachFile(body: unknown): AttachFile {
  const b = bodyFields(body, ['file_id', 'attributes', 'chunking_strategy']);
  if (typeof b.file_id !== 'string' || b.file_id.length < 1 || b.file_id.length > 128) throw new PlatformError('invalid_body', '`file_id` must be a file id.', 'file_id');
  return { fileId: b.file_id, attributes: b.attributes === undefined ? null : parseAttributes(b.attributes), chunking: parseChunking(b.chunking_strategy) };
}

/**
 * DELETE …/files/{file_id}: the item (its chunks leave every search at once), its counters and our
 * records in one transaction, then its packages and vectors. A cancelled file has no item: its records go.
 */
export async function deleteStoreFile(engine: Engine, principal: Principal, storeId: string, fileId: string): Promise<{ id: string; object: 'vector_store.file.deleted'; deleted: true }> {
  const s = await scopeOf(engine, principal, storeId);
  const { collectionId, collection } = s;
  const member = (await readMembers(engine, s, [fileId])).get(fileId);
  if (!member || !fileView(collectionId, member.record, member.item)) throw fileNotFound(fileId, collectionId);
  const records = (item?: Item): KvWrite[] => [
    { delete: { pk: member.record.pk, sk: member.record.sk } },
    { delete: vectorStoreFileByFileKey(s.org, s.workspace, collectionId, fileId) },
    sideCounters(s.org, s.workspace, collection, item ? { usage_bytes: -Number(member.record.bytes ?? 0) } : { n_cancelled: -1 }),
  ];
  if (member.record.cancelled === true) {
    try {
      // Conditioned: two deletes at once count the cancelled file out once.
      const [first, ...rest] = records();
      await engine.kv.transact([{ ...(first as { delete: { pk: string; sk: string } }), condition: { ifEquals: { cancelled: true } } }, ...rest]);
    } catch (error) {
      if (error instanceof TransactionCanceledError) throw fileNotFound(fileId, collectionId);
      throw error;
    }
  } else {
    try {
      await deleteItem(engine, principal, collectionId, String(member.record.sk), { extraWrites: (item) => records(item) });
    } catch (error) {
      if (error instanceof PlatformError && error.code === 'item_not_found') throw fileNotFound(fileId, collectionId);
      throw error;
    }
  }
  return { id: fileId, object: 'vector_store.file.deleted', deleted: true };
}

/** GET …/files/{file_id}/content: the served package's chunks, each as a text part (none until it is processed). */
export async function storeFileContent(engine: Engine, principal: Principal, storeId: string, fileId: string) {
  const s = await scopeOf(engine, principal, storeId);
  const collectionId = s.collectionId;
  const member = (await readMembers(engine, s, [fileId])).get(fileId);
  if (!member || !fileView(collectionId, member.record, member.item)) throw fileNotFound(fileId, collectionId);
  const item = member.item;
  const chunks = item?.package_id ? ((await readChunks(engine, item, item.package_id)) ?? []) : [];
  return { object: 'vector_store.file_content.page' as const, data: chunks.map((c) => ({ type: 'text' as const, text: c.text })), has_more: false, next_page: null };
}
