/**
 * BlobStore on one S3 bucket (AWS engine).
 *
 * A blob must never become visible under its key unless its bytes match the expectation, and S3
 * cannot check a SHA-256 we only learn at the end of the stream. So streamed bodies go to a staging
 * key (`.staging/<random>`) while being hashed; only when hash and size match is the staged object
 * copied to its key (CopyObject is atomic), and the staging object is deleted either way.
 * A body already in memory (a Uint8Array, or a stream of unknown length that ends within 8 MiB)
 * is hashed before anything is sent and then put straight to its key.
 *
 * Multipart uploads are staged the same way: the upload is created on a staging key, completed
 * there, read back to hash it, and copied to its key only if it matches. The upload id handed out
 * is `<staging id>.<S3 upload id>`; the part etag is `<S3 etag>:<part size>` so that the part-size
 * limit can be checked before CompleteMultipartUpload, as the embedded engine does.
 *
 * Limitation: CopyObject copies at most 5 GiB; larger objects would need UploadPartCopy. Files are
 * at most 5 GiB, so that is not implemented.
 *
 * Staging objects left behind by a crashed Lambda belong to no key; a bucket lifecycle rule on the
 * `.staging/` prefix (lib/storage.ts, 7 days) and one on incomplete multipart uploads clean them up.
 */
import { createHash, randomBytes } from 'node:crypto';
import { Readable, Transform, type TransformCallback } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  ListPartsCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  PutObjectCommand,
  UploadPartCommand,
  type S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import { STAGING_PREFIX } from './staging.js';
import type { BlobBody, BlobExpectation, BlobStore, StoredBlob } from '../ports.js';
import { BlobMismatchError, EngineError, EngineLimitError, UploadNotFoundError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { checkExpectation, checkPartList, checkPartNumber } from '../adapter-kit/blob-checks.js';
import { isNotFound, translateAwsError } from './errors.js';

/** Part size used when a streamed body of unknown length is staged with a multipart upload. */
const STAGING_PART_BYTES = 8 * 1024 * 1024;
/** Largest single PutObject / CopyObject. */
const MAX_SINGLE_OBJECT_BYTES = 5 * 1024 * 1024 * 1024;
const STAGING_ID = /^[0-9a-f]{32}$/;

export class S3BlobStore implements BlobStore {
  constructor(
    private readonly client: S3Client,
    private readonly bucket: string,
  ) {}

  async put(key: string, body: BlobBody, expect?: BlobExpectation): Promise<StoredBlob> {
    if (body instanceof Uint8Array) {
      // Already in memory: check before sending anything, then one atomic PutObject to the key.
      const stored = { size: body.byteLength, sha256: createHash('sha256').update(body).digest('hex') };
      checkExpectation(stored, expect);
      await this.call(() =>
        this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body: body, ContentLength: body.byteLength })),
      );
      return stored;
    }

    const staging = newStagingKey();
    let staged = true;
    try {
      let stored: StoredBlob;
      if (expect?.size !== undefined && expect.size <= MAX_SINGLE_OBJECT_BYTES) {
        stored = await this.stageWithPut(staging, body, expect.size);
      } else {
        const unsized = await this.putUnsized(key, staging, body, expect);
        if (!unsized.staged) {
          staged = false;
          return unsized.stored;
        }
        stored = unsized.stored;
      }
      checkExpectation(stored, expect);
      await this.copy(staging, key);
      return stored;
    } finally {
      if (staged) await this.deleteQuietly(staging);
    }
  }

  async get(key: string): Promise<{ body: Readable; size: number } | undefined> {
    const out = await this.call(() => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key })), { missing: true });
    if (!out) return undefined;
    return { body: out.Body as Readable, size: out.ContentLength ?? 0 };
  }

  async head(key: string): Promise<{ size: number } | undefined> {
    const out = await this.call(() => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key })), { missing: true });
    return out && { size: out.ContentLength ?? 0 };
  }

  async delete(key: string): Promise<void> {
    await this.call(() => this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key })));
  }

  async createMultipart(key: string): Promise<string> {
    void key; // the upload lives on a staging key until it is complete and checked
    const stagingId = randomBytes(16).toString('hex');
    const out = await this.call(() =>
      this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: STAGING_PREFIX + stagingId })),
    );
    if (!out.UploadId) throw new EngineError('CreateMultipartUpload returned no UploadId');
    return `${stagingId}.${out.UploadId}`;
  }

  async uploadPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: BlobBody,
    size?: number,
  ): Promise<{ etag: string; size: number }> {
    checkPartNumber(partNumber);
    const upload = parseUploadId(this.bucket, uploadId);

    if (body instanceof Uint8Array) {
      if (size !== undefined && size !== body.byteLength) {
        throw new BlobMismatchError('size', { size: body.byteLength, sha256: createHash('sha256').update(body).digest('hex') });
      }
      const out = await this.call(() =>
        this.client.send(
          new UploadPartCommand({ ...upload, PartNumber: partNumber, Body: body, ContentLength: body.byteLength }),
        ),
      );
      return { etag: partEtag(out.ETag, body.byteLength), size: body.byteLength };
    }

    // UploadPart needs a Content-Length. Without one, the part (the caller's unit of transfer) is
    // read into memory first; callers streaming big parts should pass their size.
    if (size === undefined) {
      const chunks: Buffer[] = [];
      for await (const chunk of body) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk as Uint8Array));
      return this.uploadPart(key, uploadId, partNumber, Buffer.concat(chunks));
    }

    const stored = await this.sendStream(body, size, (Body, abortSignal) =>
      this.client.send(new UploadPartCommand({ ...upload, PartNumber: partNumber, Body, ContentLength: size }), { abortSignal }),
    );
    if (stored.result === undefined) throw new BlobMismatchError('size', stored.blob);
    return { etag: partEtag(stored.result.ETag, stored.blob.size), size: stored.blob.size };
  }

  async completeMultipart(
    key: string,
    uploadId: string,
    parts: { partNumber: number; etag: string }[],
    expect?: BlobExpectation,
  ): Promise<StoredBlob> {
    const upload = parseUploadId(this.bucket, uploadId);
    await this.join(upload, parts);
    try {
      const stored = await this.hashObject(upload.Key);
      if (!stored) throw new UploadNotFoundError(`the joined upload ${uploadId} is gone`);
      checkExpectation(stored, expect);
      await this.copy(upload.Key, key);
      return stored;
    } finally {
      await this.deleteQuietly(upload.Key);
    }
  }

  /** CompleteMultipartUpload on the staging key: S3 joins the parts there, nothing reads them. */
  async joinMultipart(key: string, uploadId: string, parts: { partNumber: number; etag: string }[]): Promise<void> {
    void key; // joined on the staging key, moved to `key` by checkJoined
    await this.join(parseUploadId(this.bucket, uploadId), parts);
  }

  /**
   * The joined object, still on its staging key, read back through SHA-256 (S3 keeps no whole-object
   * checksum of a multipart object) and copied to `key` only if it matches. An abort leaves it there.
   */
  async checkJoined(key: string, uploadId: string, expect: BlobExpectation, signal?: AbortSignal): Promise<StoredBlob> {
    const staging = parseUploadId(this.bucket, uploadId).Key;
    // Whatever failed once the signal fired failed because of it: the caller tells a stop by its reason.
    const stopped = (err: unknown) => (signal?.aborted ? signal.reason : err);
    const stored = await this.hashObject(staging, signal).catch((err: unknown) => Promise.reject(stopped(err)));
    if (!stored) throw new UploadNotFoundError(`nothing joined for upload ${uploadId}`);
    try {
      checkExpectation(stored, expect);
    } catch (err) {
      await this.deleteQuietly(staging); // wrong bytes: never copied anywhere a key names
      throw err;
    }
    const copy = () => this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: key, CopySource: `${this.bucket}/${encodeCopyKey(staging)}` }), { abortSignal: signal });
    const copied = await this.call(copy, { missing: true }).catch((err: unknown) => Promise.reject(stopped(err)));
    // Gone since it was hashed: another check of the same upload took it (copied and deleted it).
    if (!copied) throw new UploadNotFoundError(`nothing joined for upload ${uploadId}`);
    await this.deleteQuietly(staging);
    return stored;
  }

  private async join(upload: { Bucket: string; Key: string; UploadId: string }, parts: { partNumber: number; etag: string }[]): Promise<void> {
    checkPartList(parts);
    const s3Parts = parts.map((part, i) => {
      const { etag, size } = parsePartEtag(part.etag);
      if (size !== undefined && i < parts.length - 1 && size < LIMITS.multipartMinPartBytes) {
        throw new EngineLimitError(
          'multipart_part',
          `part ${part.partNumber} is ${size} bytes; every part but the last needs at least ${LIMITS.multipartMinPartBytes}`,
        );
      }
      return { PartNumber: part.partNumber, ETag: etag };
    });

    await this.call(() =>
      this.client.send(new CompleteMultipartUploadCommand({ ...upload, MultipartUpload: { Parts: s3Parts } })),
    );
  }

  async abortMultipart(key: string, uploadId: string): Promise<void> {
    void key;
    const upload = parseUploadId(this.bucket, uploadId);
    await this.call(() => this.client.send(new AbortMultipartUploadCommand(upload)));
  }

  async listParts(key: string, uploadId: string): Promise<{ partNumber: number; etag: string; size: number }[]> {
    void key;
    const upload = parseUploadId(this.bucket, uploadId);
    const parts: { partNumber: number; etag: string; size: number }[] = [];
    let marker: string | undefined;
    do {
      const out = await this.call(() => this.client.send(new ListPartsCommand({ ...upload, PartNumberMarker: marker })));
      for (const part of out.Parts ?? []) {
        if (part.PartNumber !== undefined) parts.push({ partNumber: part.PartNumber, etag: partEtag(part.ETag, part.Size ?? 0), size: part.Size ?? 0 });
      }
      marker = out.IsTruncated ? out.NextPartNumberMarker : undefined;
    } while (marker);
    return parts.sort((a, b) => a.partNumber - b.partNumber);
  }

  // ---------- URLs for bodies too big for the runtime (docs/data/blobs.md, "Large files on AWS") ----------

  async downloadUrl(key: string, expiresInSeconds: number): Promise<string> {
    return this.sign(new GetObjectCommand({ Bucket: this.bucket, Key: key, ResponseContentType: 'application/octet-stream' }), expiresInSeconds);
  }

  /**
   * Content-Length is signed (S3 takes no other length), and the SHA-256 goes with the URL as S3's
   * checksum condition (S3 refuses other bytes); describe() checks again what arrived either way.
   */
  async uploadUrl(key: string, expect: Required<BlobExpectation>, expiresInSeconds: number): Promise<string> {
    const command = new PutObjectCommand({
      Bucket: this.bucket,
      Key: key,
      ContentLength: expect.size,
      ChecksumAlgorithm: 'SHA256',
      ChecksumSHA256: Buffer.from(expect.sha256, 'hex').toString('base64'),
    });
    return this.sign(command, expiresInSeconds);
  }

  async partUrl(key: string, uploadId: string, partNumber: number, size: number, expiresInSeconds: number): Promise<string> {
    void key;
    checkPartNumber(partNumber);
    const upload = parseUploadId(this.bucket, uploadId);
    return this.sign(new UploadPartCommand({ ...upload, PartNumber: partNumber, ContentLength: size }), expiresInSeconds);
  }

  /** S3's stored SHA-256 of a whole object when it kept one (an upload through uploadUrl), else the bytes read back. */
  async describe(key: string): Promise<StoredBlob | undefined> {
    const out = await this.call(() => this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key, ChecksumMode: 'ENABLED' })), { missing: true });
    if (!out) return undefined;
    const kept = out.ChecksumSHA256 && out.ChecksumType !== 'COMPOSITE' ? Buffer.from(out.ChecksumSHA256, 'base64').toString('hex') : undefined;
    if (kept && kept.length === 64) return { size: out.ContentLength ?? 0, sha256: kept };
    return this.hashObject(key);
  }

  private async sign(command: GetObjectCommand | PutObjectCommand | UploadPartCommand, expiresIn: number): Promise<string> {
    try {
      // content-length signed: the URL takes exactly the size it was made for.
      return await getSignedUrl(this.client, command as Parameters<typeof getSignedUrl>[1], { expiresIn, signableHeaders: new Set(['content-length']) });
    } catch (err) {
      throw translateAwsError(err, 'S3');
    }
  }

  // ---------- staging ----------

  /** One streamed PutObject of exactly `size` bytes to the staging key. */
  private async stageWithPut(staging: string, body: Readable, size: number): Promise<StoredBlob> {
    const sent = await this.sendStream(body, size, (Body, abortSignal) =>
      this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: staging, Body, ContentLength: size }), { abortSignal }),
    );
    return sent.blob; // a wrong size is reported by checkExpectation
  }

  /**
   * Sends a stream whose length should be `size` through `send`, hashing it on the way. The body is
   * cut at `size` bytes; a shorter one aborts the request (S3 would otherwise wait for the missing
   * bytes), as does a failing one. `result` is undefined when the size did not match; whatever
   * the request stored then is the caller's to discard.
   */
  private async sendStream<T>(
    body: Readable,
    size: number,
    send: (body: Readable, abortSignal: AbortSignal) => Promise<T>,
  ): Promise<{ blob: StoredBlob; result?: T }> {
    const hasher = new HashingTransform(size);
    const abort = new AbortController();
    // Whichever side fails first is the cause, and stops the other: a failing body aborts the
    // request, a failed request stops reading the body (else the pipeline would wait forever).
    let failure: { cause: unknown } | undefined;
    const piped = pipeline(body, hasher).catch((err: unknown) => {
      failure ??= { cause: err };
      abort.abort();
      throw err;
    });
    const sending = this.call(() => send(hasher, abort.signal)).catch((err: unknown) => {
      failure ??= { cause: err };
      hasher.destroy();
      throw err;
    });
    const [, sendResult] = await Promise.allSettled([piped, sending]);
    if (hasher.mismatched && hasher.ended) return { blob: hasher.result() };
    if (failure) throw failure.cause;
    return { blob: hasher.result(), result: (sendResult as PromiseFulfilledResult<T>).value };
  }

  /**
   * A stream of unknown length. Up to one part (8 MiB) it is read into memory, checked, and put
   * straight to `key` (`staged: false`); beyond that it is staged with a multipart upload of 8 MiB
   * parts, completed only if it matches `expect` (else aborted).
   */
  private async putUnsized(
    key: string,
    staging: string,
    body: Readable,
    expect?: BlobExpectation,
  ): Promise<{ stored: StoredBlob; staged: boolean }> {
    const hasher = new HashingTransform();
    const piped = pipeline(body, hasher);
    piped.catch(() => undefined); // observed below; this only keeps an early failure from counting as unhandled
    let uploadId: string | undefined;
    const parts: { PartNumber: number; ETag?: string }[] = [];
    let buffered: Buffer[] = [];
    let bufferedBytes = 0;

    const flushPart = async () => {
      const Body = Buffer.concat(buffered, bufferedBytes);
      buffered = [];
      bufferedBytes = 0;
      if (uploadId === undefined) {
        const out = await this.call(() => this.client.send(new CreateMultipartUploadCommand({ Bucket: this.bucket, Key: staging })));
        uploadId = out.UploadId;
      }
      const PartNumber = parts.length + 1;
      if (PartNumber > LIMITS.multipartMaxParts) throw new EngineLimitError('multipart_part', 'body too large for a multipart upload');
      const out = await this.call(() =>
        this.client.send(
          new UploadPartCommand({ Bucket: this.bucket, Key: staging, UploadId: uploadId, PartNumber, Body, ContentLength: Body.byteLength }),
        ),
      );
      parts.push({ PartNumber, ETag: out.ETag });
    };

    try {
      for await (const chunk of hasher) {
        buffered.push(chunk as Buffer);
        bufferedBytes += (chunk as Buffer).byteLength;
        if (bufferedBytes >= STAGING_PART_BYTES) await flushPart();
      }
      await piped;
      const stored = hasher.result();
      if (uploadId === undefined) {
        // Fits in one part, already in memory and checked: one atomic PutObject to the key.
        checkExpectation(stored, expect);
        const Body = Buffer.concat(buffered, bufferedBytes);
        await this.call(() => this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: key, Body, ContentLength: Body.byteLength })));
        return { stored, staged: false };
      }
      if (bufferedBytes > 0) await flushPart();
      // The whole body is hashed now: a mismatch need not be assembled at all.
      checkExpectation(stored, expect);
      await this.call(() =>
        this.client.send(
          new CompleteMultipartUploadCommand({ Bucket: this.bucket, Key: staging, UploadId: uploadId, MultipartUpload: { Parts: parts } }),
        ),
      );
      uploadId = undefined;
      return { stored, staged: true };
    } catch (err) {
      hasher.destroy();
      await piped.catch(() => undefined);
      if (uploadId !== undefined) {
        const UploadId = uploadId;
        await this.client.send(new AbortMultipartUploadCommand({ Bucket: this.bucket, Key: staging, UploadId })).catch(() => undefined);
      }
      throw err;
    }
  }

  /** Streams an object back to hash it (undefined when it is missing); `signal` stops the read (its reason thrown). */
  private async hashObject(key: string, signal?: AbortSignal): Promise<StoredBlob | undefined> {
    const out = await this.call(() => this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }), { abortSignal: signal }), { missing: true });
    if (!out) return undefined;
    const hash = createHash('sha256');
    let size = 0;
    const body = out.Body as Readable;
    const stop = () => body.destroy(signal?.reason as Error);
    signal?.addEventListener('abort', stop, { once: true });
    try {
      for await (const chunk of body) {
        hash.update(chunk as Buffer);
        size += (chunk as Buffer).byteLength;
      }
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw translateAwsError(err, 'S3');
    } finally {
      signal?.removeEventListener('abort', stop);
    }
    return { size, sha256: hash.digest('hex') };
  }

  async copy(from: string, to: string, signal?: AbortSignal): Promise<void> {
    await this.call(() =>
      this.client.send(new CopyObjectCommand({ Bucket: this.bucket, Key: to, CopySource: `${this.bucket}/${encodeCopyKey(from)}` }), { abortSignal: signal }),
    );
  }

  private async deleteQuietly(key: string): Promise<void> {
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
    } catch {
      // Best effort: a staging object left behind belongs to no key (a lifecycle rule expires it).
    }
  }

  /** Runs an S3 call, translating its errors; with `missing`, a missing key resolves to undefined. */
  private call<T>(fn: () => Promise<T>): Promise<T>;
  private call<T>(fn: () => Promise<T>, options: { missing: true }): Promise<T | undefined>;
  private async call<T>(fn: () => Promise<T>, options?: { missing: true }): Promise<T | undefined> {
    try {
      return await fn();
    } catch (err) {
      if (options?.missing && isNotFound(err)) return undefined;
      throw translateAwsError(err, 'S3');
    }
  }
}

/**
 * Hashes and counts what passes through. With `limit`, at most `limit` bytes are passed on (the
 * rest is still hashed) and the stream fails at its end if fewer came, so a request sent with
 * Content-Length `limit` neither overflows nor waits for bytes that never come.
 */
class HashingTransform extends Transform {
  private readonly hash = createHash('sha256');
  private size = 0;
  private digest?: string;
  mismatched = false;
  ended = false;

  constructor(private readonly limit?: number) {
    super();
  }

  override _transform(chunk: Buffer | string, _encoding: BufferEncoding, callback: TransformCallback): void {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    this.hash.update(bytes);
    const before = this.size;
    this.size += bytes.byteLength;
    if (this.limit === undefined || this.size <= this.limit) return callback(null, bytes);
    if (before < this.limit) return callback(null, bytes.subarray(0, this.limit - before));
    callback();
  }

  override _flush(callback: TransformCallback): void {
    this.ended = true;
    this.digest = this.hash.digest('hex');
    if (this.limit !== undefined && this.size !== this.limit) {
      this.mismatched = true;
      // Too long: exactly `limit` bytes went out, so the request completes normally (its object is
      // discarded by the caller). Too short: fail, so the request is aborted instead of hanging.
      if (this.size < this.limit) return callback(new BlobMismatchError('size', this.result()));
    }
    callback();
  }

  result(): StoredBlob {
    if (this.digest === undefined) throw new EngineError('stream not fully read');
    return { size: this.size, sha256: this.digest };
  }
}

function newStagingKey(): string {
  return STAGING_PREFIX + randomBytes(16).toString('hex');
}

function parseUploadId(bucket: string, uploadId: string): { Bucket: string; Key: string; UploadId: string } {
  const dot = typeof uploadId === 'string' ? uploadId.indexOf('.') : -1;
  const stagingId = dot > 0 ? uploadId.slice(0, dot) : '';
  const s3UploadId = dot > 0 ? uploadId.slice(dot + 1) : '';
  if (!STAGING_ID.test(stagingId) || s3UploadId === '') throw new UploadNotFoundError(`no multipart upload ${uploadId}`);
  return { Bucket: bucket, Key: STAGING_PREFIX + stagingId, UploadId: s3UploadId };
}

function partEtag(s3Etag: string | undefined, size: number): string {
  return `${(s3Etag ?? '').replace(/"/g, '')}:${size}`;
}

/** Splits `<S3 etag>:<size>`; an etag in another form is passed through and S3 checks it alone. */
function parsePartEtag(etag: string): { etag: string; size?: number } {
  const m = /^(.*):(\d+)$/.exec(etag);
  return m ? { etag: `"${m[1].replace(/"/g, '')}"`, size: Number(m[2]) } : { etag };
}

function encodeCopyKey(key: string): string {
  return key.split('/').map(encodeURIComponent).join('/');
}

