/**
 * POST /v1/files's body (docs/ai/openai-compatibility.md, "Files"): a multipart/form-data form, parsed
 * as it streams (busboy) and never held whole in memory. Its one file part goes to a spool file while
 * its SHA-256 and size are counted, because an upload is announced with both before its parts are
 * sent (lambdas/knowledge/uploads.ts); the fields are short strings. Every fault of the form is a 4xx
 * (never a 500) and leaves no spool file behind.
 */
import { createHash, randomUUID } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import busboy from 'busboy';
import { PlatformError } from '../../shared/errors.js';
import { settings } from '../../shared/settings.js';

const MIB = 1024 * 1024;
/** OpenAI's limit for one file of files.create. */
export const MAX_FILE_BYTES = 512 * MIB;
/** Where file parts are spooled (the OS's temporary directory: Lambda's /tmp too); one file per request, removed when it ends. */
export const SPOOL_DIR = join(tmpdir(), 'openai-file-spool');
/** Spooled uploads one process takes at once: each holds up to 512 MiB of disk until it is stored. */
export const MAX_SPOOLS = 8;
/**
 * Of which one organization holds at most this many: where one process serves every organization
 * (`npm start`), one tenant's forms never take every slot (a stalled form also loses its slot after
 * FILE_FORM_IDLE_MS without bytes).
 */
export const MAX_SPOOLS_PER_ORGANIZATION = 2;
/** RFC 2046 5.1.1: a boundary is 1 to 70 characters. */
const BOUNDARY = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;"]{1,70}))\s*(?:;|$)/i;
/** Transfer encodings that leave the bytes as sent (RFC 7578 4.7 deprecates the header; base64 would need decoding). */
const IDENTITY_ENCODINGS = new Set(['7bit', '8bit', 'binary']);

let spooling = 0;
const spoolingBy = new Map<string, number>();
let swept: Promise<void> | undefined;

/** Whether process `pid` runs (one we may not signal runs too). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A process killed mid-form (SIGKILL, out of memory) leaves its spool file, up to 512 MiB, that no
 * request will remove: once per process, before its first spool, the files of processes no longer
 * running go, and those named by this pid (a restarted runtime may get its pid again; this process
 * has made none yet). A pid reused by an unrelated process keeps its files until that one ends.
 */
async function sweepDeadSpools(): Promise<void> {
  const names = await readdir(SPOOL_DIR).catch(() => [] as string[]);
  await Promise.all(
    names.map(async (name) => {
      const pid = Number(/^(\d+)-/.exec(name)?.[1]);
      if (Number.isSafeInteger(pid) && pid > 0 && (pid === process.pid || !alive(pid))) await rm(join(SPOOL_DIR, name), { force: true });
    }),
  );
}

/** The form's file part, on disk: remove() once it is stored (idempotent). */
export interface SpooledFile {
  path: string;
  /** As the part named it (RFC 5987 `filename*` decoded), path dropped by the parser; undefined without one. */
  filename: string | undefined;
  /** The part's Content-Type (`application/octet-stream` when it gave none). */
  mimeType: string;
  size: number;
  sha256: string;
  remove(): Promise<void>;
}

export interface FileForm {
  /** Field values by name (only the names asked for; no prototype, so `__proto__` is never one). */
  fields: Record<string, string>;
  file: SpooledFile | undefined;
}

export interface FormRules {
  /** The text fields the form may carry, each at most once. */
  fields: readonly string[];
  /** The file part's name. */
  fileField: string;
  /** Largest file part in bytes: past it the error `tooLarge` makes. */
  maxFileBytes: number;
  tooLarge: () => PlatformError;
}

const invalid = (message: string, param: string | null = null) => new PlatformError('invalid_body', message, param);

/**
 * Reads the form from `body` to its end: the fields, and the file part spooled (SHA-256, size). Refuses
 * (400) a body that is not multipart/form-data, a malformed one, a part whose name the rules do not
 * list (`unsupported_field`), a field sent twice or over 1 KiB, a second file, more parts than the
 * rules allow; 413 a file over `maxFileBytes`; 429 past MAX_SPOOLS forms at once. On any fault the
 * spool file is removed before the error is thrown.
 */
export async function parseFileForm(body: Readable, contentType: string | undefined, rules: FormRules, organizationId: string): Promise<FileForm> {
  const type = contentType ?? '';
  if (!/^multipart\/form-data\s*;/i.test(type) || !BOUNDARY.test(type)) {
    throw invalid('Send the body as multipart/form-data with a boundary of 1 to 70 characters (the SDK’s files.create does).');
  }
  // Never fails a request: a file it cannot remove stays for the next process to try.
  await (swept ??= sweepDeadSpools().catch(() => {}));
  const mine = spoolingBy.get(organizationId) ?? 0;
  if (spooling >= MAX_SPOOLS || mine >= MAX_SPOOLS_PER_ORGANIZATION) {
    const held = mine >= MAX_SPOOLS_PER_ORGANIZATION ? `Your organization is sending ${MAX_SPOOLS_PER_ORGANIZATION} files in one request each to this server already` : 'This server is storing as many files sent in one request as it takes at once';
    throw new PlatformError('rate_limited', `${held}; retry shortly, or send large files through /v1/uploads.`, { retryAfterSeconds: 5 });
  }
  spooling++;
  spoolingBy.set(organizationId, mine + 1);
  await mkdir(SPOOL_DIR, { recursive: true, mode: 0o700 });
  const path = join(SPOOL_DIR, `${process.pid}-${randomUUID()}`);
  const remove = () => rm(path, { force: true });
  try {
    return await readForm(body, type, rules, path, remove);
  } catch (error) {
    await remove();
    throw error;
  } finally {
    spooling--;
    const left = (spoolingBy.get(organizationId) ?? 1) - 1;
    if (left > 0) spoolingBy.set(organizationId, left);
    else spoolingBy.delete(organizationId);
  }
}

function readForm(body: Readable, contentType: string, rules: FormRules, path: string, remove: () => Promise<void>): Promise<FileForm> {
  return new Promise<FileForm>((resolve, reject) => {
    const fields: Record<string, string> = Object.create(null);
    const known = new Set(rules.fields);
    let file: SpooledFile | undefined;
    let spooled: Promise<void> | undefined;
    let settled = false;
    let parser: busboy.Busboy;

    // A form that stops sending frees its slot: no bytes for FILE_FORM_IDLE_MS is a refusal.
    const idleMs = settings().fileFormIdleMs;
    const idle = setTimeout(() => fail(invalid(`The form sent no bytes for ${idleMs / 1000} s; send it again.`)), idleMs);
    const fail = (error: unknown) => {
      clearTimeout(idle);
      if (settled) return;
      settled = true;
      // Stop reading: the runtime answers and drops the rest of the body with the connection.
      body.unpipe(parser);
      parser.destroy();
      reject(error instanceof PlatformError ? error : invalid('The multipart body ended early or could not be read.'));
    };

    try {
      parser = busboy({
        headers: { 'content-type': contentType },
        // Names sent raw (not RFC 5987) are UTF-8, as browsers' and undici's FormData send them.
        defParamCharset: 'utf8',
        // busboy reports `files` and `fields` once one more arrives, `parts` once the count is reached: so
        // parts is one over the most a form may carry (the fields and the file; a part without a
        // Content-Disposition counts, though it is skipped), and the file limit one byte over ours.
        limits: { files: 1, fields: rules.fields.length, parts: rules.fields.length + 2, fieldSize: 1024, fileSize: rules.maxFileBytes + 1 },
      });
    } catch {
      return reject(invalid('Send the body as multipart/form-data with a boundary (the SDK’s files.create does).'));
    }

    parser.on('field', (name, value, info) => {
      if (settled) return;
      if (name === rules.fileField) return fail(invalid(`Send "${name}" as a file part (with a filename), not as text.`, name));
      if (!known.has(name)) return fail(new PlatformError('unsupported_field', `Unknown form field "${name.slice(0, 64)}".`, name.slice(0, 64)));
      if (name in fields) return fail(invalid(`The form field "${name}" is sent twice.`, name));
      if (info.valueTruncated) return fail(invalid(`The form field "${name}" is over 1024 bytes.`, name));
      if (!IDENTITY_ENCODINGS.has(info.encoding.toLowerCase())) return fail(invalid(`The form field "${name}" has Content-Transfer-Encoding ${info.encoding.slice(0, 32)}; send it as is.`, name));
      fields[name] = value;
    });

    parser.on('file', (name, stream, info) => {
      // A part left unread when the form fails is destroyed by the parser with an error: never an
      // uncaught one, which would end the process serving every organization (the spool's pipeline
      // has its own listener).
      stream.on('error', () => {});
      if (settled) return void stream.resume();
      if (name !== rules.fileField) {
        stream.resume();
        return fail(known.has(name) ? invalid(`The form field "${name}" is text, not a file.`, name) : new PlatformError('unsupported_field', `Unknown form field "${name.slice(0, 64)}".`, name.slice(0, 64)));
      }
      if (!IDENTITY_ENCODINGS.has(info.encoding.toLowerCase())) {
        stream.resume();
        return fail(invalid(`The file part has Content-Transfer-Encoding ${info.encoding.slice(0, 32)}; send the bytes as they are.`, rules.fileField));
      }
      const hash = createHash('sha256');
      let size = 0;
      const count = new Transform({
        transform(chunk: Buffer, _encoding, done) {
          size += chunk.length;
          if (size > rules.maxFileBytes) return done(rules.tooLarge());
          hash.update(chunk);
          done(null, chunk);
        },
      });
      spooled = pipeline(stream, count, createWriteStream(path, { flags: 'wx', mode: 0o600 })).then(() => {
        file = { path, filename: info.filename, mimeType: info.mimeType, size, sha256: hash.digest('hex'), remove };
      });
      // A file over the limit fails here at once, not when the rest of the body has been read.
      spooled.catch(fail);
    });

    parser.on('filesLimit', () => fail(invalid('The form carries one file; this one carries more.', rules.fileField)));
    parser.on('fieldsLimit', () => fail(invalid(`The form carries at most the fields ${rules.fields.join(', ')}, each once.`)));
    parser.on('partsLimit', () => fail(invalid(`The form carries at most ${rules.fields.length + 1} parts.`)));
    parser.on('error', (error: Error) => fail(invalid(`The multipart body is malformed (${String(error.message).slice(0, 80)}).`)));
    parser.on('close', () => {
      if (settled) return;
      (spooled ?? Promise.resolve()).then(
        () => {
          clearTimeout(idle);
          if (settled) return;
          settled = true;
          resolve({ fields, file });
        },
        fail,
      );
    });
    // The route's limit on the whole body (streamBody) or a client gone: the error, as it is.
    body.on('error', fail);
    body.on('data', () => idle.refresh());
    body.on('end', () => clearTimeout(idle));
    body.pipe(parser);
  });
}
