/**
 * OpenAI's Files API over the AI API's uploads (docs/ai/openai-compatibility.md, "Files"; decisions:
 * docs/decisions/openai-files.md). A file *is* an upload: POST /v1/files stores the form's file
 * exactly as a client of /v1/uploads would (start, parts, complete), so sizes, hashes, content
 * addressing, expiry and the sweep stay the uploads' rules; a completed upload made through
 * /v1/uploads is a file too. What is OpenAI's own here: the form, the file object, the listing and
 * the retry rules of a call the SDK may send twice.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import * as z from 'zod/mini';
import type { Principal } from '../../auth/principal.js';
import type { Engine, KvItem } from '../../engine/ports.js';
import { PlatformError } from '../../shared/errors.js';
import { settings } from '../../shared/settings.js';
import { onFirstUse } from '../../shared/validate.js';
import {
  completeUpload,
  deleteUpload,
  isMediaType,
  MAX_KEEP_SOURCE_HOURS,
  parseStartUpload,
  putPart,
  readUploadFile,
  readUploadFiles,
  startUpload,
  uploadContent,
  uploadWorkspace,
  type StartUpload,
  type UploadFile,
  type UploadPurpose,
} from '../../knowledge/uploads.js';
import { newCompatId, unixSeconds } from './ids.js';
import { fileListingKey, fileListingPartition, fileRetryKey } from './keys.js';
import { listPage, parseListQuery, type ListPage } from './http.js';
import { MAX_FILE_BYTES, parseFileForm, type SpooledFile } from './multipart.js';

export const FILE_PURPOSES = ['assistants', 'user_data'] as const satisfies readonly UploadPurpose[];
/** OpenAI's bounds of `expires_after[seconds]` (1 hour to 30 days); ours stop at the uploads' 7 days. */
export const MIN_EXPIRES_SECONDS = 3600;
export const MAX_EXPIRES_SECONDS = MAX_KEEP_SOURCE_HOURS * 3600;
/** How long a keyless files.create is found again by the SDK's retry of it (D14). */
export const RETRY_WINDOW_SECONDS = 600;
/** The form's fields besides `file` (the SDK flattens `expires_after` into these two). */
const FORM_FIELDS = ['purpose', 'expires_after[anchor]', 'expires_after[seconds]'] as const;
/** Media types by extension, for a part sent as `application/octet-stream` (processing sniffs the bytes anyway). */
const BY_EXTENSION: Record<string, string> = {
  pdf: 'application/pdf',
  docx: 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  md: 'text/markdown',
  markdown: 'text/markdown',
  txt: 'text/plain',
  html: 'text/html',
  htm: 'text/html',
  json: 'application/json',
  csv: 'text/csv',
};
/** A page scans at most this many listing entries (gone or unfinished files are skipped). */
const MAX_SCANNED = 1000;

/** OpenAI's FileObject (the SDK's `FileObject`), from an upload. */
export const fileObjectSchema = onFirstUse(() =>
  z.strictObject({
    id: z.string().check(z.describe('The file id: the upload’s (`file-` and 32 hex characters when this route made it).')),
    object: z.literal('file'),
    bytes: z.int().check(z.describe('Its size in bytes.')),
    created_at: z.int().check(z.describe('Unix seconds.')),
    filename: z.string(),
    purpose: z.enum(FILE_PURPOSES),
    status: z.enum(['uploaded', 'processed']).check(z.describe('`processed` once stored and checked (at once for files made here); `uploaded` while a large upload’s SHA-256 is still being checked.')),
    expires_at: z.int().check(z.describe('Unix seconds: then the file and its bytes go (at most 7 days after creation).')),
    status_details: z.null(),
  }),
);
export type FileObject = z.output<ReturnType<typeof fileObjectSchema>>;

export const fileListSchema = onFirstUse(() =>
  z.strictObject({
    object: z.literal('list'),
    data: z.array(fileObjectSchema()),
    first_id: z.nullable(z.string()),
    last_id: z.nullable(z.string()),
    has_more: z.boolean().check(z.describe('More files follow: ask again with `after` = `last_id`.')),
  }),
);

export const fileDeletedSchema = onFirstUse(() => z.strictObject({ id: z.string(), object: z.literal('file'), deleted: z.literal(true) }));

/** GET /v1/files's query, for the document (parseListQuery reads it). */
export const filesQuerySchema = onFirstUse(() =>
  z.strictObject({
    after: z.optional(z.string().check(z.minLength(1), z.maxLength(200), z.describe('A file id: the page starts after it (the previous page’s `last_id`).'))),
    before: z.optional(z.string().check(z.minLength(1), z.maxLength(200), z.describe('A file id: the page ends before it.'))),
    limit: z.optional(z.string().check(z.regex(/^\d{1,5}$/), z.describe('1 to 10,000 (default 20); a page holds at most 100, `has_more` tells.'))),
    order: z.optional(z.enum(['asc', 'desc']).check(z.describe('By creation time; default `desc`.'))),
    purpose: z.optional(z.string().check(z.maxLength(64), z.describe('Only files of this purpose.'))),
  }),
);

/** POST /v1/files's form, for the document (the form is read by multipart.ts). */
export const fileFormSchema = onFirstUse(() =>
  z.strictObject({
    file: z.string().check(z.describe('The file’s bytes (a file part, with its filename): 1 byte to 512 MiB locally; on AWS up to Lambda’s inline body (about 4.4 MiB), larger files through `/v1/uploads`.')),
    purpose: z.enum(FILE_PURPOSES),
    'expires_after[anchor]': z.optional(z.literal('created_at')),
    'expires_after[seconds]': z.optional(z.string().check(z.regex(/^\d{1,9}$/), z.describe('3600 to 604800 (7 days), rounded up to whole hours; default 604800.'))),
  }),
);

const noFile = (id: string) => new PlatformError('upload_not_found', `No file ${JSON.stringify(id.slice(0, 140))} in this workspace.`, 'file_id');

/** The upload as OpenAI's file object (only a completed or verifying upload is a file). */
export function fileView(file: UploadFile): FileObject {
  return {
    id: file.id,
    object: 'file',
    bytes: file.size,
    created_at: unixSeconds(file.created_at),
    filename: file.filename,
    purpose: file.purpose,
    status: file.status === 'completed' ? 'processed' : 'uploaded',
    expires_at: file.expires_at,
    status_details: null,
  };
}

const isFile = (file: UploadFile | undefined): file is UploadFile => file !== undefined && (file.status === 'completed' || file.status === 'verifying');

/** The caller's file `id`, or `404 upload_not_found` naming the file (unknown, expired, another workspace's, or an unfinished upload). */
async function readFile(engine: Engine, principal: Principal, id: string): Promise<UploadFile> {
  let file: UploadFile;
  try {
    file = await readUploadFile(engine, principal, id);
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'upload_not_found') throw noFile(id);
    throw error;
  }
  if (!isFile(file)) throw noFile(id);
  return file;
}

export const getFile = async (engine: Engine, principal: Principal, id: string): Promise<FileObject> => fileView(await readFile(engine, principal, id));

/** What the create call knows besides its body. */
export interface CreateFileCall {
  body: Readable;
  headers: Record<string, string>;
  /** The call's Idempotency-Key (or X-Operation-Id) when it sent one. */
  operationId: string | undefined;
  /** Set where the runtime carries bodies whole (Lambda): the largest it takes. */
  inlineBodyBytes: number | undefined;
}

/**
 * POST /v1/files: the form read (the file spooled with its SHA-256), then stored as an upload. The
 * file id: from the Idempotency-Key when one is sent (a retry names the same upload: the same file
 * answers it, another is `409 operation_id_reused`); else, for the SDK's retry of a keyless call
 * (`X-Stainless-Retry-Count` ≥ 1), the file this credential made of the same bytes, name and purpose
 * in the last 10 minutes; else a new one.
 */
export async function createFile(engine: Engine, principal: Principal, call: CreateFileCall): Promise<FileObject> {
  const maxFileBytes = Math.min(MAX_FILE_BYTES, call.inlineBodyBytes ?? Infinity);
  const overLimit = () =>
    call.inlineBodyBytes === undefined
      ? new PlatformError('request_too_large', `The file is over ${MAX_FILE_BYTES} bytes (512 MiB), OpenAI’s limit of files.create; send it through /v1/uploads, whose completed upload is a file.`, 'file')
      : new PlatformError('request_too_large', `On AWS a request carries at most ${call.inlineBodyBytes} bytes; send a larger file through /v1/uploads (its parts go straight to S3), whose completed upload is a file.`, 'file');
  const declared = call.headers['content-length'];
  if (call.inlineBodyBytes !== undefined && declared !== undefined && Number(declared) > call.inlineBodyBytes) throw overLimit();

  const form = await parseFileForm(call.body, call.headers['content-type'], { fields: FORM_FIELDS, fileField: 'file', maxFileBytes, tooLarge: overLimit }, principal.organizationId);
  const spool = form.file;
  try {
    const purpose = parsePurpose(form.fields.purpose);
    const keepHours = parseExpiresAfter(form.fields['expires_after[anchor]'], form.fields['expires_after[seconds]']);
    if (!spool) throw new PlatformError('invalid_body', 'The form has no file part: send the file as `file`.', 'file');
    const request = startRequest(spool, keepHours);

    let id: string;
    if (call.operationId !== undefined) id = keyedFileId(call.operationId);
    else {
      const again = Number(call.headers['x-stainless-retry-count'] ?? '0') >= 1 ? await retriedFile(engine, principal, request, purpose) : undefined;
      if (again) return fileView(again);
      id = newCompatId('file', engine.clock.now());
    }
    const file = await store(engine, principal, id, request, purpose, spool);
    if (call.operationId === undefined) await rememberForRetry(engine, principal, file);
    return fileView(file);
  } finally {
    await spool?.remove();
  }
}

function parsePurpose(value: string | undefined): UploadPurpose {
  if (value === undefined) throw new PlatformError('invalid_body', 'The form needs `purpose`: `assistants` or `user_data`.', 'purpose');
  if (!(FILE_PURPOSES as readonly string[]).includes(value)) {
    throw new PlatformError('invalid_body', `\`purpose\` must be \`assistants\` or \`user_data\` (files for ${JSON.stringify(value.slice(0, 32))} are not kept here).`, 'purpose');
  }
  return value as UploadPurpose;
}

/** `expires_after` as hours the upload is kept: 3600 to 604800 seconds, rounded up to hours; absent, 7 days. */
function parseExpiresAfter(anchor: string | undefined, seconds: string | undefined): number {
  if (anchor === undefined && seconds === undefined) return MAX_KEEP_SOURCE_HOURS;
  if (anchor !== 'created_at') throw new PlatformError('invalid_body', '`expires_after[anchor]` must be `created_at`.', 'expires_after[anchor]');
  const n = seconds !== undefined && /^\d{1,9}$/.test(seconds) ? Number(seconds) : NaN;
  if (!(n >= MIN_EXPIRES_SECONDS && n <= MAX_EXPIRES_SECONDS)) {
    throw new PlatformError('invalid_body', `\`expires_after[seconds]\` must be a whole number from ${MIN_EXPIRES_SECONDS} to ${MAX_EXPIRES_SECONDS} (files are kept at most 7 days here).`, 'expires_after[seconds]');
  }
  return Math.ceil(n / 3600);
}

/** The upload's start, as a /v1/uploads client would announce the spooled file; the uploads' own checks apply. */
function startRequest(spool: SpooledFile, keepHours: number): StartUpload {
  if (spool.size === 0) throw new PlatformError('invalid_body', 'The file is empty; a file holds at least one byte.', 'file');
  // The name is data only (never part of a key): the last path segment, as browsers send it.
  const filename = (spool.filename ?? '').split(/[/\\]/).pop() || 'upload.bin';
  const extension = /\.([A-Za-z0-9]{1,10})$/.exec(filename)?.[1].toLowerCase();
  const sent = spool.mimeType.toLowerCase();
  const content_type = sent !== 'application/octet-stream' && isMediaType(sent) ? sent : (extension && BY_EXTENSION[extension]) || 'application/octet-stream';
  try {
    return parseStartUpload({ filename, content_type, size: spool.size, sha256: spool.sha256, keep_source_hours: keepHours });
  } catch (error) {
    // The only field the form decides beyond those checked above: the filename.
    if (error instanceof PlatformError) throw new PlatformError('invalid_body', `The file’s name must be 1 to 255 characters of well-formed Unicode with no control characters.`, 'file');
    throw error;
  }
}

/** The file id an Idempotency-Key names: a retry with the key names the same upload. */
export const keyedFileId = (key: string): string => `file-${createHash('sha256').update(`oai-file\n${key}`).digest('hex').slice(0, 32)}`;

/**
 * Stores the spooled file as the upload `id`: started, each part still missing sent from the spool,
 * completed. An upload of that id with this file already (a retry) is answered as it is, finished
 * first if an earlier attempt stopped half-way.
 */
async function store(engine: Engine, principal: Principal, id: string, request: StartUpload, purpose: UploadPurpose, spool: SpooledFile): Promise<UploadFile> {
  let started;
  try {
    started = await startUpload(engine, principal, id, request, { route: '' }, { purpose });
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'operation_id_reused') {
      throw new PlatformError('operation_id_reused', 'This Idempotency-Key made another file (other bytes, name, purpose or expiry); use a new key for this one.', 'idempotency-key');
    }
    throw error;
  }
  const { upload } = started;
  if (upload.status === 'pending') {
    try {
      for (const part of upload.parts) {
        const start = (part.number - 1) * upload.part_size;
        await putPart(engine, principal, id, String(part.number), { stream: createReadStream(spool.path, { start, end: start + part.size - 1 }), size: part.size });
      }
      await completeUpload(engine, principal, id, settings().uploadCheckWithinMs);
    } catch (error) {
      // A concurrent retry with the same key completed it meanwhile: that is this file.
      if (!(error instanceof PlatformError && error.code === 'upload_completed')) throw error;
    }
  }
  return readUploadFile(engine, principal, id);
}

/** D14: the file a keyless call of this credential made of the same bytes, name and purpose, if it is still there. */
async function retriedFile(engine: Engine, principal: Principal, request: StartUpload, purpose: UploadPurpose): Promise<UploadFile | undefined> {
  const workspace = await uploadWorkspace(engine, principal);
  const kept = await engine.kv.get(fileRetryKey(principal.organizationId, workspace, principal.credentialId, request.sha256));
  if (!kept || Number(kept.expires_at) <= Math.floor(engine.clock.now() / 1000)) return undefined;
  if (kept.filename !== request.filename || kept.purpose !== purpose || kept.bytes !== request.size) return undefined;
  const [file] = await readUploadFiles(engine, principal, [String(kept.file_id)]);
  return isFile(file) ? file : undefined;
}

async function rememberForRetry(engine: Engine, principal: Principal, file: UploadFile): Promise<void> {
  const workspace = await uploadWorkspace(engine, principal);
  const item: KvItem = {
    ...fileRetryKey(principal.organizationId, workspace, principal.credentialId, file.sha256),
    file_id: file.id,
    filename: file.filename,
    purpose: file.purpose,
    bytes: file.size,
    expires_at: Math.floor(engine.clock.now() / 1000) + RETRY_WINDOW_SECONDS,
  };
  await engine.kv.put(item);
}

/**
 * GET /v1/files: the workspace's files, newest first (or `order=asc`), `purpose` to narrow; pages of
 * at most 100 (OpenAI's `limit` up to 10,000 is taken, the page says `has_more`), `after`/`before` a file id.
 */
export async function listFiles(engine: Engine, principal: Principal, query: Record<string, string | undefined>): Promise<ListPage<FileObject>> {
  const limitText = query.limit;
  // OpenAI takes up to 10,000: a page here holds at most 100, and has_more says there is more.
  const clamped = limitText !== undefined && /^\d{1,5}$/.test(limitText) && Number(limitText) > 100 && Number(limitText) <= 10_000 ? { ...query, limit: '100' } : query;
  const q = parseListQuery(clamped, ['purpose']);
  if (q.after !== undefined && q.before !== undefined) throw new PlatformError('invalid_body', 'Send `after` or `before`, not both.', 'before');
  const purpose = q.extra.purpose;
  const org = principal.organizationId;
  const workspace = await uploadWorkspace(engine, principal);
  const cursorId = q.after ?? q.before;
  let bound: string | undefined;
  if (cursorId !== undefined) {
    const [file] = await readUploadFiles(engine, principal, [cursorId]);
    if (!file) throw new PlatformError('invalid_body', `\`${q.after !== undefined ? 'after' : 'before'}\` names no file in this workspace.`, q.after !== undefined ? 'after' : 'before');
    bound = fileListingKey(org, workspace, unixSeconds(file.created_at), file.id).sk;
  }
  // `after` continues in the page's order; `before` reads back from the bound in the other and turns the page round.
  const descending = (q.order === 'desc') !== (q.before !== undefined);
  const sk = bound === undefined ? undefined : descending ? { lt: bound } : { gt: bound };
  const now = Math.floor(engine.clock.now() / 1000);
  const found: FileObject[] = [];
  let cursor: string | undefined;
  let scanned = 0;
  do {
    const page = await engine.kv.query({ pk: fileListingPartition(org, workspace), sk, descending, limit: Math.min(100, q.limit + 1 - found.length + 10), cursor });
    cursor = page.cursor;
    scanned += page.items.length;
    const entries = page.items.filter((e) => Number(e.expires_at) > now && (purpose === undefined || e.purpose === purpose));
    const files = await readUploadFiles(engine, principal, entries.map((e) => String(e.sk).slice(String(e.sk).indexOf('#') + 1)));
    entries.forEach((entry, i) => {
      const file = files[i];
      // An id started again after its upload expired has a newer entry: the older one is stale.
      if (isFile(file) && fileListingKey(org, workspace, unixSeconds(file.created_at), file.id).sk === entry.sk) found.push(fileView(file));
    });
  } while (found.length <= q.limit && cursor !== undefined && scanned < MAX_SCANNED);
  const hasMore = found.length > q.limit || (cursor !== undefined && found.length > 0);
  const data = found.slice(0, q.limit);
  if (q.before !== undefined) data.reverse();
  return listPage(data, hasMore);
}

/** GET /v1/files/{id}/content: the bytes as stored, or (Lambda, over its inline body) a URL of the store. */
export async function fileContent(engine: Engine, principal: Principal, id: string, inlineBodyBytes: number | undefined) {
  const file = await readFile(engine, principal, id);
  if (file.status !== 'completed') throw new PlatformError('upload_incomplete', `File "${id}" is still being checked; read it again once its status is \`processed\`.`, 'file_id');
  try {
    return await uploadContent(engine, principal, id, inlineBodyBytes);
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'upload_not_found') throw noFile(id);
    throw error;
  }
}

/** DELETE /v1/files/{id}: the file and its listing entry (collection items made from it keep their chunks). */
export async function deleteFile(engine: Engine, principal: Principal, id: string): Promise<{ id: string; object: 'file'; deleted: true }> {
  await readFile(engine, principal, id);
  try {
    await deleteUpload(engine, principal, id);
  } catch (error) {
    if (error instanceof PlatformError && error.code === 'upload_not_found') throw noFile(id);
    throw error;
  }
  return { id, object: 'file', deleted: true };
}
