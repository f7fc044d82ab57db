/**
 * OpenAI's vector store file batches (docs/ai/openai-compatibility.md, "Vector stores";
 * docs/decisions/openai-vector-stores.md). A batch is a record (`oaivsfb`, keys.ts) naming its files
 * in order and how far their admission got (`next`); each file is attached as POST …/files attaches
 * one (vector-store-files.ts), so a batch adds no rule of its own. Every file is checked before
 * anything is added; admission stops at the organization's queued-item cap and goes on at the
 * batch's next reads. Counts are read from the members' items on every read, never kept.
 */
import type { Principal } from '../../auth/principal.js';
import type { Engine, KvItem, KvWrite } from '../../engine/ports.js';
import { ConditionFailedError } from '../../engine/errors.js';
import { deleteItem } from '../../knowledge/items.js';
import { PlatformError } from '../../shared/errors.js';
import { mapOf, mapText, parseAttributes } from './attributes.js';
import { listPage, parseListQuery, type ListPage } from './http.js';
import { newCompatId, vectorStoreId } from './ids.js';
import { fileBatchKey, vectorStoreFileKey, type Attributes } from './keys.js';
import { bodyFields, sideCounters, sideExpiry, type FileCounts } from './vector-stores.js';
import { attachFile, checkFile, FILE_STATUSES, fileView, parseChunking, readMembers, scopeOf, type AttachFile, type Chunking, type FileStatus, type Scope, type VectorStoreFileView } from './vector-store-files.js';
import { unixSeconds } from './ids.js';

export const MAX_BATCH_FILES = 2000;
/**
 * A batch record stays well under DynamoDB's 400 KB item, counted in UTF-8 bytes (an attribute of 512
 * characters may be 1,536 bytes): its specs, and its file ids twice (`file_ids`, and `refused`, which
 * admission may fill with all of them later, when a failed write could no longer be answered but as a 500).
 */
const MAX_RECORD_BYTES = 300_000;
/** Files checked at once before a batch is written. */
const CHECK_CONCURRENCY = 8;

export interface FileBatchView {
  id: string;
  object: 'vector_store.files_batch';
  created_at: number;
  vector_store_id: string;
  status: 'in_progress' | 'completed' | 'cancelled' | 'failed';
  file_counts: FileCounts;
}

export interface CreateFileBatch {
  files: AttachFile[];
}

/** `file_ids` xor `files` (1…2000, a file named twice counts once), with `attributes`/`chunking_strategy` for `file_ids`. */
export function parseCreateFileBatch(body: unknown): CreateFileBatch {
  const b = bodyFields(body, ['file_ids', 'files', 'attributes', 'chunking_strategy']);
  if ((b.file_ids === undefined) === (b.files === undefined)) throw new PlatformError('invalid_body', 'Send either `file_ids` or `files`.', b.file_ids === undefined ? 'file_ids' : 'files');
  const attributes = b.attributes === undefined ? null : parseAttributes(b.attributes);
  const chunking = parseChunking(b.chunking_strategy);
  const list = (b.file_ids ?? b.files) as unknown;
  const param = b.file_ids !== undefined ? 'file_ids' : 'files';
  if (!Array.isArray(list) || list.length < 1 || list.length > MAX_BATCH_FILES) throw new PlatformError('invalid_body', `\`${param}\` must hold 1 to ${MAX_BATCH_FILES} files.`, param);
  const files = new Map<string, AttachFile>();
  list.forEach((entry: unknown, i) => {
    let spec: AttachFile;
    if (param === 'file_ids') {
      if (typeof entry !== 'string' || entry.length < 1 || entry.length > 128) throw new PlatformError('invalid_body', `\`file_ids[${i}]\` must be a file id.`, `file_ids[${i}]`);
      spec = { fileId: entry, attributes, ...(chunking ? { chunking } : {}) };
    } else {
      const f = bodyFields(entry, ['file_id', 'attributes', 'chunking_strategy']);
      if (entry === null || typeof entry !== 'object') throw new PlatformError('invalid_body', `\`files[${i}]\` must be {file_id, attributes?, chunking_strategy?}.`, `files[${i}]`);
      if (typeof f.file_id !== 'string' || f.file_id.length < 1 || f.file_id.length > 128) throw new PlatformError('invalid_body', `\`files[${i}].file_id\` must be a file id.`, `files[${i}].file_id`);
      const own = parseChunking(f.chunking_strategy, `files[${i}].chunking_strategy`) ?? chunking;
      spec = { fileId: f.file_id, attributes: f.attributes === undefined ? attributes : parseAttributes(f.attributes, `files[${i}].attributes`), ...(own ? { chunking: own } : {}) };
    }
    if (!files.has(spec.fileId)) files.set(spec.fileId, spec);
  });
  return { files: [...files.values()] };
}

interface BatchRecord {
  record: KvItem;
  id: string;
  fileIds: string[];
  /** Files before this index were admitted (or refused); the rest wait for a free slot. */
  next: number;
  cancelled: boolean;
  /** Files that could no longer be attached when their turn came (their upload expired meanwhile): counted failed. */
  refused: string[];
  specs: Record<string, { attributes: Attributes | null; chunking?: Chunking }>;
  createdAt: number;
}

function asBatch(record: KvItem): BatchRecord {
  const specs = mapOf(record.specs) as unknown as BatchRecord['specs'];
  return {
    record,
    id: String(record.sk),
    fileIds: (record.file_ids as string[]) ?? [],
    next: Number(record.next ?? 0),
    cancelled: record.cancelled === true,
    refused: (record.refused as string[]) ?? [],
    specs,
    createdAt: Number(record.created_at),
  };
}

const batchNotFound = (batchId: string, collectionId: string) =>
  new PlatformError('item_not_found', `No file batch ${JSON.stringify(batchId.slice(0, 140))} in vector store ${vectorStoreId(collectionId)}.`, 'batch_id');

async function readBatch(engine: Engine, s: Scope, batchId: string): Promise<BatchRecord> {
  if (!/^vsfb_[0-9a-f]{32}$/.test(batchId)) throw batchNotFound(batchId, s.collectionId);
  const record = await engine.kv.get(fileBatchKey(s.org, s.workspace, s.collectionId, batchId));
  if (!record) throw batchNotFound(batchId, s.collectionId);
  return asBatch(record);
}

const specOf = (batch: BatchRecord, fileId: string): AttachFile => {
  const spec = Object.hasOwn(batch.specs, fileId) ? batch.specs[fileId] : undefined;
  return { fileId, attributes: spec?.attributes ?? null, ...(spec?.chunking ? { chunking: spec.chunking } : {}) };
};

/**
 * Attaches the batch's waiting files in order until the organization's queued-item cap answers 429
 * (they wait for the next read). Two admitters at once attach the same files idempotently; `next`
 * moves only from the value read, and never on a cancelled batch.
 */
async function admit(engine: Engine, principal: Principal, s: Scope, batch: BatchRecord): Promise<BatchRecord> {
  if (batch.cancelled || batch.next >= batch.fileIds.length) return batch;
  let next = batch.next;
  const refused: string[] = [];
  for (; next < batch.fileIds.length; next++) {
    const fileId = batch.fileIds[next];
    try {
      await attachFile(engine, principal, s.collectionId, specOf(batch, fileId), batch.id);
    } catch (error) {
      if (error instanceof PlatformError && error.code === 'rate_limited') break;
      if (error instanceof PlatformError && (error.code === 'upload_not_found' || error.code === 'upload_incomplete')) refused.push(fileId);
      else throw error;
    }
  }
  if (next === batch.next) return batch;
  const set = { next, refused: [...batch.refused, ...refused] };
  try {
    await engine.kv.update({ key: { pk: batch.record.pk, sk: batch.record.sk }, set, condition: { ifEquals: { next: batch.next, cancelled: false } } });
  } catch (error) {
    if (!(error instanceof ConditionFailedError)) throw error;
    return asBatch((await engine.kv.get({ pk: batch.record.pk, sk: batch.record.sk })) ?? batch.record);
  }
  return { ...batch, ...set, record: { ...batch.record, ...set } };
}

/** Each member's status, in the batch's order (a file deleted from the store since is left out). */
async function memberStatuses(engine: Engine, s: Scope, batch: BatchRecord): Promise<Array<{ fileId: string; status: FileStatus; view?: VectorStoreFileView }>> {
  const members = await readMembers(engine, s, batch.fileIds);
  const refused = new Set(batch.refused);
  const out: Array<{ fileId: string; status: FileStatus; view?: VectorStoreFileView }> = [];
  batch.fileIds.forEach((fileId, i) => {
    const m = members.get(fileId);
    const view = m && fileView(s.collectionId, m.record, m.item);
    if (view) out.push({ fileId, status: view.status, view });
    else if (refused.has(fileId)) out.push({ fileId, status: 'failed' });
    else if (batch.cancelled && (i >= batch.next || m?.record.cancelled === true)) out.push({ fileId, status: 'cancelled' });
    else if (i >= batch.next) out.push({ fileId, status: 'in_progress' });
  });
  return out;
}

function batchView(s: Scope, batch: BatchRecord, statuses: Array<{ status: FileStatus }>): FileBatchView {
  const counts: FileCounts = { in_progress: 0, completed: 0, failed: 0, cancelled: 0, total: statuses.length };
  for (const { status } of statuses) counts[status] += 1;
  const status: FileBatchView['status'] =
    counts.in_progress > 0 ? 'in_progress' : batch.cancelled ? 'cancelled' : counts.total > 0 && counts.failed === counts.total ? 'failed' : 'completed';
  return { id: batch.id, object: 'vector_store.files_batch', created_at: batch.createdAt, vector_store_id: vectorStoreId(s.collectionId), status, file_counts: counts };
}

/** Checks files a few at a time: the first unknown one answers its 404 before anything is written. */
async function checkFiles(engine: Engine, principal: Principal, fileIds: string[]): Promise<void> {
  for (let i = 0; i < fileIds.length; i += CHECK_CONCURRENCY) {
    await Promise.all(fileIds.slice(i, i + CHECK_CONCURRENCY).map((f) => checkFile(engine, principal, f)));
  }
}

/** POST …/file_batches: every file checked, the batch written, then its files admitted up to the cap. */
export async function createFileBatch(engine: Engine, principal: Principal, storeId: string, request: CreateFileBatch): Promise<FileBatchView> {
  const s = await scopeOf(engine, principal, storeId);
  const fileIds = request.files.map((f) => f.fileId);
  // Files attached already are members as they are; the others must be files of this workspace.
  const attached = await readMembers(engine, s, fileIds);
  await checkFiles(
    engine,
    principal,
    fileIds.filter((f) => {
      const m = attached.get(f);
      return !m || !fileView(s.collectionId, m.record, m.item);
    }),
  );
  // Keyed by file id, which may be any upload id (`__proto__` too): no prototype to assign through.
  const specs: BatchRecord['specs'] = Object.create(null) as BatchRecord['specs'];
  for (const f of request.files) if (f.attributes || f.chunking) specs[f.fileId] = { attributes: f.attributes, ...(f.chunking ? { chunking: f.chunking } : {}) };
  const specsText = mapText(specs as unknown as Attributes);
  if (Buffer.byteLength(specsText) + 2 * Buffer.byteLength(fileIds.join('')) > MAX_RECORD_BYTES) throw new PlatformError('invalid_body', 'This batch\'s files and attributes are too large for one batch; send them in smaller batches.', 'files');
  const nowMs = engine.clock.now();
  const id = newCompatId('vsfb', nowMs);
  const now = Math.floor(nowMs / 1000);
  const record: KvItem = {
    ...fileBatchKey(s.org, s.workspace, s.collectionId, id),
    file_ids: fileIds,
    next: 0,
    cancelled: false,
    refused: [],
    specs: specsText,
    created_at: now,
    expires_at: sideExpiry(unixSeconds(String(s.collection.created_at))),
  };
  await engine.kv.put(record, { ifAbsent: true });
  const batch = await admit(engine, principal, s, asBatch(record));
  return batchView(s, batch, await memberStatuses(engine, s, batch));
}

/** GET …/file_batches/{batch_id}: admits more waiting files, then counts the members. */
export async function getFileBatch(engine: Engine, principal: Principal, storeId: string, batchId: string): Promise<FileBatchView> {
  const s = await scopeOf(engine, principal, storeId);
  const batch = await admit(engine, principal, s, await readBatch(engine, s, batchId));
  return batchView(s, batch, await memberStatuses(engine, s, batch));
}

/**
 * POST …/file_batches/{batch_id}/cancel: no more files are admitted, and each file this batch added
 * that is still queued is taken out (its item deleted, its record kept as `cancelled`, counted in the
 * store's `file_counts.cancelled`) in one transaction each; files processing or done stay.
 */
export async function cancelFileBatch(engine: Engine, principal: Principal, storeId: string, batchId: string): Promise<FileBatchView> {
  const s = await scopeOf(engine, principal, storeId);
  let batch = await readBatch(engine, s, batchId);
  if (!batch.cancelled) {
    try {
      await engine.kv.update({ key: { pk: batch.record.pk, sk: batch.record.sk }, set: { cancelled: true }, condition: { ifEquals: { cancelled: false } } });
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error;
    }
    batch = await readBatch(engine, s, batchId);
  }
  const members = await readMembers(engine, s, batch.fileIds);
  for (const [, m] of members) {
    if (m.record.batch_id !== batch.id || !m.item || m.item.state !== 'queued') continue;
    const record = m.record;
    try {
      await deleteItem(engine, principal, s.collectionId, m.item.id, {
        onlyWhile: ['queued'],
        extraWrites: (): KvWrite[] => [
          { update: vectorStoreFileKey(s.org, s.workspace, s.collectionId, String(record.sk)), set: { cancelled: true } },
          sideCounters(s.org, s.workspace, s.collection, { n_cancelled: 1, usage_bytes: -Number(record.bytes ?? 0) }),
        ],
      });
    } catch (error) {
      // Claimed by a processor meanwhile, or deleted: it stays as it is.
      if (!(error instanceof PlatformError && (error.code === 'item_not_ready' || error.code === 'item_not_found'))) throw error;
    }
  }
  return batchView(s, batch, await memberStatuses(engine, s, batch));
}

/** GET …/file_batches/{batch_id}/files: the members in the batch's order (`order=desc` reverses it), `after`/`before` a member's id, `filter` by status. */
export async function listFileBatchFiles(engine: Engine, principal: Principal, storeId: string, batchId: string, query: Record<string, string | undefined>): Promise<ListPage<VectorStoreFileView>> {
  const q = parseListQuery(query, ['filter']);
  const filter = q.extra.filter;
  if (filter !== undefined && !FILE_STATUSES.includes(filter as FileStatus)) throw new PlatformError('invalid_body', '`filter` must be in_progress, completed, failed or cancelled.', 'filter');
  const s = await scopeOf(engine, principal, storeId);
  const batch = await readBatch(engine, s, batchId);
  let members = await memberStatuses(engine, s, batch);
  if (q.order === 'desc') members = members.reverse();
  const position = (name: 'after' | 'before') => {
    const i = members.findIndex((m) => m.fileId === q[name]);
    if (i < 0) throw new PlatformError('invalid_body', `\`${name}\` must be the id of a file of this batch.`, name);
    return i;
  };
  let data = members;
  if (q.after !== undefined) data = data.slice(position('after') + 1);
  else if (q.before !== undefined) data = data.slice(0, position('before'));
  if (filter !== undefined) data = data.filter((m) => m.status === filter);
  const page = q.before !== undefined && q.after === undefined ? data.slice(-q.limit) : data.slice(0, q.limit);
  const hasMore = data.length > page.length;
  return listPage(
    page.map((m) => m.view ?? waitingView(s, batch, m.fileId, m.status)),
    hasMore,
  );
}

/** A member with no item of its own (waiting for admission, refused, or dropped by a cancel), in a file's shape. */
function waitingView(s: Scope, batch: BatchRecord, fileId: string, status: FileStatus): VectorStoreFileView {
  const spec = specOf(batch, fileId);
  return {
    id: fileId,
    object: 'vector_store.file',
    created_at: batch.createdAt,
    vector_store_id: vectorStoreId(s.collectionId),
    status,
    usage_bytes: 0,
    last_error: status === 'failed' ? { code: 'invalid_file', message: 'upload_not_found: the file was gone or incomplete when its turn to be attached came.' } : null,
    attributes: spec.attributes ?? {},
    chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: spec.chunking?.maxTokens ?? 800, chunk_overlap_tokens: spec.chunking?.overlapTokens ?? 400 } },
  };
}
