/**
 * Typed helpers for the AI API's own routes (docs/ai/uploads.md, collections.md, vector.md) over the
 * client `createAiClient` makes.
 *
 * One convention for every helper: it answers the data of a success and **throws** a
 * `PlatformApiError` (`status`, `code`, `message`, `param`) for an error answer. The raw client answers
 * errors as data; the helpers throw because a flow of several calls (an upload's start, parts,
 * complete and check) has no single answer to hand back half-done, and LangChain's interfaces
 * (clients/typescript/langchain) expect a failed call to throw.
 *
 * Request bodies are the API's own, as the document types them (`top_k`, `upload_id`); the options of
 * a flow the API has no body for (`uploadFile`, `waitForItem`) are camelCase.
 */
import type { components } from './generated/ai.js';
import type { AiClient } from './index.js';

type Schemas = components['schemas'];
export type Upload = Schemas['Upload'];
/** A complete's `202`: the upload while its SHA-256 is checked, with `status_url` and `poll_after_seconds`. */
export type UploadVerifying = Schemas['UploadVerifying'];
export type CollectionItem = Schemas['CollectionItem'];
export type NewCollectionItem = { upload_id: string } | { text: string; filename: string; content_type?: string };
export type CollectionQueryRequest = Schemas['CollectionQueryRequest'];
export type CollectionQueryAnswer = Schemas['CollectionQueryAnswer'];
export type CollectionMatch = Schemas['CollectionMatch'];
export type CollectionIndexing = Schemas['CollectionIndexing'];
export type VectorIngestRequest = Schemas['VectorIngestRequest'];
export type VectorPassage = Schemas['VectorPassage'];
export type VectorIngestAnswer = Schemas['VectorIngestAnswer'];
export type VectorSkip = Schemas['VectorSkip'];
export type VectorQueryRequest = Schemas['VectorQueryRequest'];
export type VectorQueryAnswer = Schemas['VectorQueryAnswer'];
export type VectorMatch = Schemas['VectorMatch'];
export type VectorFilter = NonNullable<VectorQueryRequest['filter']>;
export type VectorDocumentDeleted = Schemas['VectorDocumentDeleted'];

/** An error answer of the platform (spec 7's `{error: {code, message, type, param}}`), thrown by the helpers. */
export class PlatformApiError extends Error {
  override readonly name = 'PlatformApiError';
  constructor(
    /** The HTTP status. */
    readonly status: number,
    /** The platform's error code (`invalid_body`, `upload_not_found`…); `unexpected_answer` for an answer not in the platform's shape (a proxy's page). */
    readonly code: string,
    /** The platform's message, as it said it. */
    message: string,
    /** The field, parameter or header at fault, when the platform named one. */
    readonly param: string | null = null,
    readonly type: string | null = null,
    /** `X-Request-Id` of the answer: quote it to an operator. */
    readonly requestId: string | null = null,
  ) {
    super(message);
  }

  override toString(): string {
    return `PlatformApiError ${this.status} ${this.code}${this.param ? ` (${this.param})` : ''}: ${this.message}`;
  }

  /** The error an answer holds: the platform's shape, or the answer's status and text when it is not that. */
  static of(response: Response, body: unknown): PlatformApiError {
    const requestId = response.headers.get('x-request-id');
    const error = (body as { error?: { code?: unknown; message?: unknown; param?: unknown; type?: unknown } } | undefined)?.error;
    if (error && typeof error.code === 'string') {
      return new PlatformApiError(response.status, error.code, String(error.message ?? ''), typeof error.param === 'string' ? error.param : null, typeof error.type === 'string' ? error.type : null, requestId);
    }
    const text = typeof body === 'string' ? body : JSON.stringify(body ?? null);
    return new PlatformApiError(response.status, 'unexpected_answer', `${response.status} ${response.statusText}: ${text.slice(0, 500)}`, null, null, requestId);
  }
}

/** The data of an openapi-fetch answer, or its error thrown as a `PlatformApiError`: for calls the helpers do not wrap. */
export function unwrap<T>(answer: { data?: T; error?: unknown; response: Response }): T {
  if (answer.response.ok && answer.error === undefined) return answer.data as T;
  throw PlatformApiError.of(answer.response, answer.error);
}

/** Per call: the `X-Operation-Id` to send (pass the same one to retry the same operation, spec 4.1); a fresh one otherwise. */
export interface OperationOptions {
  operationId?: string;
}
const operationHeader = (o: OperationOptions = {}) => (o.operationId ? { header: { 'X-Operation-Id': o.operationId } } : {});

// ---------------------------------------------------------------- uploads

export interface UploadFileOptions {
  filename: string;
  /** Its media type (`text/markdown`, `application/pdf`…). */
  contentType: string;
  /** Hours the platform keeps the file, 1 to 168 (default 24). */
  keepSourceHours?: number;
  /**
   * The upload's id (its start's `X-Operation-Id`, 8 to 128 letters, digits, `_`, `-`); a new one by
   * default. Calling again with the same id and file resumes: only the parts that did not arrive are sent.
   */
  uploadId?: string;
  /** The file's SHA-256 in lowercase hex when you have it; computed otherwise (streamed from a Blob under Node). */
  sha256?: string;
  /** Parts sent at once (default 4; each is at most 5 MiB for files up to 5 GiB). */
  concurrency?: number;
  /** Gives up waiting for a `verifying` upload's check after this long (default 30 minutes). */
  verifyTimeoutMs?: number;
  signal?: AbortSignal;
}

/** The bytes of a file, sliced without copying: a `Uint8Array`, or a `Blob` (`fs.openAsBlob(path)` reads a large file lazily). */
export type FileBytes = Uint8Array | ArrayBuffer | Blob;

/** A `verifying` upload still so this long after its complete has no check coming: complete it again (docs/ai/uploads.md, "Completing"). */
const RECOMPLETE_AFTER_MS = 15 * 60_000;

/**
 * Uploads a file whole (docs/ai/uploads.md): announces it with its size and SHA-256, sends each part
 * the answer lists to its `url` (the AI API's part route with the client's credential, or a presigned
 * S3 URL with none, asked for again once when S3 calls it expired), completes it, and reads it while
 * its check is `verifying`. Answers the upload, `completed`; throws `PlatformApiError` otherwise (a
 * failed check is `hash_mismatch`).
 */
export async function uploadFile(ai: AiClient, file: FileBytes, options: UploadFileOptions): Promise<Upload> {
  const bytes = file instanceof ArrayBuffer ? new Uint8Array(file) : file;
  const size = bytes instanceof Blob ? bytes.size : bytes.byteLength;
  const id = options.uploadId ?? `upl_${crypto.randomUUID().replaceAll('-', '')}`;
  const sha256 = options.sha256 ?? (await sha256Hex(bytes));
  let upload: Upload | UploadVerifying = unwrap(
    await ai.POST('/v1/uploads', {
      params: { header: { 'X-Operation-Id': id } },
      body: { filename: options.filename, content_type: options.contentType, size, sha256, ...(options.keepSourceHours ? { keep_source_hours: options.keepSourceHours } : {}) },
      signal: options.signal,
    }),
  );
  if (upload.status === 'completed') return upload;
  if (upload.status === 'pending') {
    await sendParts(ai, upload, bytes, options);
    upload = unwrap(await ai.POST('/v1/uploads/{id}/complete', { params: { path: { id } }, body: {}, signal: options.signal }));
  }
  return settleUpload(ai, upload, options);
}

async function sendParts(ai: AiClient, upload: Upload | UploadVerifying, bytes: Uint8Array | Blob, options: UploadFileOptions): Promise<void> {
  const queue = [...upload.parts];
  const worker = async () => {
    for (let part = queue.shift(); part; part = queue.shift()) {
      const start = (part.number - 1) * upload.part_size;
      const body = bytes.slice(start, start + part.size);
      const got = body instanceof Blob ? body.size : body.byteLength;
      if (got !== part.size) throw new RangeError(`part ${part.number} of ${upload.id} is ${part.size} bytes, the file has ${got} there: it is not the file the upload was started with`);
      await sendPart(ai, upload.id, part, body, options.signal);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(options.concurrency ?? 4, queue.length)) }, worker));
}

async function sendPart(ai: AiClient, id: string, part: Upload['parts'][number], body: Uint8Array | Blob, signal?: AbortSignal): Promise<void> {
  if (isPartRoute(part.url, id, part.number)) {
    // The AI API's part route: the client's credential and a fresh X-Operation-Id (a part sent again
    // replaces the part); fetch sets Content-Length from the bytes.
    unwrap(
      await ai.PUT('/v1/uploads/{id}/parts/{n}', {
        params: { path: { id, n: String(part.number) } },
        body: body as unknown as string,
        bodySerializer: (b: unknown) => b as RequestInit['body'],
        headers: { 'Content-Type': 'application/octet-stream' },
        signal,
      }),
    );
    return;
  }
  // A presigned S3 URL is the credential itself: a plain PUT (S3 refuses a second credential).
  let res = await fetch(part.url, { method: 'PUT', body: body as RequestInit['body'], signal });
  let text = await res.text();
  if (presignedUrlExpired(res.status, text)) {
    // Signed URLs can expire before their time on AWS (with the signing role's session): ask again once.
    const fresh = unwrap(await ai.GET('/v1/uploads/{id}', { params: { path: { id } }, signal })).parts.find((p) => p.number === part.number);
    if (!fresh) return; // it arrived after all
    res = await fetch(fresh.url, { method: 'PUT', body: body as RequestInit['body'], signal });
    text = await res.text();
  }
  if (!res.ok) throw new PlatformApiError(res.status, 'part_upload_failed', `part ${part.number} of upload ${id}: ${res.status} ${text.slice(0, 500)}`, 'n');
}

/** Our own part route has no query; a presigned URL carries its signature in one. */
function isPartRoute(url: string, id: string, n: number): boolean {
  const u = new URL(url, 'http://relative.invalid');
  return u.search === '' && u.pathname.endsWith(`/v1/uploads/${encodeURIComponent(id)}/parts/${n}`);
}

/** S3's refusal of a presigned URL past its time (docs/ai/uploads.md): nothing else is expiry. */
const presignedUrlExpired = (status: number, body: string) => (status === 403 && /<Code>AccessDenied<\/Code>\s*<Message>Request has expired</.test(body)) || (status === 400 && body.includes('<Code>ExpiredToken</Code>'));

async function settleUpload(ai: AiClient, first: Upload | UploadVerifying, options: UploadFileOptions): Promise<Upload> {
  let upload: Upload | UploadVerifying = first;
  const started = Date.now();
  let recompleted = false;
  while (upload.status === 'verifying') {
    if (Date.now() - started > (options.verifyTimeoutMs ?? 30 * 60_000)) throw new Error(`upload ${upload.id} was still verifying after ${Math.round((Date.now() - started) / 1000)} s`);
    const waitS = 'poll_after_seconds' in upload ? upload.poll_after_seconds : 5;
    await sleep(Math.max(1, waitS) * 1000, options.signal);
    if (!recompleted && Date.now() - started > RECOMPLETE_AFTER_MS) {
      recompleted = true;
      unwrap(await ai.POST('/v1/uploads/{id}/complete', { params: { path: { id: upload.id } }, body: {}, signal: options.signal }));
    }
    upload = unwrap(await ai.GET('/v1/uploads/{id}', { params: { path: { id: upload.id } }, signal: options.signal }));
  }
  if (upload.status === 'failed') throw new PlatformApiError(400, upload.error?.code ?? 'hash_mismatch', upload.error?.message ?? `upload ${upload.id} failed its check`, 'sha256');
  if (upload.status !== 'completed') throw new PlatformApiError(409, 'upload_incomplete', `upload ${upload.id} is ${upload.status} after its complete`);
  return upload;
}

/** SHA-256 in hex: streamed through node:crypto where the runtime has it (a 5 GiB Blob is never held whole), else Web Crypto. */
async function sha256Hex(bytes: Uint8Array | Blob): Promise<string> {
  const nodeCrypto = globalThis.process?.getBuiltinModule?.('node:crypto');
  if (nodeCrypto) {
    const hash = nodeCrypto.createHash('sha256');
    if (bytes instanceof Blob) for await (const chunk of bytes.stream() as unknown as AsyncIterable<Uint8Array>) hash.update(chunk);
    else hash.update(bytes);
    return hash.digest('hex');
  }
  const data = bytes instanceof Blob ? await bytes.arrayBuffer() : bytes;
  const digest = new Uint8Array(await crypto.subtle.digest('SHA-256', data as Parameters<typeof crypto.subtle.digest>[1]));
  return Array.from(digest, (b) => b.toString(16).padStart(2, '0')).join('');
}

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => (clearTimeout(timer), reject(signal.reason)), { once: true });
  });
}

// ---------------------------------------------------------------- knowledge collections

/** Adds a file to a collection: a completed upload (`{upload_id}`) or a small text (`{text, filename, content_type?}`). Answers the item, `queued`. */
export async function addCollectionItem(ai: AiClient, collectionId: string, item: NewCollectionItem, options: OperationOptions = {}): Promise<CollectionItem> {
  return unwrap(await ai.POST('/v1/collections/{id}/items', { params: { path: { id: collectionId }, ...operationHeader(options) }, body: item }));
}

export interface WaitOptions {
  /** Gives up after this long (default 10 minutes): a `TimeoutError`. */
  timeoutMs?: number;
  /** Between reads (default 1 s). */
  intervalMs?: number;
  signal?: AbortSignal;
}

/**
 * Reads the item until it is `done` or `failed`, and answers it as it then is: a `failed` item is an
 * answer, not an error (its `error` says why; the collection's other items go on).
 */
export async function waitForItem(ai: AiClient, collectionId: string, itemId: string, options: WaitOptions = {}): Promise<CollectionItem> {
  const until = Date.now() + (options.timeoutMs ?? 10 * 60_000);
  for (;;) {
    const item = unwrap(await ai.GET('/v1/collections/{id}/items/{item_id}', { params: { path: { id: collectionId, item_id: itemId } }, signal: options.signal }));
    if (item.status === 'done' || item.status === 'failed') return item;
    if (Date.now() > until) throw Object.assign(new Error(`item ${itemId} was still ${item.status} after ${options.timeoutMs ?? 600_000} ms`), { name: 'TimeoutError' });
    await sleep(options.intervalMs ?? 1000, options.signal);
  }
}

/** The best chunks of a `cloud` (or, with `vector`, `local_vectors`) collection, each with its citation, and `indexing`: how much of the collection the answer covered. */
export async function queryCollection(ai: AiClient, collectionId: string, body: CollectionQueryRequest, options: OperationOptions = {}): Promise<CollectionQueryAnswer> {
  return unwrap(await ai.POST('/v1/collections/{id}/query', { params: { path: { id: collectionId }, ...operationHeader(options) }, body }));
}

// ---------------------------------------------------------------- the vector database

/** Stores passages (1 to 100 a call); what could not be stored is in `skipped` with its reason, not an error. */
export async function vectorIngest(ai: AiClient, body: VectorIngestRequest, options: OperationOptions = {}): Promise<VectorIngestAnswer> {
  return unwrap(await ai.POST('/v1/vector/ingest', { params: operationHeader(options), body }));
}

/** Searches a scope (or both: `hybrid`) by the meaning of `query`, embedded by the database's route. */
export async function vectorQuery(ai: AiClient, body: VectorQueryRequest, options: OperationOptions = {}): Promise<VectorQueryAnswer> {
  return unwrap(await ai.POST('/v1/vector/query', { params: operationHeader(options), body }));
}

/** Removes a document's passages from a scope; later ingests of it are taken only at a higher generation. */
export async function deleteVectorDocument(ai: AiClient, documentId: string, scope: 'shared' | 'local', options: OperationOptions = {}): Promise<VectorDocumentDeleted> {
  return unwrap(await ai.DELETE('/v1/vector/documents/{document_id}', { params: { path: { document_id: documentId }, query: { scope }, ...operationHeader(options) } }));
}
