/**
 * Uploads on the AI API (docs/ai/uploads.md; decisions: docs/decisions/ai-uploads.md): a file of up to
 * 5 GiB announced with its size and SHA-256, sent in parts, checked whole, and kept `keep_source_hours`
 * for what the knowledge routes make of it.
 *
 * The bytes go through the blob port's multipart upload, as the Data API's files do: the parts are the
 * store's (listParts tells which arrived, those sent straight to S3 through partUrl included), and
 * completeMultipart joins them and keeps the result only if its size and SHA-256 are the announced
 * ones. A kept file is content-addressed per workspace (upload-keys.ts: the stored file's item names
 * the generation holding the bytes): a second upload of the same bytes keeps no second copy, and the
 * stored file lives as long as the latest upload naming it. The sweep (sweepExpiredUploads) removes
 * what expired: an unfinished upload's parts, a stored file's bytes.
 */
import { randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import * as z from 'zod/mini';
import type { Principal } from '../auth/principal.js';
import type { Engine, KvItem, KvWrite } from '../engine/ports.js';
import { BlobMismatchError, ConditionFailedError, InvalidPartError, TransactionCanceledError, UploadNotFoundError } from '../engine/errors.js';
import { LIMITS } from '../engine/limits.js';
import { checkReplay, type OperationContext } from '../ai/operations.js';
import { PlatformError, type ErrorCode } from '../shared/errors.js';
import { holdMs } from '../shared/hold-margin.js';
import type { OperationCall } from '../shared/operations.js';
import { log } from '../shared/log.js';
import { onFirstUse, parseBody } from '../shared/validate.js';
import { vectorWorkspace } from '../vector/databases.js';
import { wellFormed } from '../vector/passages.js';
import { dueBefore, fileListingKey, storedFileKey, sweepKey, SWEEP_PARTITION, uploadBytesKey, uploadKey } from './upload-keys.js';

const MIB = 1024 * 1024;
/** Spec 8 (as the Data API's multipart files): up to 5 GiB, 10,000 parts of 5 to 100 MiB (the last may be smaller). */
export const MAX_UPLOAD_BYTES = 5 * 1024 * MIB;
export const MAX_UPLOAD_PARTS = LIMITS.multipartMaxParts;
export const MIN_PART_BYTES = LIMITS.multipartMinPartBytes;
export const MAX_PART_BYTES = 100 * MIB;
/** Spec 4.8: sources are kept 1 to 168 hours; 24 when the start names none. */
export const DEFAULT_KEEP_SOURCE_HOURS = 24;
export const MAX_KEEP_SOURCE_HOURS = 168;
/** How long a presigned part URL works: long enough for a 100 MiB part on a slow link; GET hands out fresh ones. */
export const PART_URL_SECONDS = 3600;
/** A complete that died mid-way holds the upload this long before another complete may take it over. */
const COMPLETING_SECONDS = 15 * 60;
/**
 * An upload verifying this long has no check coming (its complete died before queuing it, or the check
 * was dead-lettered): a complete queues one anew. Past the consumer's 600 s timeout and the message's
 * delay, so a check still running is rarely doubled (a double keeps the same checked bytes anyway).
 */
const RECHECK_AFTER_SECONDS = 15 * 60;
/** What one start call sweeps on its way (docs/decisions/ai-uploads.md, "Expiry"). */
const SWEEP_PER_START = 10;
/** An upload id is an operation id (spec 4.1, 8). */
const UPLOAD_ID = /^[A-Za-z0-9_-]{8,128}$/;
const SHA256 = /^[0-9a-f]{64}$/;
/** type/subtype with optional parameters; no control characters. */
const CONTENT_TYPE = /^[A-Za-z0-9!#$&^_.+-]{1,127}\/[A-Za-z0-9!#$&^_.+-]{1,127}(\s*;[\x20-\x7e]*)?$/;
/** Whether a start would take `type` as its `content_type` (POST /v1/files picks one from the form part). */
export const isMediaType = (type: string): boolean => CONTENT_TYPE.test(type);
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * What an upload is for, as OpenAI's Files API names it (docs/ai/openai-compatibility.md, "Files"): a
 * file made by POST /v1/files keeps the form's; an upload started here is `assistants`.
 */
export type UploadPurpose = 'assistants' | 'user_data';

/** `verifying`: joined, its SHA-256 being checked outside the complete call; `failed`: the check found other bytes (docs/decisions/upload-checks.md). */
export type UploadStatus = 'pending' | 'verifying' | 'completed' | 'failed';

/** The queue of checks a complete call could not finish in time (lambdas/consumers/upload-checks.ts). */
export const UPLOAD_CHECKS_QUEUE = 'upload-checks';
/** What the check of one upload needs: its organization, id, and the multipart upload that was joined. */
export interface UploadCheckMessage {
  org: string;
  id: string;
  engine_upload_id: string;
}
/**
 * How long after the complete call's deadline its check's message is received: time for the call to stop
 * its own check, so the two rarely read the same bytes at once (if they do, both keep the same checked bytes).
 */
const CHECK_HANDOVER_SECONDS = 2;
/** Rough read rate of a check, for the 202's `poll_after_seconds` (one Lambda stream reads S3 at 80 to 200 MB/s). */
const CHECK_BYTES_PER_SECOND = 100 * 1024 * 1024;

/** Where the answer tells the client to send each part. */
export type PartDestination =
  /** The AI API's own part route, under this base URL (the local server: it streams bodies). */
  | { route: string }
  /** Presigned blob-store URLs (a buffered runtime: Lambda behind API Gateway). */
  | { presigned: true };

/** An upload as the routes answer it (docs/ai/uploads.md, "The upload"): GET's, a start's, a 200 complete's. */
export const uploadViewSchema = onFirstUse(() =>
  z.strictObject({
    id: z.string().check(z.describe('The upload id: the start call\'s `X-Operation-Id`.')),
    object: z.literal('upload'),
    filename: z.string(),
    content_type: z.string(),
    size: z.int().check(z.describe('Bytes, as announced.')),
    sha256: z.string().check(z.describe('The SHA-256 announced, 64 lowercase hex characters.')),
    status: z.enum(['pending', 'verifying', 'completed', 'failed']).check(
      z.describe('`pending` until complete; `verifying` while its SHA-256 is checked after a `202` complete; `completed` once checked (usable from then on); `failed` when that check found other bytes (`error`).'),
    ),
    part_size: z.int().check(z.describe('Bytes of every part but the last, which holds the rest.')),
    part_count: z.int(),
    parts_received: z.array(z.int()).check(z.describe('The numbers of the parts that arrived whole, ascending.')),
    keep_source_hours: z.int(),
    created_at: z.iso.datetime(),
    expires_at: z.iso.datetime().check(z.describe('From then on the upload is `404 upload_not_found` and its id may start another.')),
    completed_at: z.nullable(z.iso.datetime()),
    error: z.optional(
      z.strictObject({ code: z.enum(['hash_mismatch', 'upload_incomplete']), message: z.string() }).check(z.describe('A `failed` upload\'s reason; absent otherwise.')),
    ),
    parts: z
      .array(
        z.strictObject({
          number: z.int(),
          url: z.string().check(z.describe('Where to send it: the AI API\'s part route locally; a presigned S3 URL on AWS (a plain PUT, no Authorization header).')),
          method: z.literal('PUT'),
          size: z.int().check(z.describe('Exactly this many bytes.')),
        }),
      )
      .check(z.describe('The parts still to send, each with where it goes; empty once completed.')),
    part_urls_expire_at: z.nullable(z.iso.datetime()).check(z.describe('When the part URLs stop working at the latest (presigned ones); null where they do not expire.')),
  }),
);
export type UploadView = z.output<ReturnType<typeof uploadViewSchema>>;
export type PartTarget = UploadView['parts'][number];

/** A complete's `202`: the upload `verifying`, with where to look and when. */
export const uploadVerifyingSchema = onFirstUse(() =>
  z.strictObject({
    ...uploadViewSchema().shape,
    status: z.literal('verifying'),
    status_url: z.string().check(z.describe('`/v1/uploads/{id}`: read it until `status` is no longer `verifying`.')),
    poll_after_seconds: z.int().check(z.minimum(1), z.maximum(60)),
  }),
);

/** A part's answer (its etag also in `ETag`). */
export const partAnswerSchema = onFirstUse(() => z.strictObject({ part_number: z.int(), size: z.int(), etag: z.string() }));

export const startUploadSchema = onFirstUse(() =>
  z.strictObject({
    filename: z.string().check(
      z.minLength(1),
      z.maxLength(255),
      // A lone surrogate is stored as U+FFFD by DynamoDB and S3: the upload (and its item) would name another file there.
      z.refine((s) => !CONTROL.test(s) && wellFormed(s), 'filename must be well-formed Unicode with no control characters'),
      z.describe('The file\'s name, 1 to 255 characters.'),
    ),
    content_type: z.string().check(z.regex(CONTENT_TYPE, 'content_type must be a media type such as application/pdf'), z.describe('Its media type.')),
    size: z.number().check(z.int(), z.minimum(1), z.maximum(MAX_UPLOAD_BYTES), z.describe('Its size in bytes, 1 to 5 GiB.')),
    sha256: z.string().check(z.regex(SHA256, 'sha256 must be 64 lowercase hex characters'), z.describe('The SHA-256 of its bytes.')),
    keep_source_hours: z.optional(
      z.number().check(z.int(), z.minimum(1), z.maximum(MAX_KEEP_SOURCE_HOURS), z.describe('Hours the upload and its bytes are kept, 1 to 168 (default 24).')),
    ),
  }),
);
export type StartUpload = z.output<ReturnType<typeof startUploadSchema>>;

/** POST /v1/uploads's body: unknown fields are `unsupported_field`, bad values `invalid_body` naming the field. */
export const parseStartUpload = (body: unknown): StartUpload => parseBody(startUploadSchema(), body, { unknownField: 'unsupported_field' });

/** POST /v1/uploads/{id}/complete takes `{}` (or no body): the parts are the ones the store holds. */
// JSON null is no body, as an absent one is (the parse reads `body ?? {}`).
export const completeUploadSchema = onFirstUse(() => z.nullable(z.strictObject({})));
export const parseCompleteUpload = (body: unknown): void => void parseBody(completeUploadSchema(), body ?? {}, { unknownField: 'unsupported_field' });

/**
 * The platform's part size: the smallest the store allows that keeps the count within 10,000 (whole
 * MiB), so a resumed client loses at most one small part; a file under it is one part.
 */
export function partSizeFor(size: number): number {
  const perPart = Math.max(MIN_PART_BYTES, Math.ceil(size / MAX_UPLOAD_PARTS / MIB) * MIB);
  return Math.min(size, perPart);
}

const partBytes = (upload: { size: number; part_size: number; part_count: number }, n: number) =>
  n < upload.part_count ? upload.part_size : upload.size - (upload.part_count - 1) * upload.part_size;

const notFound = (id: string) => new PlatformError('upload_not_found', `No upload "${id}" in this workspace.`, 'id');
const iso = (epochSeconds: number) => new Date(epochSeconds * 1000).toISOString();
const nowSeconds = (engine: Engine) => Math.floor(engine.clock.now() / 1000);

/** The workspace an upload belongs to: the key's application's, else the organization's default (as vectors). */
async function workspaceOf(engine: Engine, principal: Principal): Promise<string> {
  // An organization with no workspace yet keeps its uploads under the organization itself.
  return (await vectorWorkspace(engine, principal)) ?? '-';
}
/** The workspace part of the keys an upload's records live under (the Files listing's too). */
export const uploadWorkspace = workspaceOf;

/** A stored upload item, read through its invariants. */
interface Upload {
  item: KvItem;
  id: string;
  workspace: string;
  filename: string;
  content_type: string;
  size: number;
  sha256: string;
  part_size: number;
  part_count: number;
  keep_source_hours: number;
  status: 'pending' | 'completing' | 'verifying' | 'completed' | 'failed';
  engine_upload_id: string;
  gen: string;
  created_at: string;
  expires_at: number;
  completed_at: string | null;
  completing_until: number;
  /** When it became verifying (epoch seconds); 0 for one from before this was kept. */
  verifying_since: number;
  error: UploadView['error'];
  purpose: UploadPurpose;
}

function asUpload(item: KvItem): Upload {
  return {
    item,
    id: String(item.sk),
    workspace: String(item.workspace_id),
    filename: String(item.filename),
    content_type: String(item.content_type),
    size: Number(item.size),
    sha256: String(item.sha256),
    part_size: Number(item.part_size),
    part_count: Number(item.part_count),
    keep_source_hours: Number(item.keep_source_hours),
    status: item.status as Upload['status'],
    engine_upload_id: String(item.engine_upload_id),
    gen: String(item.gen),
    created_at: String(item.created_at),
    expires_at: Number(item.expires_at),
    completed_at: typeof item.completed_at === 'string' ? item.completed_at : null,
    completing_until: Number(item.completing_until ?? 0),
    verifying_since: Number(item.verifying_since ?? 0),
    error: typeof item.error_code === 'string' ? { code: item.error_code as NonNullable<UploadView['error']>['code'], message: String(item.error_message ?? '') } : undefined,
    purpose: item.purpose === 'user_data' ? 'user_data' : 'assistants',
  };
}

/** The live upload `id` of the caller's workspace, or 404 (unknown, expired, another workspace's or organization's). */
async function readUpload(engine: Engine, principal: Principal, id: string): Promise<Upload> {
  if (!UPLOAD_ID.test(id)) throw notFound(id);
  const item = await engine.kv.get(uploadKey(principal.organizationId, id));
  if (!item || Number(item.expires_at) <= nowSeconds(engine)) throw notFound(id);
  const upload = asUpload(item);
  if (upload.workspace !== (await workspaceOf(engine, principal))) throw notFound(id);
  return upload;
}

const bytesKeyOf = (org: string, upload: Upload) => uploadBytesKey(org, upload.workspace, upload.sha256, upload.gen);
const newGeneration = () => randomBytes(10).toString('hex');

/**
 * POST /v1/uploads: opens the upload named `id` (the call's operation id). The same id with the same
 * file answers that upload as it is now (`created: false`); with another file, or from another
 * workspace, `409 operation_id_reused`. `purpose` (POST /v1/files) is kept on it, and is part of
 * "the same file" when given. Every upload gets its Files listing entry in the same transaction
 * (keys.ts `aifile`): a completed one is a file (docs/ai/openai-compatibility.md).
 */
export async function startUpload(
  engine: Engine,
  principal: Principal,
  id: string,
  request: StartUpload,
  destination: PartDestination,
  options: { purpose?: UploadPurpose } = {},
): Promise<{ upload: UploadView; created: boolean }> {
  const org = principal.organizationId;
  const workspace = await workspaceOf(engine, principal);
  await sweepExpiredUploads(engine, SWEEP_PER_START).catch((error) => log.warn('upload sweep failed; the next one takes it up', { error: String(error) }));
  const key = uploadKey(org, id);
  for (;;) {
    const now = nowSeconds(engine);
    const existing = await engine.kv.get(key);
    if (existing && Number(existing.expires_at) > now) {
      const upload = asUpload(existing);
      const same =
        upload.workspace === workspace &&
        upload.filename === request.filename &&
        upload.content_type === request.content_type &&
        upload.size === request.size &&
        upload.sha256 === request.sha256 &&
        (request.keep_source_hours === undefined || request.keep_source_hours === upload.keep_source_hours) &&
        (options.purpose === undefined || options.purpose === upload.purpose);
      if (!same) throw new PlatformError('operation_id_reused', 'This X-Operation-Id names another upload; use a new id for this file.');
      // A failed upload's bytes were discarded: its start, again, opens it anew for the right bytes.
      if (upload.status !== 'failed') return { upload: await view(engine, org, upload, destination), created: false };
    }
    // A new upload (or the id of one that expired, whose leftovers its sweep entry removes).
    const gen = newGeneration();
    const bytes = uploadBytesKey(org, workspace, request.sha256, gen);
    const engineUploadId = await engine.blobs.createMultipart(bytes);
    const keep = request.keep_source_hours ?? DEFAULT_KEEP_SOURCE_HOURS;
    const expiresAt = now + keep * 3600;
    const partSize = partSizeFor(request.size);
    const item: KvItem = {
      ...key,
      workspace_id: workspace,
      application_id: principal.applicationId,
      filename: request.filename,
      content_type: request.content_type,
      size: request.size,
      sha256: request.sha256,
      part_size: partSize,
      part_count: Math.ceil(request.size / partSize),
      keep_source_hours: keep,
      status: 'pending',
      engine_upload_id: engineUploadId,
      gen,
      created_at: iso(now),
      expires_at: expiresAt,
      ...(options.purpose ? { purpose: options.purpose } : {}),
    };
    try {
      await transact(engine, [
        { put: item, condition: existing ? { ifEquals: { engine_upload_id: existing.engine_upload_id ?? null } } : { ifAbsent: true } },
        // Listed from its start (the listing shows completed ones only): never a file without its entry.
        { put: { ...fileListingKey(org, workspace, now, id), purpose: options.purpose ?? 'assistants', expires_at: expiresAt } },
        // The parts go when the upload does, whatever became of it.
        { put: { ...sweepKey(expiresAt, `parts#${org}#${id}#${gen}`), blob_key: bytes, engine_upload_id: engineUploadId } },
      ]);
    } catch (error) {
      await engine.blobs.abortMultipart(bytes, engineUploadId).catch(() => undefined);
      if (error instanceof ConditionFailedError) continue; // started meanwhile by a retry of this call: answer that one
      throw error;
    }
    return { upload: await view(engine, org, asUpload(item), destination), created: true };
  }
}

/** GET /v1/uploads/{id}: its status, the parts received, and where the missing ones go (fresh URLs). */
export async function getUpload(engine: Engine, principal: Principal, id: string, destination: PartDestination): Promise<UploadView> {
  return view(engine, principal.organizationId, await readUpload(engine, principal, id), destination);
}

/**
 * PUT /v1/uploads/{id}/parts/{n}: one part's bytes, streamed to the store; exactly the part's size
 * (every part `part_size` bytes but the last). Sending a number again replaces the part.
 */
export async function putPart(
  engine: Engine,
  principal: Principal,
  id: string,
  n: string,
  body: { stream: Readable; size: number | undefined },
): Promise<{ part_number: number; size: number; etag: string }> {
  const upload = await readUpload(engine, principal, id);
  const number = /^[1-9]\d{0,4}$/.test(n) ? Number(n) : NaN;
  if (!(number >= 1 && number <= upload.part_count)) {
    throw new PlatformError('invalid_part', `This upload has parts 1 to ${upload.part_count}.`, 'n');
  }
  if (body.size === undefined) throw new PlatformError('length_required', 'Send the part with a Content-Length header.');
  const expected = partBytes(upload, number);
  if (body.size !== expected) throw new PlatformError('invalid_part', `Part ${number} is ${expected} bytes, not ${body.size}.`, 'n');
  if (upload.status !== 'pending') throw completedAlready(upload);
  try {
    const part = await engine.blobs.uploadPart(bytesKeyOf(principal.organizationId, upload), upload.engine_upload_id, number, body.stream, expected);
    return { part_number: number, size: part.size, etag: part.etag };
  } catch (error) {
    if (error instanceof BlobMismatchError) throw new PlatformError('invalid_part', `${error.actual.size} bytes arrived, not the ${expected} of part ${number}; the part was not kept.`, 'n');
    // Completed (or swept) while the bytes streamed.
    if (error instanceof UploadNotFoundError) throw await gone(engine, principal, id);
    throw error;
  }
}

const completedAlready = (upload: Upload) =>
  upload.status === 'completed'
    ? new PlatformError('upload_completed', `Upload "${upload.id}" is completed; its parts can no longer change.`, 'id')
    : upload.status === 'failed'
      ? new PlatformError('upload_incomplete', `Upload "${upload.id}" failed its check (${upload.error?.code}); start it again (POST /v1/uploads with the same id and file) and send every part.`, 'id')
      : new PlatformError('operation_in_progress', `Upload "${upload.id}" is being completed.`, 'id');

/** A failed upload's complete answers its failure, as the complete that found it would have. */
const failure = (upload: Upload) => new PlatformError((upload.error?.code ?? 'hash_mismatch') as ErrorCode, upload.error?.message ?? 'The bytes were not the announced ones.', upload.error?.code === 'upload_incomplete' ? 'parts_received' : 'sha256');

/** Whether the stored upload is still in the state `claimed` describes (every field equal). */
const holds = (item: KvItem | undefined, claimed: Record<string, string | number>) => item !== undefined && Object.entries(claimed).every(([k, v]) => item[k] === v);

async function gone(engine: Engine, principal: Principal, id: string): Promise<PlatformError> {
  return completedAlready(await readUpload(engine, principal, id));
}

/** A complete's answer: `200` the upload, or `202` while its check goes on outside the call (`verifying`). */
export interface CompleteAnswer extends UploadView {
  /** 202 only: where to look, and when. */
  status_url?: string;
  poll_after_seconds?: number;
}

/**
 * POST /v1/uploads/{id}/complete: every part there (else `409 upload_incomplete`, naming the missing
 * ones), joined, and checked against the announced size and SHA-256. The check reads the whole file
 * (on AWS back from S3), so the call waits for it only `checkWithinMs` (UPLOAD_CHECK_WITHIN_MS): done
 * by then, it answers as always (`200 completed`; a mismatch `400 hash_mismatch`, the bytes discarded
 * and the upload pending again with no parts); else the upload is `verifying` and the check's message
 * (sent before the check began) finishes it (checkJoinedUpload). A completed upload answers as it is;
 * a verifying one too (`202`); a failed one its failure.
 */
export async function completeUpload(engine: Engine, principal: Principal, id: string, checkWithinMs: number): Promise<CompleteAnswer> {
  const org = principal.organizationId;
  let upload = await readUpload(engine, principal, id);
  if (upload.status === 'completed') return view(engine, org, upload, { route: '' });
  if (upload.status === 'verifying') {
    await recheckIfStale(engine, org, upload);
    return stillChecking(await view(engine, org, upload, { route: '' }));
  }
  if (upload.status === 'failed') throw failure(upload);
  const now = nowSeconds(engine);
  if (upload.status === 'completing' && upload.completing_until > now) throw completedAlready(upload);

  const parts = await receivedParts(engine, org, upload);
  const missing: number[] = [];
  for (let n = 1; n <= upload.part_count; n++) {
    const part = parts.get(n);
    if (!part || part.size !== partBytes(upload, n)) missing.push(n);
  }
  if (missing.length) {
    const shown = missing.slice(0, 20).join(', ') + (missing.length > 20 ? `, … (${missing.length} in all)` : '');
    throw new PlatformError('upload_incomplete', `Parts still to send: ${shown}.`, 'parts_received');
  }

  // Claim it: of two completes one goes on; a complete that died holds it COMPLETING_SECONDS.
  const claim = { status: 'completing', completing_until: now + COMPLETING_SECONDS };
  try {
    await engine.kv.update({
      key: uploadKey(org, id),
      set: claim,
      // A pending upload has no completing_until; a stale claim is taken over only as it was read.
      condition: { ifEquals: { status: upload.status, engine_upload_id: upload.engine_upload_id, ...(upload.status === 'completing' ? { completing_until: upload.completing_until } : {}) } },
    });
  } catch (error) {
    if (error instanceof ConditionFailedError) throw completedAlready({ ...upload, status: 'completing' });
    throw error;
  }
  let claimed: Record<string, string | number> = { status: 'completing', engine_upload_id: upload.engine_upload_id, completing_until: claim.completing_until };
  upload = { ...upload, status: 'completing' };

  const bytes = bytesKeyOf(org, upload);
  try {
    // Cheap on every store: S3 joins the parts itself, locally the part files are only listed.
    await engine.blobs.joinMultipart(bytes, upload.engine_upload_id, [...parts.values()].map((p) => ({ partNumber: p.partNumber, etag: p.etag })));
  } catch (error) {
    if (error instanceof UploadNotFoundError) {
      // The store kept nothing: start the parts over under a fresh multipart upload.
      await reopen(engine, org, upload, claimed);
      throw lostParts();
    }
    // The store kept the upload open (a part replaced meanwhile, a failure): let it be completed again.
    await engine.kv.update({ key: uploadKey(org, id), set: { status: 'pending' }, remove: ['completing_until'], condition: { ifEquals: claimed } }).catch(() => undefined);
    if (error instanceof InvalidPartError) throw new PlatformError('upload_incomplete', 'A part changed while the upload was being completed; complete it again.', 'parts_received');
    throw error;
  }

  // Joined: from here the check may finish elsewhere, so the upload says so before it starts.
  try {
    await engine.kv.update({ key: uploadKey(org, id), set: { status: 'verifying', verifying_since: nowSeconds(engine) }, remove: ['completing_until'], condition: { ifEquals: claimed } });
  } catch (error) {
    if (error instanceof ConditionFailedError) throw completedAlready(asUpload((await engine.kv.get(uploadKey(org, id))) ?? upload.item));
    throw error;
  }
  claimed = { status: 'verifying', engine_upload_id: upload.engine_upload_id };
  upload = { ...upload, status: 'verifying' };
  const message: UploadCheckMessage = { org, id, engine_upload_id: upload.engine_upload_id };
  let handedOver = true;
  try {
    await engine.queue.send(UPLOAD_CHECKS_QUEUE, JSON.stringify(message), { delaySeconds: Math.min(900, Math.ceil(checkWithinMs / 1000) + CHECK_HANDOVER_SECONDS), group: org });
  } catch (error) {
    // Nobody else would finish it: this call checks to the end, however long that takes.
    log.warn('upload check not queued; the complete call checks it whole', { upload: id, error: String(error) });
    handedOver = false;
  }

  const deadline = new AbortController();
  const timer = handedOver ? setTimeout(() => deadline.abort(new CheckHandedOver()), checkWithinMs) : undefined;
  let checked: Checked;
  try {
    checked = await checkAndKeep(engine, org, upload, claimed, deadline.signal);
  } catch (error) {
    if (!handedOver) throw error;
    // Past the deadline, or failed here: the queued check takes it from where the store left it.
    if (!(error instanceof CheckHandedOver)) log.warn('upload check failed in the complete call; the queued check takes it over', { upload: id, error: String(error) });
    return stillChecking(await view(engine, org, upload, { route: '' }));
  } finally {
    clearTimeout(timer);
  }
  if ('completed' in checked) return view(engine, org, checked.completed, { route: '' });
  // Wrong bytes, or bytes lost: discarded, and the upload pending again so the right ones can be sent.
  await reopen(engine, org, upload, claimed);
  if ('lost' in checked) throw lostParts();
  throw new PlatformError('hash_mismatch', mismatchMessage(upload, checked.mismatch), 'sha256');
}

/**
 * A complete of an upload verifying RECHECK_AFTER_SECONDS or more: its check's message was never sent
 * (the complete died between its `verifying` write and the send) or was dead-lettered, and nothing
 * else would check it before it expires. One complete (the one whose write of `verifying_since` wins)
 * queues the check anew; a send that fails is left to the next complete.
 */
async function recheckIfStale(engine: Engine, org: string, upload: Upload): Promise<void> {
  const now = nowSeconds(engine);
  if (now - upload.verifying_since < RECHECK_AFTER_SECONDS) return;
  try {
    await engine.kv.update({
      key: uploadKey(org, upload.id),
      set: { verifying_since: now },
      // One kept before verifying_since was has none to compare: two completes at once may both queue (a double check is harmless).
      condition: { ifEquals: { status: 'verifying', engine_upload_id: upload.engine_upload_id, ...(upload.item.verifying_since === undefined ? {} : { verifying_since: upload.verifying_since }) } },
    });
  } catch (error) {
    if (error instanceof ConditionFailedError) return; // queued by another complete, or settled meanwhile
    throw error;
  }
  const message: UploadCheckMessage = { org, id: upload.id, engine_upload_id: upload.engine_upload_id };
  await engine.queue.send(UPLOAD_CHECKS_QUEUE, JSON.stringify(message), { group: org }).catch((error) => {
    log.warn('upload check not queued anew; the next complete tries again', { upload: upload.id, error: String(error) });
    return engine.kv.update({ key: uploadKey(org, upload.id), set: { verifying_since: upload.verifying_since }, condition: { ifEquals: { verifying_since: now } } }).catch(() => undefined);
  });
}

/** The reason a complete call stops its own check: its deadline passed and the queued check goes on. */
class CheckHandedOver extends Error {
  override name = 'CheckHandedOver';
}

const lostParts = () => new PlatformError('upload_incomplete', 'The parts were lost; send every part again.', 'parts_received');

const mismatchMessage = (upload: Upload, error: BlobMismatchError) =>
  error.mismatch === 'size'
    ? `The parts hold ${error.actual.size} bytes, not the ${upload.size} announced; they were discarded: send the parts again.`
    : `The bytes hash to ${error.actual.sha256}, not to ${upload.sha256}; they were discarded: send the parts again.`;

const stillChecking = (upload: UploadView): CompleteAnswer => ({
  ...upload,
  status_url: `/v1/uploads/${encodeURIComponent(upload.id)}`,
  poll_after_seconds: Math.min(60, Math.max(1, Math.ceil(upload.size / CHECK_BYTES_PER_SECOND))),
});

type Checked = { completed: Upload } | { mismatch: BlobMismatchError } | { lost: true };

/**
 * The check itself, the same wherever it runs: the joined bytes read through SHA-256 and kept at the
 * upload's key only if they match, then the stored file recorded and the upload completed (keepFile),
 * both conditional on `claimed`. Bytes at the upload's key were checked (nothing else writes there), so
 * a joined upload found gone was checked by another run: its bytes there are kept, else they were lost.
 * A stop by `signal` throws its reason and leaves the joined bytes for the next run.
 */
async function checkAndKeep(engine: Engine, org: string, upload: Upload, claimed: Record<string, string | number>, signal?: AbortSignal): Promise<Checked> {
  const bytes = bytesKeyOf(org, upload);
  try {
    await engine.blobs.checkJoined(bytes, upload.engine_upload_id, { sha256: upload.sha256, size: upload.size }, signal);
  } catch (error) {
    if (error instanceof BlobMismatchError) return { mismatch: error };
    if (!(error instanceof UploadNotFoundError)) throw error;
    if (!(await engine.blobs.head(bytes))) return { lost: true };
  }
  return { completed: await keepFile(engine, org, upload, claimed) };
}

/**
 * The upload-checks queue's work (lambdas/consumers/upload-checks.ts): finishes the check of an upload
 * its complete call left `verifying`. Completed, it is as a complete would have left it; wrong bytes are
 * deleted unseen and the upload `failed` with `hash_mismatch` (nobody waits for a 400 now: GET tells).
 * An upload no longer verifying that multipart upload (checked by its call, expired, started anew) is
 * left alone. Store failures throw: the message comes back.
 */
export async function checkJoinedUpload(engine: Engine, message: UploadCheckMessage): Promise<'completed' | 'failed' | 'skipped'> {
  const item = await engine.kv.get(uploadKey(message.org, message.id));
  if (!item || item.status !== 'verifying' || item.engine_upload_id !== message.engine_upload_id || Number(item.expires_at) <= nowSeconds(engine)) return 'skipped';
  const upload = asUpload(item);
  const claimed = { status: 'verifying', engine_upload_id: upload.engine_upload_id };
  let checked: Checked;
  try {
    checked = await checkAndKeep(engine, message.org, upload, claimed);
  } catch (error) {
    if (error instanceof PlatformError) return 'skipped'; // kept meanwhile by the complete call (keepFile's lost race)
    throw error;
  }
  if ('completed' in checked) return 'completed';
  const error = 'lost' in checked
    ? { code: 'upload_incomplete', message: 'The joined parts were lost before they were checked; start the upload again and send every part.' }
    : { code: 'hash_mismatch', message: mismatchMessage(upload, checked.mismatch).replace(': send the parts again.', ': start the upload again (POST /v1/uploads with the same id and file) and send the parts.') };
  try {
    await engine.kv.update({ key: uploadKey(message.org, upload.id), set: { status: 'failed', error_code: error.code, error_message: error.message }, condition: { ifEquals: claimed } });
  } catch (failed) {
    if (failed instanceof ConditionFailedError) return 'skipped'; // settled meanwhile by the complete call
    throw failed;
  }
  return 'failed';
}

/**
 * The joined bytes become the workspace's stored file of that SHA-256: when one is kept already (its
 * bytes there) the upload names it and ours go; otherwise ours become it. Either way the stored file
 * lives at least as long as this upload, and the upload is `completed` in the same transaction.
 */
async function keepFile(engine: Engine, org: string, upload: Upload, claimed: Record<string, string | number>): Promise<Upload> {
  const fileKey = storedFileKey(org, upload.workspace, upload.sha256);
  const ours = bytesKeyOf(org, upload);
  const completedAt = new Date(engine.clock.now()).toISOString();
  for (;;) {
    const now = nowSeconds(engine);
    const file = await engine.kv.get(fileKey);
    const live = file && Number(file.expires_at) > now && (await engine.blobs.head(uploadBytesKey(org, upload.workspace, upload.sha256, String(file.gen)))) !== undefined;
    const gen = live ? String(file.gen) : upload.gen;
    const expiresAt = live ? Math.max(Number(file.expires_at), upload.expires_at) : upload.expires_at;
    const writes: KvWrite[] = [
      { update: uploadKey(org, upload.id), set: { status: 'completed', gen, completed_at: completedAt }, remove: ['completing_until'], condition: { ifEquals: claimed } },
      {
        put: { ...fileKey, gen, size: upload.size, expires_at: expiresAt },
        condition: file ? { ifEquals: { gen: file.gen ?? null, expires_at: file.expires_at ?? null } } : { ifAbsent: true },
      },
    ];
    // The bytes go when the last upload naming them does (an entry per expiry the file is given).
    if (!live || expiresAt !== Number(file.expires_at)) {
      writes.push({ put: { ...sweepKey(expiresAt, `file#${org}#${upload.workspace}#${upload.sha256}#${gen}`), org, workspace: upload.workspace, sha256: upload.sha256, gen } });
    }
    try {
      await transact(engine, writes);
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error;
      const mine = await engine.kv.get(uploadKey(org, upload.id));
      if (!holds(mine, claimed)) throw completedAlready(asUpload(mine ?? upload.item));
      continue; // the stored file changed meanwhile: look again
    }
    if (live) await engine.blobs.delete(ours); // the same bytes are kept already
    return { ...upload, status: 'completed', gen, completed_at: completedAt };
  }
}

/** After a failed join: a fresh multipart upload, no parts, pending again (only if still ours). */
async function reopen(engine: Engine, org: string, upload: Upload, claimed: Record<string, string | number>): Promise<void> {
  const gen = newGeneration();
  const bytes = uploadBytesKey(org, upload.workspace, upload.sha256, gen);
  const engineUploadId = await engine.blobs.createMultipart(bytes);
  try {
    await transact(engine, [
      { update: uploadKey(org, upload.id), set: { status: 'pending', gen, engine_upload_id: engineUploadId }, remove: ['completing_until'], condition: { ifEquals: claimed } },
      { put: { ...sweepKey(upload.expires_at, `parts#${org}#${upload.id}#${gen}`), blob_key: bytes, engine_upload_id: engineUploadId } },
    ]);
  } catch (error) {
    await engine.blobs.abortMultipart(bytes, engineUploadId).catch(() => undefined);
    if (!(error instanceof ConditionFailedError)) throw error;
  }
}

/** The parts the store holds for a pending upload, by number. */
async function receivedParts(engine: Engine, org: string, upload: Upload): Promise<Map<number, { partNumber: number; etag: string; size: number }>> {
  try {
    const parts = await engine.blobs.listParts(bytesKeyOf(org, upload), upload.engine_upload_id);
    return new Map(parts.filter((p) => p.partNumber <= upload.part_count).map((p) => [p.partNumber, p]));
  } catch (error) {
    if (error instanceof UploadNotFoundError) return new Map(); // being completed, or the parts were lost
    throw error;
  }
}

async function view(engine: Engine, org: string, upload: Upload, destination: PartDestination): Promise<UploadView> {
  // Joined (verifying) or kept, every part arrived; a failed upload's were discarded, and it takes none.
  const joined = upload.status === 'completed' || upload.status === 'verifying';
  const settled = joined || upload.status === 'failed';
  let received: number[];
  if (joined) received = Array.from({ length: upload.part_count }, (_, i) => i + 1);
  else if (upload.status === 'failed') received = [];
  else {
    const parts = await receivedParts(engine, org, upload);
    received = [...parts.values()].filter((p) => p.size === partBytes(upload, p.partNumber)).map((p) => p.partNumber);
  }
  const have = new Set(received);
  const missing = settled ? [] : Array.from({ length: upload.part_count }, (_, i) => i + 1).filter((n) => !have.has(n));
  const presigned = 'presigned' in destination && engine.blobs.partUrl !== undefined;
  const parts: PartTarget[] = await Promise.all(
    missing.map(async (n) => ({
      number: n,
      url: presigned
        ? await engine.blobs.partUrl!(bytesKeyOf(org, upload), upload.engine_upload_id, n, partBytes(upload, n), PART_URL_SECONDS)
        : `${'route' in destination ? destination.route : ''}/v1/uploads/${encodeURIComponent(upload.id)}/parts/${n}`,
      method: 'PUT' as const,
      size: partBytes(upload, n),
    })),
  );
  return {
    id: upload.id,
    object: 'upload',
    filename: upload.filename,
    content_type: upload.content_type,
    size: upload.size,
    sha256: upload.sha256,
    status: upload.status === 'completing' ? 'pending' : upload.status,
    part_size: upload.part_size,
    part_count: upload.part_count,
    parts_received: received,
    keep_source_hours: upload.keep_source_hours,
    created_at: upload.created_at,
    expires_at: iso(upload.expires_at),
    completed_at: upload.completed_at,
    ...(upload.status === 'failed' && upload.error ? { error: upload.error } : {}),
    parts,
    part_urls_expire_at: presigned && parts.length ? iso(nowSeconds(engine) + PART_URL_SECONDS) : null,
  };
}

/**
 * Where a completed upload's bytes are, for the collection items that name it: `404 upload_not_found`
 * when it is unknown to the caller's workspace or expired, `409 upload_incomplete` while it is pending.
 */
export async function completedUploadSource(engine: Engine, principal: Principal, id: string): Promise<{ upload: UploadView; key: string }> {
  const upload = await readUpload(engine, principal, id);
  if (upload.status !== 'completed') throw new PlatformError('upload_incomplete', `Upload "${id}" is not completed.`, 'upload_id');
  return { upload: await view(engine, principal.organizationId, upload, { route: '' }), key: bytesKeyOf(principal.organizationId, upload) };
}

/** An upload as OpenAI's Files API shows it (lambdas/ai/openai-compat/files.ts): a completed one is a file. */
export interface UploadFile {
  id: string;
  filename: string;
  content_type: string;
  size: number;
  sha256: string;
  status: UploadStatus;
  purpose: UploadPurpose;
  created_at: string;
  /** Epoch seconds. */
  expires_at: number;
}

const asFile = (u: Upload): UploadFile => ({
  id: u.id,
  filename: u.filename,
  content_type: u.content_type,
  size: u.size,
  sha256: u.sha256,
  status: u.status === 'completing' ? 'pending' : u.status,
  purpose: u.purpose,
  created_at: u.created_at,
  expires_at: u.expires_at,
});

/** The live upload `id` of the caller's workspace as a file, or `404 upload_not_found`. */
export async function readUploadFile(engine: Engine, principal: Principal, id: string): Promise<UploadFile> {
  return asFile(await readUpload(engine, principal, id));
}

/** Several at once (a Files page), in order: undefined for one unknown, expired, or another workspace's. */
export async function readUploadFiles(engine: Engine, principal: Principal, ids: string[]): Promise<(UploadFile | undefined)[]> {
  const org = principal.organizationId;
  const workspace = await workspaceOf(engine, principal);
  const now = nowSeconds(engine);
  const out: (UploadFile | undefined)[] = [];
  for (let i = 0; i < ids.length; i += 100) {
    const items = await engine.kv.getMany(ids.slice(i, i + 100).map((id) => uploadKey(org, id)));
    for (const item of items) out.push(item && Number(item.expires_at) > now && item.workspace_id === workspace ? asFile(asUpload(item)) : undefined);
  }
  return out;
}

/**
 * A completed upload's bytes (GET /v1/files/{id}/content): a stream, or on a runtime that cannot carry
 * them (`inlineBodyBytes`, Lambda) a short-lived URL of the store. `409 upload_incomplete` before it completed.
 */
export async function uploadContent(
  engine: Engine,
  principal: Principal,
  id: string,
  inlineBodyBytes: number | undefined,
): Promise<{ file: UploadFile } & ({ body: Readable; size: number } | { url: string })> {
  const upload = await readUpload(engine, principal, id);
  if (upload.status !== 'completed') throw new PlatformError('upload_incomplete', `Upload "${id}" is not completed.`, 'id');
  const key = bytesKeyOf(principal.organizationId, upload);
  const file = asFile(upload);
  if (inlineBodyBytes !== undefined && upload.size > inlineBodyBytes && engine.blobs.downloadUrl) return { file, url: await engine.blobs.downloadUrl(key, 900) };
  const found = await engine.blobs.get(key);
  if (!found) throw notFound(id); // expired and swept between the read and here
  return { file, body: found.body, size: found.size };
}

/**
 * DELETE /v1/files/{id}: the upload and its Files listing entry, in one transaction. Its bytes stay
 * with the stored file until that expires (another upload may name the same bytes; collection items
 * made from it keep theirs, docs/ai/openai-compatibility.md). `409 operation_in_progress` while it is
 * being completed or checked.
 */
export async function deleteUpload(engine: Engine, principal: Principal, id: string): Promise<void> {
  const org = principal.organizationId;
  for (let attempt = 0; ; attempt++) {
    const upload = await readUpload(engine, principal, id);
    if (upload.status === 'completing' || upload.status === 'verifying') throw completedAlready({ ...upload, status: 'completing' });
    try {
      await transact(engine, [
        { delete: uploadKey(org, id), condition: { ifEquals: { gen: upload.gen, status: upload.status, created_at: upload.created_at } } },
        { delete: fileListingKey(org, upload.workspace, Math.floor(Date.parse(upload.created_at) / 1000), id) },
      ]);
      return;
    } catch (error) {
      // Changed meanwhile (completed, started again): read it again.
      if (!(error instanceof ConditionFailedError) || attempt >= 3) throw error;
    }
  }
}

/**
 * Keeps the bytes of the completed upload `id` at least until `untilEpoch` (seconds): a knowledge job
 * reads its recording for that long (its `keep_source_hours`). The stored file's expiry is only ever
 * moved later, with its own sweep entry, as a second upload of the same bytes moves it (keepFile), so
 * an upload that keeps its bytes longer still does. Returns the expiry in force.
 */
export async function keepSourceUntil(engine: Engine, principal: Principal, id: string, untilEpoch: number): Promise<number> {
  const upload = await readUpload(engine, principal, id);
  const org = principal.organizationId;
  const fileKey = storedFileKey(org, upload.workspace, upload.sha256);
  for (;;) {
    const file = await engine.kv.get(fileKey);
    if (!file) throw notFound(id);
    const current = Number(file.expires_at);
    if (current >= untilEpoch) return current;
    try {
      await transact(engine, [
        { update: fileKey, set: { expires_at: untilEpoch }, condition: { ifEquals: { gen: file.gen ?? null, expires_at: file.expires_at ?? null } } },
        { put: { ...sweepKey(untilEpoch, `file#${org}#${upload.workspace}#${upload.sha256}#${String(file.gen)}`), org, workspace: upload.workspace, sha256: upload.sha256, gen: String(file.gen) } },
      ]);
      return untilEpoch;
    } catch (error) {
      if (!(error instanceof ConditionFailedError)) throw error; // changed meanwhile: look again
    }
  }
}

/**
 * Removes what expired, up to `limit` entries, oldest first: an upload's open parts (its multipart
 * upload aborted, its item deleted if DynamoDB's TTL has not yet), and a stored file's bytes once no
 * upload names it any longer (its item deleted if it still says so; a later expiry has its own entry).
 * Returns how many entries it handled. Safe to run anywhere, at once: every step is conditional or idempotent.
 */
export async function sweepExpiredUploads(engine: Engine, limit = 100): Promise<number> {
  return (await sweepUploadBatch(engine, limit)).handled;
}

/**
 * One batch of the sweep, from `cursor` (the previous batch's) on: an entry that fails stays due, so a
 * run that batches on continues after it rather than reading the same failing entries again. `cursor`
 * is absent once nothing more is due.
 */
export async function sweepUploadBatch(engine: Engine, limit: number, cursor?: string): Promise<{ handled: number; cursor?: string }> {
  const now = nowSeconds(engine);
  const page = await engine.kv.query({ pk: SWEEP_PARTITION, sk: dueBefore(now + 1), limit, cursor });
  for (const entry of page.items) {
    // One entry that keeps failing must not hold up the others behind it.
    await sweepEntry(engine, entry, now).catch((error) => log.warn('upload sweep entry failed; retried next sweep', { sk: String(entry.sk), error: String(error) }));
  }
  return { handled: page.items.length, cursor: page.items.length < limit ? undefined : page.cursor };
}

/** One due entry: an upload's parts (its multipart upload aborted), or a stored file's bytes once nothing names them. */
async function sweepEntry(engine: Engine, entry: KvItem, now: number): Promise<void> {
  const [, what, ...rest] = String(entry.sk).split('#');
  if (what === 'parts') {
    const [org, id, gen] = rest;
    await engine.blobs.abortMultipart(String(entry.blob_key), String(entry.engine_upload_id)).catch((error) => {
      if (!(error instanceof UploadNotFoundError)) throw error; // completed, or aborted already
    });
    await engine.kv.delete(uploadKey(org, id), { ifEquals: { gen } }).catch((error) => {
      if (!(error instanceof ConditionFailedError)) throw error; // started again under this id, or completed onto a stored file
    });
  } else if (what === 'file') {
    const { org, workspace, sha256, gen } = entry as Record<string, string>;
    const key = storedFileKey(org, workspace, sha256);
    const file = await engine.kv.get(key);
    if (file?.gen === gen) {
      // Named by a later upload: that one's entry removes the bytes then.
      if (Number(file.expires_at) > now) return void (await engine.kv.delete({ pk: entry.pk, sk: entry.sk }));
      try {
        await engine.kv.delete(key, { ifEquals: { gen, expires_at: file.expires_at ?? null } });
      } catch (error) {
        if (error instanceof ConditionFailedError) return; // extended meanwhile: looked at again next sweep
        throw error;
      }
    }
    await engine.blobs.delete(uploadBytesKey(org, workspace, sha256, gen));
  }
  await engine.kv.delete({ pk: entry.pk, sk: entry.sk });
}

async function transact(engine: Engine, writes: KvWrite[]): Promise<void> {
  try {
    await engine.kv.transact(writes);
  } catch (error) {
    if (error instanceof TransactionCanceledError) throw new ConditionFailedError();
    throw error;
  }
}

/**
 * A complete call's claim on its operation id (spec 4.1: every AI POST is once per id): its answer is
 * kept under the AI API's rules and replayed only to a caller that could complete that upload.
 */
export function completeOperation(engine: Engine, principal: Principal, id: string): OperationCall<OperationContext> {
  const context: OperationContext = { endpoint: `/v1/uploads/${id}/complete`, route: null, application: principal.applicationId, capability: 'knowledge' };
  return {
    tenant: principal.organizationId,
    // On AWS a complete reads the whole file back to check it: the route's whole timeout.
    holdSeconds: holdMs(30_000) / 1000,
    context,
    checkReplay: (kept) => checkReplay(engine, principal, context, kept),
  };
}
