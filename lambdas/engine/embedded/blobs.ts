/**
 * BlobStore on the local filesystem (embedded engine).
 *
 * Layout under `rootDir`:
 *   objects/  one file per key: each `/`-separated key segment is escaped, directories end in `.d`
 *             and blob files in `.blob`, so keys `a` and `a/b` (a file and a directory) never collide
 *   uploads/<uploadId>/  one directory per multipart upload: `key` holds its object key, parts are
 *             `<partNumber>.<sha256>.part` (the part's etag is its SHA-256)
 *   joined/<uploadId>/   an upload joined by joinMultipart and not yet checked: its directory moved
 *             here whole, with `parts.json` naming the part files in order (checkJoined reads them)
 *   tmp/      bytes being written; renamed into place only once complete, fsynced and checked
 *
 * Every write goes to tmp/ first, is fsynced, and is renamed into place only when its SHA-256 and
 * size match the expectation. tmp/ is on the same filesystem, so the rename is atomic: a reader sees
 * the old blob or the new one, and a crash never leaves a half-written blob under its key (at worst a
 * stray file in tmp/, which belongs to no key).
 */
import { createHash, randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, readFile, readdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import type { BlobBody, BlobExpectation, BlobStore, StoredBlob } from '../ports.js';
import { BlobMismatchError, EngineError, EngineLimitError, InvalidPartError, UploadNotFoundError } from '../errors.js';
import { LIMITS } from '../limits.js';
import { checkExpectation, checkPartList, checkPartNumber } from '../adapter-kit/blob-checks.js';

/** S3 keys are at most 1024 bytes of UTF-8. */
const MAX_KEY_BYTES = 1024;
/** Escaped segments longer than this are replaced by a hash, to stay under file-name limits (255). */
const MAX_SEGMENT_CHARS = 200;
const UPLOAD_ID = /^[0-9a-f]{32}$/;

export class FileBlobStore implements BlobStore {
  private readonly objectsDir: string;
  private readonly uploadsDir: string;
  private readonly tmpDir: string;
  private readonly joinedDir: string;
  private ready?: Promise<void>;

  constructor(rootDir: string) {
    this.objectsDir = join(rootDir, 'objects');
    this.uploadsDir = join(rootDir, 'uploads');
    this.tmpDir = join(rootDir, 'tmp');
    this.joinedDir = join(rootDir, 'joined');
  }

  async put(key: string, body: BlobBody, expect?: BlobExpectation): Promise<StoredBlob> {
    const path = this.objectPath(key);
    await this.init();
    const tmp = this.tmpPath();
    try {
      const stored = await writeFileFrom(tmp, body, expect?.size);
      checkExpectation(stored, expect);
      await moveIntoPlace(tmp, path);
      return stored;
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async get(key: string): Promise<{ body: Readable; size: number } | undefined> {
    const path = this.objectPath(key);
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    // Size and bytes come from the same open file, even if the key is replaced meanwhile.
    try {
      const { size } = await handle.stat();
      return { body: handle.createReadStream(), size };
    } catch (err) {
      await handle.close();
      throw err;
    }
  }

  async head(key: string): Promise<{ size: number } | undefined> {
    try {
      const { size } = await stat(this.objectPath(key));
      return { size };
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  async filePath(key: string): Promise<string | undefined> {
    return (await this.head(key)) ? this.objectPath(key) : undefined;
  }

  async delete(key: string): Promise<void> {
    try {
      await unlink(this.objectPath(key));
    } catch (err) {
      if (!isMissing(err)) throw err;
    }
  }

  async createMultipart(key: string): Promise<string> {
    this.objectPath(key); // validates the key
    await this.init();
    const uploadId = randomBytes(16).toString('hex');
    const dir = join(this.uploadsDir, uploadId);
    await mkdir(dir);
    await writeFile(join(dir, 'key'), key);
    return uploadId;
  }

  async uploadPart(
    key: string,
    uploadId: string,
    partNumber: number,
    body: BlobBody,
    size?: number,
  ): Promise<{ etag: string; size: number }> {
    checkPartNumber(partNumber);
    const dir = await this.uploadDir(key, uploadId);
    const tmp = this.tmpPath();
    try {
      const stored = await writeFileFrom(tmp, body, size);
      if (size !== undefined && stored.size !== size) throw new BlobMismatchError('size', stored);
      const previous = (await this.partFiles(dir)).get(partNumber) ?? [];
      try {
        await rename(tmp, join(dir, `${partNumber}.${stored.sha256}.part`));
      } catch (err) {
        if (isMissing(err)) throw new UploadNotFoundError(`no multipart upload ${uploadId}`); // aborted meanwhile
        throw err;
      }
      // Uploading a part number again replaces the earlier part, as in S3.
      for (const old of previous) if (old.etag !== stored.sha256) await rm(old.path, { force: true });
      return { etag: stored.sha256, size: stored.size };
    } finally {
      await rm(tmp, { force: true });
    }
  }

  async completeMultipart(
    key: string,
    uploadId: string,
    parts: { partNumber: number; etag: string }[],
    expect?: BlobExpectation,
  ): Promise<StoredBlob> {
    const path = this.objectPath(key);
    const dir = await this.uploadDir(key, uploadId);
    const files = await this.listedParts(dir, parts);

    return this.storeParts(files.map((f) => f.path), dir, path, expect);
  }

  /**
   * The parts read in order through SHA-256 into tmp/, renamed to `path` only if they meet `expect`;
   * either way the parts' directory goes (like the AWS adapter: the upload is consumed and nothing
   * wrong is kept), except when `signal` stops the read half way: the next try needs the parts.
   */
  private async storeParts(files: string[], dir: string, path: string, expect: BlobExpectation | undefined, signal?: AbortSignal): Promise<StoredBlob> {
    const tmp = this.tmpPath();
    try {
      const stored = await writeFileFrom(tmp, Readable.from(concatFiles(files, signal)), expect?.size);
      try {
        checkExpectation(stored, expect);
      } catch (err) {
        await rm(dir, { recursive: true, force: true });
        throw err;
      }
      await moveIntoPlace(tmp, path);
      await rm(dir, { recursive: true, force: true });
      return stored;
    } catch (err) {
      if (signal?.aborted && !(err instanceof BlobMismatchError)) throw signal.reason;
      throw err;
    } finally {
      await rm(tmp, { force: true });
    }
  }

  /** The parts checked and listed in order, then the upload's directory moved under joined/ (atomic): no part can change after. */
  async joinMultipart(key: string, uploadId: string, parts: { partNumber: number; etag: string }[]): Promise<void> {
    const dir = await this.uploadDir(key, uploadId);
    const files = await this.listedParts(dir, parts);
    await writeFile(join(dir, 'parts.json'), JSON.stringify(files.map((f) => basename(f.path))));
    await mkdir(this.joinedDir, { recursive: true });
    try {
      await rename(dir, join(this.joinedDir, uploadId));
    } catch (err) {
      if (isMissing(err)) throw new UploadNotFoundError(`no multipart upload ${uploadId}`); // aborted or joined meanwhile
      throw err;
    }
  }

  /** The joined parts read in order through SHA-256 into tmp/, renamed to the key only if they match. */
  async checkJoined(key: string, uploadId: string, expect: BlobExpectation, signal?: AbortSignal): Promise<StoredBlob> {
    const path = this.objectPath(key);
    if (typeof uploadId !== 'string' || !UPLOAD_ID.test(uploadId)) throw new UploadNotFoundError(`nothing joined for upload ${uploadId}`);
    const dir = join(this.joinedDir, uploadId);
    let names: string[];
    try {
      if ((await readFile(join(dir, 'key'), 'utf8')) !== key) throw new UploadNotFoundError(`nothing joined for upload ${uploadId} at ${key}`);
      names = JSON.parse(await readFile(join(dir, 'parts.json'), 'utf8')) as string[];
    } catch (err) {
      if (isMissing(err)) throw new UploadNotFoundError(`nothing joined for upload ${uploadId}`);
      throw err;
    }
    await this.init();
    return this.storeParts(names.map((n) => join(dir, n)), dir, path, expect, signal).catch((err: unknown) => {
      // A part gone mid-read: another check of this upload finished (kept or discarded the bytes) and removed them.
      if (isMissing(err)) throw new UploadNotFoundError(`nothing joined for upload ${uploadId} any more`);
      throw err;
    });
  }

  async listParts(key: string, uploadId: string): Promise<{ partNumber: number; etag: string; size: number }[]> {
    const dir = await this.uploadDir(key, uploadId);
    const parts: { partNumber: number; etag: string; size: number }[] = [];
    for (const [partNumber, files] of await this.partFiles(dir)) {
      // Two files under one number only while a replacement is being renamed in: either is a whole part.
      const file = files[files.length - 1];
      const size = await stat(file.path).then((s) => s.size, (err) => (isMissing(err) ? undefined : Promise.reject(err)));
      if (size !== undefined) parts.push({ partNumber, etag: file.etag, size });
    }
    return parts.sort((a, b) => a.partNumber - b.partNumber);
  }

  async abortMultipart(key: string, uploadId: string): Promise<void> {
    let dir: string;
    try {
      dir = await this.uploadDir(key, uploadId);
    } catch (err) {
      // Joined and never checked (its check abandoned): the parts go too, else nothing would remove them.
      if (err instanceof UploadNotFoundError && UPLOAD_ID.test(uploadId)) await rm(join(this.joinedDir, uploadId), { recursive: true, force: true });
      throw err;
    }
    await rm(dir, { recursive: true, force: true });
  }

  /** The files of the listed parts, in order, checked as S3 checks a complete's list (the upload stays open on a refusal). */
  private async listedParts(dir: string, parts: { partNumber: number; etag: string }[]): Promise<{ path: string; size: number }[]> {
    checkPartList(parts);
    const uploaded = await this.partFiles(dir);
    const files: { path: string; size: number }[] = [];
    for (const part of parts) {
      const file = uploaded.get(part.partNumber)?.find((p) => p.etag === unquote(part.etag));
      // S3 answers InvalidPart; the upload stays open.
      if (!file) throw new InvalidPartError(`part ${part.partNumber} with etag ${part.etag} was not uploaded`);
      files.push({ path: file.path, size: (await stat(file.path)).size });
    }
    files.forEach((file, i) => {
      if (i < files.length - 1 && file.size < LIMITS.multipartMinPartBytes) {
        throw new EngineLimitError(
          'multipart_part',
          `part ${parts[i].partNumber} is ${file.size} bytes; every part but the last needs at least ${LIMITS.multipartMinPartBytes}`,
        );
      }
    });
    return files;
  }

  // ---------- helpers ----------

  private init(): Promise<void> {
    this.ready ??= Promise.all(
      [this.objectsDir, this.uploadsDir, this.tmpDir].map((dir) => mkdir(dir, { recursive: true })),
    ).then(() => undefined);
    return this.ready;
  }

  private tmpPath(): string {
    return join(this.tmpDir, `${randomBytes(12).toString('hex')}.tmp`);
  }

  /** The file for a key. Throws for keys S3 would refuse or that could escape the root. */
  private objectPath(key: string): string {
    if (typeof key !== 'string' || key.length === 0) throw new EngineError('blob key must not be empty');
    if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw new EngineError(`blob key longer than ${MAX_KEY_BYTES} bytes`);
    const segments = key.split('/');
    if (segments.some((s) => s === '.' || s === '..')) throw new EngineError(`blob key must not contain "." or ".." segments: ${key}`);
    const last = segments.pop() as string;
    return join(this.objectsDir, ...segments.map((s) => `${escapeSegment(s)}.d`), `${escapeSegment(last)}.blob`);
  }

  /** The directory of an open upload for this key, or UploadNotFoundError. */
  private async uploadDir(key: string, uploadId: string): Promise<string> {
    if (typeof uploadId !== 'string' || !UPLOAD_ID.test(uploadId)) throw new UploadNotFoundError(`no multipart upload ${uploadId}`);
    const dir = join(this.uploadsDir, uploadId);
    let owner: string;
    try {
      owner = await readFile(join(dir, 'key'), 'utf8');
    } catch (err) {
      if (isMissing(err)) throw new UploadNotFoundError(`no multipart upload ${uploadId}`);
      throw err;
    }
    // S3 answers NoSuchUpload when the key does not match the upload's.
    if (owner !== key) throw new UploadNotFoundError(`no multipart upload ${uploadId} for key ${key}`);
    return dir;
  }

  private async partFiles(dir: string): Promise<Map<number, { etag: string; path: string }[]>> {
    const parts = new Map<number, { etag: string; path: string }[]>();
    for (const name of await readdir(dir)) {
      const m = /^(\d+)\.([0-9a-f]{64})\.part$/.exec(name);
      if (!m) continue;
      const n = Number(m[1]);
      parts.set(n, [...(parts.get(n) ?? []), { etag: m[2], path: join(dir, name) }]);
    }
    return parts;
  }
}

/** Escapes a key segment to `[a-z0-9._-]` plus `%XX` (upper case too, for case-insensitive filesystems). */
function escapeSegment(segment: string): string {
  let out = '';
  for (const byte of Buffer.from(segment, 'utf8')) {
    const ch = String.fromCharCode(byte);
    out += /[a-z0-9._-]/.test(ch) ? ch : `%${byte.toString(16).padStart(2, '0').toUpperCase()}`;
  }
  // `~` never appears in an escaped segment, so hashed names cannot collide with escaped ones.
  if (out.length > MAX_SEGMENT_CHARS) out = `~${createHash('sha256').update(segment).digest('hex')}`;
  return out;
}

/** Streams the body into a new file at `path` while hashing it, then fsyncs it. Writes stop past `limit` bytes (the rest is still hashed). */
async function writeFileFrom(path: string, body: BlobBody, limit?: number): Promise<StoredBlob> {
  const hash = createHash('sha256');
  let size = 0;
  const handle = await open(path, 'wx');
  try {
    const write = async (chunk: Uint8Array) => {
      hash.update(chunk);
      const before = size;
      size += chunk.byteLength;
      if (limit !== undefined && size > limit) {
        // Over the expected size: it will be refused, so stop writing but keep hashing for the report.
        if (before < limit) await writeAll(handle, chunk.subarray(0, limit - before));
        return;
      }
      await writeAll(handle, chunk);
    };
    if (body instanceof Uint8Array) {
      await write(body);
    } else {
      for await (const chunk of body) await write(typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Uint8Array));
    }
    await handle.sync();
  } finally {
    await handle.close();
  }
  return { size, sha256: hash.digest('hex') };
}

async function writeAll(handle: FileHandle, chunk: Uint8Array): Promise<void> {
  let offset = 0;
  while (offset < chunk.byteLength) {
    const { bytesWritten } = await handle.write(chunk, offset, chunk.byteLength - offset);
    offset += bytesWritten;
  }
}

/** Atomically replaces `path` with the (fsynced) file `tmp`, then fsyncs the directory so the rename survives a crash. */
async function moveIntoPlace(tmp: string, path: string): Promise<void> {
  const dir = dirname(path);
  await mkdir(dir, { recursive: true });
  await rename(tmp, path);
  try {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Some platforms (Windows) cannot fsync a directory; the rename itself is still atomic.
  }
}

async function* concatFiles(paths: string[], signal?: AbortSignal): AsyncGenerator<Buffer> {
  for (const path of paths) {
    for await (const chunk of createReadStream(path)) {
      signal?.throwIfAborted();
      yield chunk as Buffer;
    }
  }
}


/** S3 ignores the double quotes around etags when comparing them. */
function unquote(etag: string): string {
  return etag.replace(/"/g, '');
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}
