/**
 * Calls on knowledge collections as a client makes them over real HTTP: a file uploaded in parts
 * (POST /v1/uploads, PUT each part where the answer says, complete), items added and waited for,
 * queries. For the API tests, the crash test and the benchmark.
 */
import { createHash, randomUUID } from 'node:crypto';
import { postWithOperation, type Answer } from './ai-calls.js';
import { waitFor } from './wait.js';
import { putWithFreshUrl } from './presigned-parts.js';

export const op = () => `op-${randomUUID()}`;
export const sha256 = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

export interface Client {
  url: string;
  key: string;
}

export async function call(c: Client, method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; text: string; body: any }> {
  const res = await fetch(`${c.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${c.key}`,
      ...(method === 'GET' ? {} : { 'x-operation-id': op() }),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...headers,
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: parsed };
}

export const post = (c: Client, path: string, body: object, id = op()): Promise<Answer> => postWithOperation(c.url, c.key, path, id, body);

/** Uploads `bytes` whole (every part), completes it, and answers the upload's id. */
export async function uploadFile(c: Client, bytes: Uint8Array, filename: string, contentType: string, id = op()): Promise<string> {
  const started = await post(c, '/v1/uploads', { filename, content_type: contentType, size: bytes.length, sha256: sha256(bytes) }, id);
  if (started.status !== 201 && started.status !== 200) throw new Error(`upload start: ${started.status} ${started.text}`);
  const { part_size: partSize, parts } = started.body as { part_size: number; parts: { number: number; url: string }[] };
  for (const part of parts) {
    const body = bytes.subarray((part.number - 1) * partSize, part.number * partSize);
    // Our part route takes our credential; a presigned S3 URL is the credential itself (S3 refuses two).
    const put = (url: string) => {
      const ours = !/^https?:\/\//.test(url) || url.startsWith(`${c.url}/`);
      const headers: Record<string, string> = ours ? { authorization: `Bearer ${c.key}`, 'x-operation-id': op() } : {};
      return fetch(ours && !url.startsWith('http') ? `${c.url}${url}` : url, { method: 'PUT', body, headers });
    };
    // A presigned URL can expire before its time on AWS (with the signing role's session): ask again.
    const fresh = async () => (await call(c, 'GET', `/v1/uploads/${id}`)).body.parts.find((p: { number: number }) => p.number === part.number).url as string;
    const { res, text } = await putWithFreshUrl(part.url, put, fresh);
    if (res.status !== 200) throw new Error(`part ${part.number}: ${res.status} ${text}`);
  }
  const done = await post(c, `/v1/uploads/${id}/complete`, {});
  if (done.status !== 200) throw new Error(`upload complete: ${done.status} ${done.text}`);
  return id;
}

export async function createCollection(c: Client, mode: 'cloud' | 'local_vectors' | 'download', name?: string): Promise<string> {
  const r = await post(c, '/v1/collections', { mode, ...(name ? { name } : {}) });
  if (r.status !== 201) throw new Error(`collection create: ${r.status} ${r.text}`);
  return r.body.id as string;
}

export async function addItem(c: Client, collection: string, body: object, id = op()): Promise<Answer> {
  return post(c, `/v1/collections/${collection}/items`, body, id);
}

/** Polls the item until it is `done` or `failed`; answers it. */
export async function settledItem(c: Client, collection: string, itemId: string, timeoutMs = 30_000): Promise<any> {
  let item: any;
  await waitFor(
    `item ${itemId} to settle`,
    async () => {
      item = (await call(c, 'GET', `/v1/collections/${collection}/items/${itemId}`)).body;
      return item?.status === 'done' || item?.status === 'failed';
    },
    timeoutMs,
    50,
  );
  return item;
}

/** Polls the collection until no item is queued or processing; answers it. */
export async function settledCollection(c: Client, collection: string, timeoutMs = 60_000): Promise<any> {
  let body: any;
  await waitFor(
    `collection ${collection} to settle`,
    async () => {
      body = (await call(c, 'GET', `/v1/collections/${collection}`)).body;
      return body?.counts && body.counts.queued + body.counts.processing === 0;
    },
    timeoutMs,
    50,
  );
  return body;
}

export const query = (c: Client, collection: string, body: object) => post(c, `/v1/collections/${collection}/query`, body);
