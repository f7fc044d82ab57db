/**
 * Files of a database (spec 4.17 to 4.19), addressed by the SHA-256 of their bytes.
 *
 * The bytes live in the blob store under `bytesKey`: blobKey(org, database, sha256) plus a
 * generation (`.<gen>`, a fresh random id per store), and a metadata item (blobMetaKey: {sha256,
 * size, created_at, gen}) says the file is there and which generation holds its bytes. Invariant:
 * metadata present => its generation's bytes present. A store writes new bytes, then puts the item
 * conditionally; a delete removes the item conditionally (on its generation), then that generation's
 * bytes only, so it can never take the bytes of a store that re-created the file meanwhile (see
 * docs/data/blobs.md, "Concurrency"). Items written before generations (no `gen`) name the bare key.
 * Readers and record checks trust the item, never the bytes alone.
 * A multipart upload is an item under uploadKey (our `upl_` id -> the engine's upload id, expiring
 * after 7 days like the bucket's abort rule, and the generation its bytes will have) plus one item per
 * uploaded part (etag, size), so an upload id is only found within its own organization, database and
 * file, and the part list of a complete call is checked before the engine joins anything. Complete and
 * abort first claim the upload by deleting its item conditionally: one caller wins, the others get
 * `404 upload_not_found`.
 *
 * Bodies too big for the runtime (Lambda behind API Gateway: `inlineLimit`) are redirected: a GET to a
 * URL serving the bytes, a PUT or part PUT to a URL that stores exactly the announced bytes straight in
 * the blob store (under arrivalBytesKey, a key no metadata ever names). A file sent that way is an
 * *arrival* (arrivalKey) until settleArrivals() has copied what arrived under the file's own
 * generation key, checked it there (size and SHA-256, by the store's checksum or by reading it) and
 * written the metadata, so it is never visible before: wrong bytes are deleted unseen. Settling runs when the store reports
 * the object (the bucket's notification, consumers/blob-arrivals.ts) and whenever a read or a record
 * write looks for a file it does not find (read-your-write without waiting for the notification).
 *
 * Access: server credentials that see the database do everything. Browser credentials (publishable
 * keys, end-user tokens) go by the collection rules of the records that reference the file
 * (blob-rules.ts, docs/data/blobs.md "Rules"): read when a record they may view references it (else
 * 404, as for a missing file), delete when they may update every referencing record, upload when a
 * collection with a blob field may let them create or update records (else 403).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { Engine, KeyValueStore, KvCondition, KvItem, KvKey, KvWrite } from '../engine/ports.js';
import { BlobMismatchError, ConditionFailedError, EngineLimitError, InvalidPartError, TransactionCanceledError, UploadNotFoundError } from '../engine/errors.js';
import { LIMITS } from '../engine/limits.js';
import { isServerCredential, storedPrincipal } from '../auth/principal.js';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseBody } from '../shared/validate.js';
import { newId } from '../shared/ids.js';
import { dataHooks, type DataScope, type FileHookEvent } from './hooks.js';
import { Databases, requireServer } from './databases.js';
import { nextPageCursor, openPage } from '../shared/cursors.js';
import { arrivalBytesKey, arrivalKey, arrivalsOf, blobKey, blobMetaKey, uploadKey } from './keys.js';
import { BlobRules } from './blob-rules.js';
import { changeKey, planChangeOutbox, settleChangeOutbox, type Change, type PlannedOutbox } from './change-outbox.js';

export const SHA256_PATTERN = /^[0-9a-f]{64}$/;
/** Spec 8: one PUT carries at most 100 MiB; multipart files go to 5 GiB in parts of 5 to 100 MiB. */
export const MAX_BLOB_BYTES = 100 * 1024 * 1024;
export const MAX_PART_BYTES = 100 * 1024 * 1024;
export const MAX_MULTIPART_BYTES = 5 * 1024 * 1024 * 1024;
export const MAX_PARTS = LIMITS.multipartMaxParts;

/** POST .../uploads/{upload_id}/complete's body, built at its first use (onFirstUse). */
export const completeUploadBodySchema = onFirstUse(() =>
  z.strictObject({
    parts: z.array(
      z.strictObject({
        // The range is checked by completeUpload (400 invalid_part, not invalid_body): said here, not enforced.
        part_number: z.number().check(z.int(), z.describe(`The part's number, 1 to ${MAX_PARTS}.`)),
        etag: z.string().check(z.minLength(1), z.maxLength(1024), z.describe("The etag the part's upload answered (quoted or not).")),
      }),
    ).check(
      z.minLength(1),
      z.maxLength(MAX_PARTS),
      z.describe('Every part, ascending by part_number, with the etag its upload answered.'),
    ),
    size: z.optional(z.number().check(z.int(), z.minimum(0), z.describe("The whole file's size, checked against the listed parts before anything is joined."))),
  }),
);

/** A complete call's body: `{parts: [{part_number, etag}], size?}`. */
export const parseCompleteUploadBody = (body: unknown) => parseBody(completeUploadBodySchema(), body, { unknownField: 'unknown_field' });
export const MIN_PART_BYTES = LIMITS.multipartMinPartBytes;
/** An unfinished upload is forgotten after 7 days (the bucket aborts its parts on the same day). */
export const UPLOAD_TTL_SECONDS = 7 * 24 * 3600;
export const UPLOAD_ID_PATTERN = /^upl_[0-9a-z]{26}$/;
/** How long a redirect's URL works: long enough to start a 100 MiB upload on a slow link, short enough to be useless if leaked. */
export const REDIRECT_URL_SECONDS = 15 * 60;
/**
 * Announcements of one file whose URLs still work: past this many, another is refused (429) until one
 * is settled or expires. A read that misses the file looks at each (one HEAD), so they stay few.
 */
export const MAX_OPEN_ARRIVALS = 100;
/** An arrival nobody settled is dropped a day after its URL stopped working (the item's TTL too). */
const ARRIVAL_TTL_SECONDS = REDIRECT_URL_SECONDS + 24 * 3600;

/** Where the client sends or fetches the bytes instead (a 307's Location). */
export interface Redirect {
  redirect: string;
}

/** A file's name: the SHA-256 of its bytes, as a schema (path parameters, answers). */
const sha256Schema = () => z.string().check(z.regex(SHA256_PATTERN), z.describe('The SHA-256 of the bytes: 64 lowercase hex characters.'));

/** Spec 2 and 4.17: a file is its SHA-256 and its size (the answer of a PUT and of a complete). */
export const blobSchema = onFirstUse(() =>
  z.strictObject({
    sha256: sha256Schema(),
    size: z.number().check(z.int(), z.minimum(0), z.describe('The size in bytes.')),
  }),
);
export type Blob = z.output<ReturnType<typeof blobSchema>>;

/** POST .../uploads' answers (spec 4.19): 201 an upload opened, 200 the file already stored. */
export const uploadCreatedSchema = onFirstUse(() =>
  z.strictObject({ upload_id: z.string().check(z.regex(UPLOAD_ID_PATTERN), z.describe('The upload: `upl_` and 26 characters; known only for this organization, database and file.')) }),
);
export const blobExistsSchema = onFirstUse(() => z.strictObject({ sha256: sha256Schema(), exists: z.literal(true) }));

/** A part PUT's answer; the etag goes into the complete call (and is also the answer's ETag header). */
export const uploadedPartSchema = onFirstUse(() =>
  z.strictObject({
    part_number: z.number().check(z.int(), z.minimum(1), z.maximum(MAX_PARTS)),
    size: z.number().check(z.int(), z.minimum(0), z.describe("The part's size in bytes.")),
    etag: z.string().check(z.minLength(1), z.describe('The etag to list in the complete call.')),
  }),
);
export type UploadedPart = z.output<ReturnType<typeof uploadedPartSchema>>;

/** A stored file's metadata item. */
type BlobMeta = KvItem;

/** Where a generation's bytes live; items from before generations (no `gen`) use the bare key. */
const bytesKey = (org: string, database: string, sha256: string, gen: KvItem[string]) =>
  typeof gen === 'string' && gen !== '' ? `${blobKey(org, database, sha256)}.${gen}` : blobKey(org, database, sha256);
const newGeneration = () => randomBytes(10).toString('hex');
/** The condition that the metadata item is still the one read (its generation; `created_at` for items without one). */
const sameItem = (item: BlobMeta): KvCondition => ({
  ifEquals: typeof item.gen === 'string' ? { gen: item.gen } : { created_at: item.created_at ?? null },
});

/** Whether the file is stored in the database (what a record's `blob` field must name). */
export async function blobExists(kv: KeyValueStore, org: string, database: string, sha256: string): Promise<boolean> {
  return (await kv.get(blobMetaKey(org, database, sha256))) !== undefined;
}

/** A PUT's body as its headers describe it. */
export interface IncomingBody {
  stream: Readable;
  /** The declared `Content-Length` (or the announced `Upload-Length`); undefined when none, or a malformed one, was sent. */
  size: number | undefined;
  /**
   * `Upload-Length: <n>` with no body: the client asks where to send `n` bytes (a 307 where they go
   * straight to the blob store) before sending them: for fronts that read a whole body before the
   * function runs (docs/data/blobs.md, "Large files on AWS").
   */
  announced: boolean;
  contentType?: string;
}

const DECIMAL = /^\d{1,16}$/;

export function incomingBody(headers: Record<string, string>, stream: Readable): IncomingBody {
  const declared = headers['content-length'];
  const announced = headers['upload-length'];
  if (announced !== undefined && DECIMAL.test(announced) && (declared === undefined || declared === '0')) {
    return { stream, size: Number(announced), announced: true, contentType: headers['content-type'] };
  }
  return { stream, size: declared !== undefined && DECIMAL.test(declared) ? Number(declared) : undefined, announced: false, contentType: headers['content-type'] };
}

/** Headers of a download and of HEAD: the file's bytes are immutable, so the SHA-256 is its ETag. */
export const blobHeaders = (blob: Blob): Record<string, string> => ({
  'content-type': 'application/octet-stream',
  'content-length': String(blob.size),
  etag: `"${blob.sha256}"`,
});

const blobNotFound = (sha256: string) => new PlatformError('blob_not_found', `No file ${sha256} in this database.`);
const uploadNotFound = (id: string) => new PlatformError('upload_not_found', `No open upload "${id}" for this file in this database.`);
const invalidPart = (message: string, param: string | null = 'parts') => new PlatformError('invalid_part', message, param);
const lengthRequired = () => new PlatformError('length_required', 'Send the bytes with a Content-Length header.');
const bytesHere = () =>
  new PlatformError('length_required', 'Upload-Length announces bytes sent elsewhere, but this body goes here: send the bytes with a Content-Length header.');
const tooLarge = (max: number, what: string) => new PlatformError('payload_too_large', `${what} is over ${max} bytes.`);

function hashMismatch(error: BlobMismatchError, expected: { sha256: string; size?: number }): PlatformError {
  const message =
    error.mismatch === 'size'
      ? `${error.actual.size} bytes arrived, not the ${expected.size} announced; nothing was kept.`
      : `The bytes hash to ${error.actual.sha256}, not to ${expected.sha256}; nothing was kept.`;
  return new PlatformError('hash_mismatch', message, 'sha256');
}

export class BlobService {
  private readonly kv: KeyValueStore;
  private readonly org: string;

  constructor(private readonly scope: DataScope) {
    this.kv = scope.engine.kv;
    this.org = scope.principal.organizationId;
  }

  /** PUT .../blobs/{sha256} (4.17): stores the streamed bytes if they hash to `sha256`; `created` is false when already stored. */
  async put(database: string, sha256: string, incoming: IncomingBody, inlineLimit?: number): Promise<{ blob: Blob; created: boolean } | Redirect> {
    const { stream: body, size, contentType } = incoming;
    await this.open(database, sha256, 'upload', { strictName: true });
    if (size === undefined) throw lengthRequired();
    if (size > MAX_BLOB_BYTES) throw tooLarge(MAX_BLOB_BYTES, 'A single PUT (send larger files as a multipart upload)');
    if (this.redirected(size, inlineLimit)) return { redirect: await this.arrive(database, sha256, size, contentType ?? null) };
    if (incoming.announced) throw bytesHere();
    const current = await this.meta(database, sha256);
    if (current && (await this.bytesPresent(database, current))) {
      // Already stored: read the bytes through (still checked), store nothing twice.
      await discard(body, { sha256, size });
      return { blob: { sha256, size }, created: false };
    }
    // Not stored, or its metadata outlived its bytes (to be repaired): store the bytes as a new generation.
    const gen = newGeneration();
    let stored: Blob;
    try {
      stored = await this.scope.engine.blobs.put(bytesKey(this.org, database, sha256, gen), body, { sha256, size });
    } catch (error) {
      if (error instanceof BlobMismatchError) throw hashMismatch(error, { sha256, size });
      throw error;
    }
    const created = await this.remember(database, stored, gen);
    if (created) await this.fire('file.created', database, stored, contentType ?? null);
    return { blob: stored, created };
  }

  /** GET .../blobs/{sha256}: the file as a stream (never read whole here). */
  async get(database: string, sha256: string, inlineLimit?: number): Promise<{ blob: Blob; body: Readable } | (Redirect & { blob: Blob })> {
    await this.open(database, sha256, 'read');
    let found: { body: Readable; size: number } | undefined;
    // A second look when the bytes are gone: the file may have been deleted and stored again meanwhile.
    for (let attempt = 0; attempt < 2 && !found; attempt++) {
      const item = await this.meta(database, sha256);
      if (!item) throw blobNotFound(sha256);
      const size = Number(item.size);
      if (this.redirected(size, inlineLimit, 'download')) {
        const redirect = await this.scope.engine.blobs.downloadUrl!(bytesKey(this.org, database, sha256, item.gen), REDIRECT_URL_SECONDS);
        await this.fire('file.read', database, { sha256, size }, 'application/octet-stream');
        return { blob: { sha256, size }, redirect };
      }
      found = await this.scope.engine.blobs.get(bytesKey(this.org, database, sha256, item.gen));
    }
    if (!found) throw blobNotFound(sha256);
    const blob = { sha256, size: found.size };
    await this.fire('file.read', database, blob, 'application/octet-stream');
    return { blob, body: found.body };
  }

  /** HEAD .../blobs/{sha256}: the metadata item alone answers. */
  async head(database: string, sha256: string): Promise<Blob> {
    await this.open(database, sha256, 'read');
    const item = await this.meta(database, sha256);
    if (!item) throw blobNotFound(sha256);
    return { sha256, size: Number(item.size) };
  }

  /**
   * The database's files, by SHA-256, a page at a time (server credentials only: a browser credential
   * sees a file only through the records it may view). The console's files page; no public route yet.
   */
  async list(database: string, query: { limit?: string; cursor?: string }): Promise<{ files: { sha256: string; size: number; created_at: string | null }[]; next_cursor: string | null }> {
    requireServer(this.scope.principal, 'list files');
    await new Databases(this.kv, () => this.scope.engine.clock.now()).get(this.scope.principal, database);
    const binding = `data-files\n${this.org}\n${database}`;
    const { limit, position } = await openPage(this.scope.engine.secret, query, binding, { max: 100, fallback: 50 });
    const page = await this.kv.query({ pk: blobMetaKey(this.org, database, '').pk, limit, cursor: position });
    return {
      files: page.items.map((item) => ({ sha256: String(item.sk), size: Number(item.size), created_at: typeof item.created_at === 'string' ? item.created_at : null })),
      next_cursor: await nextPageCursor(this.scope.engine.secret, page.cursor, binding),
    };
  }

  /**
   * DELETE .../blobs/{sha256} (4.18). The metadata goes first (only the generation read), so nobody is
   * told the file exists while its bytes go; then that generation's bytes, never a newer store's.
   */
  async delete(database: string, sha256: string): Promise<void> {
    await this.open(database, sha256, 'delete');
    const key = blobMetaKey(this.org, database, sha256);
    const outbox = await planChangeOutbox(this.scope, ['blob.deleted']);
    let item: BlobMeta | undefined;
    let change: Change;
    for (;;) {
      item = await this.meta(database, sha256);
      if (!item) throw blobNotFound(sha256); // never stored, or deleted meanwhile
      change = blobChange('blob.deleted', database, { sha256, size: Number(item.size) }, item);
      try {
        await this.commitMeta({ delete: key, condition: sameItem(item) }, outbox, change);
        break;
      } catch (error) {
        if (!(error instanceof ConditionFailedError)) throw error;
        // Deleted or stored again meanwhile: look again.
      }
    }
    await this.scope.engine.blobs.delete(bytesKey(this.org, database, sha256, item.gen));
    if (outbox) await settleChangeOutbox(this.scope.engine, outbox.entry([change]), { written: true });
    await this.fire('file.deleted', database, { sha256, size: Number(item.size) }, null);
  }

  /** POST .../blobs/{sha256}/uploads (4.19). */
  async createUpload(database: string, sha256: string): Promise<{ upload_id: string } | { sha256: string; exists: true }> {
    await this.open(database, sha256, 'upload', { strictName: true });
    const current = await this.meta(database, sha256);
    if (current && (await this.bytesPresent(database, current))) return { sha256, exists: true };
    const gen = newGeneration();
    const engineUploadId = await this.scope.engine.blobs.createMultipart(bytesKey(this.org, database, sha256, gen));
    const now = this.scope.engine.clock.now();
    const uploadId = newId('upl', now);
    await this.kv.put({
      ...uploadKey(this.org, database, uploadId),
      upload_id: uploadId,
      sha256,
      engine_upload_id: engineUploadId,
      gen,
      created_at: new Date(now).toISOString(),
      expires_at: Math.floor(now / 1000) + UPLOAD_TTL_SECONDS,
    });
    return { upload_id: uploadId };
  }

  /** PUT .../uploads/{upload_id}/parts/{n}: one part, streamed; uploading a number again replaces it. */
  async uploadPart(database: string, sha256: string, uploadId: string, n: string, incoming: IncomingBody, inlineLimit?: number): Promise<UploadedPart | Redirect> {
    const { stream: body, size } = incoming;
    await this.open(database, sha256, 'upload');
    const partNumber = parsePartNumber(n);
    if (size === undefined) throw lengthRequired();
    if (size > MAX_PART_BYTES) throw tooLarge(MAX_PART_BYTES, 'A part');
    const upload = await this.upload(database, sha256, uploadId);
    if (this.redirected(size, inlineLimit)) {
      // Straight to the store: no part item (an earlier inline upload's goes, as the part it described
      // is being replaced), the complete call names the part by the store's etag.
      await this.kv.delete(uploadKey(this.org, database, uploadId, partNumber));
      const redirect = await this.scope.engine.blobs.partUrl!(bytesKey(this.org, database, sha256, upload.gen), String(upload.engine_upload_id), partNumber, size, REDIRECT_URL_SECONDS);
      return { redirect };
    }
    if (incoming.announced) throw bytesHere();
    let part: { etag: string; size: number };
    try {
      part = await this.scope.engine.blobs.uploadPart(bytesKey(this.org, database, sha256, upload.gen), String(upload.engine_upload_id), partNumber, body, size);
    } catch (error) {
      if (error instanceof UploadNotFoundError) throw await this.forgetUpload(database, uploadId);
      if (error instanceof BlobMismatchError) throw new PlatformError('hash_mismatch', `${error.actual.size} bytes arrived, not the ${size} announced; the part was not kept.`);
      throw error;
    }
    await this.kv.put({
      ...uploadKey(this.org, database, uploadId, partNumber),
      part_number: partNumber,
      etag: part.etag,
      size: part.size,
      expires_at: upload.expires_at,
    });
    return { part_number: partNumber, size: part.size, etag: part.etag };
  }

  /**
   * POST .../uploads/{upload_id}/complete: joins the listed parts (ascending, each as uploaded), checks
   * the whole file's SHA-256 and size, and keeps it only if they match. A mismatch consumes the upload.
   */
  async completeUpload(
    database: string,
    sha256: string,
    uploadId: string,
    parts: { part_number: number; etag: string }[],
    expectedSize?: number,
  ): Promise<{ blob: Blob; created: boolean }> {
    await this.open(database, sha256, 'upload');
    const upload = await this.upload(database, sha256, uploadId);
    if (parts.length === 0 || parts.length > MAX_PARTS) throw invalidPart(`List 1 to ${MAX_PARTS} parts.`);
    parts.forEach((part, i) => {
      if (!Number.isInteger(part.part_number) || part.part_number < 1 || part.part_number > MAX_PARTS) {
        throw invalidPart(`parts.${i}.part_number must be an integer from 1 to ${MAX_PARTS}.`, `parts.${i}.part_number`);
      }
      if (i > 0 && part.part_number <= parts[i - 1].part_number) throw invalidPart('List the parts in ascending part_number order, each once.', `parts.${i}.part_number`);
    });
    const uploaded = await this.uploadedParts(database, uploadId);
    // Parts sent straight to the store (a redirected part PUT) have no item: the store checks their
    // etags and sizes when it joins them (invalid_part, part_too_small), and the size after.
    const straight = this.scope.engine.blobs.partUrl !== undefined;
    let total = 0;
    let unknownSizes = false;
    parts.forEach((part, i) => {
      const stored = uploaded.get(part.part_number);
      if (!stored && straight) {
        unknownSizes = true;
        return;
      }
      if (!stored || stored.etag !== part.etag.replace(/"/g, '')) {
        throw invalidPart(`Part ${part.part_number} with etag ${part.etag} was not uploaded to this upload.`, `parts.${i}.etag`);
      }
      if (i < parts.length - 1 && stored.size < MIN_PART_BYTES) {
        throw new PlatformError('part_too_small', `Part ${part.part_number} is ${stored.size} bytes; every part but the last needs at least ${MIN_PART_BYTES}.`, `parts.${i}`);
      }
      total += stored.size;
    });
    if (total > MAX_MULTIPART_BYTES) throw tooLarge(MAX_MULTIPART_BYTES, 'The file');
    if (!unknownSizes && expectedSize !== undefined && expectedSize !== total) {
      throw new PlatformError('hash_mismatch', `The listed parts hold ${total} bytes, not the ${expectedSize} announced.`, 'size');
    }

    // Claim the upload: of concurrent completes and aborts, the one whose conditional delete lands wins.
    await this.claimUpload(database, upload);
    const reopen = () => this.kv.put(upload, { ifAbsent: true }).catch(() => undefined);

    let stored: Blob;
    try {
      stored = await this.scope.engine.blobs.completeMultipart(
        bytesKey(this.org, database, sha256, upload.gen),
        String(upload.engine_upload_id),
        parts.map((p) => ({ partNumber: p.part_number, etag: p.etag })),
        { sha256, size: unknownSizes ? expectedSize : total },
      );
      if (stored.size > MAX_MULTIPART_BYTES) {
        await this.scope.engine.blobs.delete(bytesKey(this.org, database, sha256, upload.gen));
        throw tooLarge(MAX_MULTIPART_BYTES, 'The file');
      }
    } catch (error) {
      // The upload is used up (already claimed above).
      if (error instanceof BlobMismatchError) throw hashMismatch(error, { sha256, size: unknownSizes ? expectedSize : total });
      if (error instanceof UploadNotFoundError) throw uploadNotFound(uploadId);
      // Otherwise the engine kept the upload open: open it here again, so the call can be corrected or retried.
      await reopen();
      if (error instanceof EngineLimitError && error.limit === 'multipart_part') throw new PlatformError('part_too_small', error.message, 'parts');
      // A part replaced between our check and the join (the engine's InvalidPart).
      if (error instanceof InvalidPartError) {
        throw invalidPart('A listed part is not the one uploaded under its number; list the etags the part uploads answered.');
      }
      throw error;
    }
    const created = await this.remember(database, stored, upload.gen);
    if (created) await this.fire('file.created', database, stored, null);
    return { blob: stored, created };
  }

  /** DELETE .../uploads/{upload_id}: drops the parts; the upload id is then unknown. */
  async abortUpload(database: string, sha256: string, uploadId: string): Promise<void> {
    await this.open(database, sha256, 'upload');
    const upload = await this.upload(database, sha256, uploadId);
    await this.claimUpload(database, upload); // a concurrent complete or abort that claimed it first: 404
    try {
      await this.scope.engine.blobs.abortMultipart(bytesKey(this.org, database, sha256, upload.gen), String(upload.engine_upload_id));
    } catch (error) {
      if (!(error instanceof UploadNotFoundError)) throw error;
    }
    // Part items expire with the upload (expires_at); nothing reads them once the upload item is gone.
  }

  // ---------- bodies too big for the runtime ----------

  /** Whether a body of `size` bytes goes through a URL: over what the runtime carries, and the store hands out URLs. */
  private redirected(size: number, inlineLimit: number | undefined, way: 'upload' | 'download' = 'upload'): boolean {
    const { blobs } = this.scope.engine;
    return inlineLimit !== undefined && size > inlineLimit && (way === 'download' ? blobs.downloadUrl : blobs.uploadUrl) !== undefined;
  }

  /**
   * A single PUT too big for the runtime: the file becomes an arrival under a fresh generation, and the
   * client is sent to a URL that stores exactly `size` bytes there. Who sent it is kept, so the file's
   * activity entry and events name the uploader whoever settles it.
   */
  private async arrive(database: string, sha256: string, size: number, contentType: string | null): Promise<string> {
    const gen = newGeneration();
    const now = this.scope.engine.clock.now();
    const { pk, prefix } = arrivalsOf(this.org, database, sha256);
    const announced = await this.kv.query({ pk, sk: { beginsWith: prefix }, limit: MAX_OPEN_ARRIVALS });
    const open = announced.items.filter((a) => Number(a.url_expires_at) >= Math.floor(now / 1000)).length;
    if (open >= MAX_OPEN_ARRIVALS) {
      throw new PlatformError('rate_limited', `${MAX_OPEN_ARRIVALS} uploads of this file are announced and not yet sent; send one, or retry once their URLs expire.`, {
        retryAfterSeconds: REDIRECT_URL_SECONDS,
      });
    }
    await this.kv.put({
      ...arrivalKey(this.org, database, sha256, gen),
      sha256,
      size,
      gen,
      content_type: contentType,
      principal: JSON.stringify(storedPrincipal(this.scope.principal)),
      call: JSON.stringify(this.scope.call ?? null),
      url_expires_at: Math.floor(now / 1000) + REDIRECT_URL_SECONDS,
      expires_at: Math.floor(now / 1000) + ARRIVAL_TTL_SECONDS,
    });
    return this.scope.engine.blobs.uploadUrl!(arrivalBytesKey(this.org, database, sha256, gen), { sha256, size }, REDIRECT_URL_SECONDS);
  }

  /** The file's metadata item; when there is none, arrivals of it are settled first (read-your-write). */
  private async meta(database: string, sha256: string): Promise<BlobMeta | undefined> {
    const key = blobMetaKey(this.org, database, sha256);
    const item = await this.kv.get(key);
    if (item || !SHA256_PATTERN.test(sha256)) return item;
    return (await settleArrivals(this.scope.engine, this.org, database, sha256)) ? this.kv.get(key) : undefined;
  }

  /** Records an arrival whose bytes were checked (the uploader's scope): as a PUT's last step. */
  async recordArrival(database: string, blob: Blob, gen: string, contentType: string | null, arrival: KvKey): Promise<boolean> {
    const created = await this.remember(database, blob, gen, arrival);
    if (created) await this.fire('file.created', database, blob, contentType);
    return created;
  }

  // ---------- helpers ----------

  /**
   * Path checks, then the database (404 when missing or not visible), then the rules for browser
   * credentials: they need the database's collections, so they come after it.
   */
  private async open(database: string, sha256: string, access: 'read' | 'upload' | 'delete', options: { strictName?: boolean } = {}): Promise<void> {
    if (options.strictName && !SHA256_PATTERN.test(sha256)) {
      throw new PlatformError('invalid_name', 'A file is named by the SHA-256 of its bytes: 64 lowercase hex characters.', 'sha256');
    }
    const { principal } = this.scope;
    await new Databases(this.kv, () => this.scope.engine.clock.now()).get(principal, database);
    if (isServerCredential(principal)) {
      if (!SHA256_PATTERN.test(sha256)) throw blobNotFound(sha256);
      return;
    }
    const rules = new BlobRules(this.scope.engine, principal, database);
    if (access === 'upload' && !(await rules.mayUpload())) {
      throw new PlatformError('forbidden', "No collection of this database with a blob field lets this credential create or update records, so it may not upload files (see the collections' create and update rules).");
    }
    if (!SHA256_PATTERN.test(sha256)) throw blobNotFound(sha256);
    // A file no record the credential may view references is answered like a missing one.
    if (access === 'read' && !(await rules.mayRead(sha256))) throw blobNotFound(sha256);
    if (access === 'delete') {
      const verdict = await rules.mayDelete(sha256);
      if (verdict === 'not_found') throw blobNotFound(sha256);
      if (verdict === 'forbidden') throw new PlatformError('forbidden', "A record referencing this file is one this credential may not update (its collection's update rule), so it may not delete the file.");
    }
  }

  private async upload(database: string, sha256: string, uploadId: string): Promise<KvItem> {
    if (!UPLOAD_ID_PATTERN.test(uploadId)) throw uploadNotFound(uploadId);
    const item = await this.kv.get(uploadKey(this.org, database, uploadId));
    if (!item || item.sha256 !== sha256) throw uploadNotFound(uploadId);
    return item;
  }

  /** Deletes the upload item if it is still this upload; a caller that finds it gone lost the race: 404. */
  private async claimUpload(database: string, upload: KvItem): Promise<void> {
    try {
      await this.kv.delete(uploadKey(this.org, database, String(upload.upload_id)), { ifEquals: { engine_upload_id: upload.engine_upload_id ?? null } });
    } catch (error) {
      if (error instanceof ConditionFailedError) throw uploadNotFound(String(upload.upload_id));
      throw error;
    }
  }

  /** Whether the bytes a metadata item names are in the blob store. */
  private async bytesPresent(database: string, item: BlobMeta): Promise<boolean> {
    return (await this.scope.engine.blobs.head(bytesKey(this.org, database, String(item.sha256 ?? item.sk), item.gen))) !== undefined;
  }

  /** The upload is gone from the engine (aborted, completed, expired): forget it too, and answer 404. */
  private async forgetUpload(database: string, uploadId: string): Promise<PlatformError> {
    await this.kv.delete(uploadKey(this.org, database, uploadId));
    return uploadNotFound(uploadId);
  }

  private async uploadedParts(database: string, uploadId: string): Promise<Map<number, { etag: string; size: number }>> {
    const { pk } = uploadKey(this.org, database, uploadId);
    const parts = new Map<number, { etag: string; size: number }>();
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ pk, sk: { beginsWith: `${uploadId}#part#` }, cursor });
      for (const item of page.items) parts.set(Number(item.part_number), { etag: String(item.etag), size: Number(item.size) });
      cursor = page.cursor;
    } while (cursor);
    return parts;
  }

  /**
   * Writes the metadata item naming generation `gen` once its bytes are kept; false when the file was
   * already there. Then the existing item stays if its bytes are present (ours are dropped), and is
   * pointed at ours if they are gone (a repair). Every write is conditional on what was read.
   */
  private async remember(database: string, blob: Blob, gen: KvItem[string], arrival?: KvKey): Promise<boolean> {
    const key = blobMetaKey(this.org, database, blob.sha256);
    // An arrival is consumed in the metadata write's own transaction: of two settlers one records it,
    // and a file deleted after that can never be recorded again from the same arrival.
    const consume: KvWrite[] = arrival ? [{ delete: arrival, condition: { ifExists: true } }] : [];
    const arrivalGone = async () => arrival !== undefined && (await this.kv.get(arrival)) === undefined;
    const item = (created_at: string): KvItem => ({ ...key, sha256: blob.sha256, size: blob.size, created_at, ...(typeof gen === 'string' ? { gen } : {}) });
    const ours = bytesKey(this.org, database, blob.sha256, gen);
    const outbox = await planChangeOutbox(this.scope, ['blob.created']);
    for (;;) {
      try {
        const created = item(new Date(this.scope.engine.clock.now()).toISOString());
        const change = blobChange('blob.created', database, blob, created);
        await this.commitMeta({ put: created, condition: { ifAbsent: true } }, outbox, change, consume);
        if (outbox) await settleChangeOutbox(this.scope.engine, outbox.entry([change]), { written: true });
        return true;
      } catch (error) {
        if (!(error instanceof ConditionFailedError)) throw error;
      }
      if (await arrivalGone()) return false; // another settler recorded it
      const current = await this.kv.get(key);
      if (!current) continue; // deleted meanwhile: try to create it again
      if (bytesKey(this.org, database, blob.sha256, current.gen) === ours) return false;
      if (await this.bytesPresent(database, current)) {
        await this.scope.engine.blobs.delete(ours); // stored meanwhile by another call; ours are not needed
        if (arrival) await this.kv.delete(arrival);
        return false;
      }
      try {
        const repaired = item(String(current.created_at ?? new Date(this.scope.engine.clock.now()).toISOString()));
        if (arrival) await this.transact([{ put: repaired, condition: sameItem(current) }, ...consume]);
        else await this.kv.put(repaired, sameItem(current));
        return false;
      } catch (error) {
        if (!(error instanceof ConditionFailedError)) throw error; // changed meanwhile: look again
      }
    }
  }

  /**
   * Writes the metadata item (put or delete, conditional), with the platform event outbox in the same
   * transaction when someone wants the event (docs/events/platform-events.md); a failed condition is
   * ConditionFailedError either way.
   */
  private async commitMeta(
    write: { put: KvItem; condition: KvCondition } | { delete: { pk: string; sk: string }; condition: KvCondition },
    outbox: PlannedOutbox | undefined,
    change: Change,
    also: KvWrite[] = [],
  ): Promise<void> {
    if (!outbox && also.length === 0) {
      if ('put' in write) await this.kv.put(write.put, write.condition);
      else await this.kv.delete(write.delete, write.condition);
      return;
    }
    await this.transact([write, ...(outbox ? [outbox.write([change])] : []), ...also]);
  }

  /** A transaction whose failed condition is ConditionFailedError, as a single conditional write's. */
  private async transact(writes: KvWrite[]): Promise<void> {
    try {
      await this.kv.transact(writes);
    } catch (error) {
      if (error instanceof TransactionCanceledError) throw new ConditionFailedError();
      throw error;
    }
  }

  private fire(type: FileHookEvent['type'], database: string, blob: Blob, contentType: string | null): Promise<void> {
    return dataHooks.fire({ type, database, sha256: blob.sha256, size: blob.size, contentType }, this.scope);
  }
}

/**
 * Settles the arrivals of one file (or of one generation, `gen`). An arrival whose bytes are in the
 * store is adopted: copied under the file's own generation key, which no URL can write, and checked
 * there (size and SHA-256), then recorded as the uploader's PUT would have been, or dropped unseen
 * when they do not match. So bytes sent to the URL again later never change a recorded file. An
 * arrival whose bytes never came is dropped once its URL has expired. Every arrival of the file is
 * looked at (paged): announcements nobody followed do not hide one that arrived. True when the file
 * was recorded (or already was) by this call.
 */
export async function settleArrivals(engine: Engine, org: string, database: string, sha256: string, gen?: string): Promise<boolean> {
  const { blobs } = engine;
  if (!blobs.describe || !blobs.copy) return false;
  const { pk, prefix } = arrivalsOf(org, database, sha256);
  let recorded = false;
  let cursor: string | undefined;
  do {
    const page = await engine.kv.query({ pk, sk: { beginsWith: gen === undefined ? prefix : `${prefix}${gen}` }, cursor });
    cursor = page.cursor;
    for (const arrival of page.items) {
      if (gen !== undefined && arrival.gen !== gen) continue;
      const sent = arrivalBytesKey(org, database, sha256, String(arrival.gen));
      if (!(await blobs.head(sent))) {
        if (Number(arrival.url_expires_at) < Math.floor(engine.clock.now() / 1000)) await engine.kv.delete({ pk: arrival.pk, sk: arrival.sk });
        continue;
      }
      // A generation of this settler's own: two settling one arrival at once never write one key.
      const ownGen = newGeneration();
      const own = bytesKey(org, database, sha256, ownGen);
      await blobs.copy(sent, own);
      const arrived = await blobs.describe(own);
      if (!arrived || arrived.sha256 !== sha256 || arrived.size !== Number(arrival.size)) {
        await blobs.delete(own); // not the file announced: never visible
        await engine.kv.delete({ pk: arrival.pk, sk: arrival.sk });
      } else {
        // The arrival is consumed with the metadata write: a second settler records nothing and fires nothing.
        const scope: DataScope = { engine, principal: JSON.parse(String(arrival.principal)), call: JSON.parse(String(arrival.call)) ?? undefined };
        await new BlobService(scope).recordArrival(database, arrived, ownGen, typeof arrival.content_type === 'string' ? arrival.content_type : null, { pk: arrival.pk, sk: arrival.sk });
        recorded = true;
        // Another settler (or an earlier store of the file) won: our copy is named by nothing.
        if ((await engine.kv.get(blobMetaKey(org, database, sha256)))?.gen !== ownGen) await blobs.delete(own);
      }
      await blobs.delete(sent);
    }
  } while (cursor);
  return recorded;
}

/**
 * A file's platform event: `{database, sha256, size}`, keyed by the stored generation (a file deleted
 * and stored again is a new event; items from before generations: their creation time).
 */
function blobChange(type: 'blob.created' | 'blob.deleted', database: string, blob: Blob, item: BlobMeta): Change {
  const life = typeof item.gen === 'string' && item.gen !== '' ? item.gen : String(item.created_at ?? '');
  return { type, idempotency_key: changeKey(['blob', database, blob.sha256, life, type === 'blob.created' ? 'created' : 'deleted']), data: JSON.stringify({ database, sha256: blob.sha256, size: blob.size }) };
}

/** Spec 4.19: part numbers 1 to 10,000, written in decimal. */
function parsePartNumber(n: string): number {
  const value = /^[1-9]\d{0,4}$/.test(n) ? Number(n) : NaN;
  if (!(value >= 1 && value <= MAX_PARTS)) throw invalidPart(`The part number is an integer from 1 to ${MAX_PARTS}.`, 'n');
  return value;
}

/** Reads a body through without keeping it, still checking it is the file it claims to be. */
async function discard(body: Readable, expected: { sha256: string; size: number }): Promise<void> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of body) {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
    size += bytes.length;
    hash.update(bytes);
  }
  const actual = { sha256: hash.digest('hex'), size };
  if (size !== expected.size) throw hashMismatch(new BlobMismatchError('size', actual), expected);
  if (actual.sha256 !== expected.sha256) throw hashMismatch(new BlobMismatchError('sha256', actual), expected);
}
