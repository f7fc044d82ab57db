/**
 * Files under concurrency, through the local server:
 * - PUTs and DELETEs of one file, interleaved, never leave metadata without bytes (HEAD and GET
 *   agree, a GET answers the exact bytes), and a re-PUT always leaves the file readable;
 * - a re-PUT repairs a file whose metadata outlived its bytes;
 * - two concurrent multipart completes, or a complete and an abort, give one winner with the whole
 *   file and `404 upload_not_found` to the loser, never a 500.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';

let p: TestPlatform;
let key: string;
const DB = 'races';

beforeAll(async () => {
  p = await startTestPlatform();
  key = p.credentials.secret_key;
  const res = await fetch(`${p.urls.data}/v1/databases/${DB}`, { method: 'PUT', headers: bearer(key) });
  expect(res.status).toBe(201);
});
afterAll(async () => p?.close());

const sha = (data: Uint8Array) => createHash('sha256').update(data).digest('hex');
const url = (hash: string, rest = '') => `${p.urls.data}/v1/databases/${DB}/blobs/${hash}${rest}`;
/** Each call reads its answer's body whole, so no connection is left waiting. */
const drained = async (res: Promise<Response>): Promise<{ status: number; text: string }> => {
  const r = await res;
  return { status: r.status, text: await r.text() };
};
const put = (data: Buffer) => drained(fetch(url(sha(data)), { method: 'PUT', headers: bearer(key), body: data }));
const del = (hash: string) => drained(fetch(url(hash), { method: 'DELETE', headers: bearer(key) }));
const head = (hash: string) => drained(fetch(url(hash), { method: 'HEAD', headers: bearer(key) }));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** GET: the status and, on 200, whether the body is exactly `data`. */
async function get(data: Buffer): Promise<{ status: number; exact?: boolean }> {
  const res = await fetch(url(sha(data)), { headers: bearer(key) });
  const body = Buffer.from(await res.arrayBuffer());
  return res.status === 200 ? { status: 200, exact: body.equals(data) } : { status: res.status };
}

async function statusOf(res: Promise<{ status: number; text: string }>): Promise<string> {
  const r = await res;
  const text = r.text;
  const code = text ? (JSON.parse(text) as any).error?.code : undefined;
  return code ? `${r.status} ${code}` : String(r.status);
}

/** Every file under the data directory whose name contains `hash` (the bytes, wherever the engine keeps them). */
async function filesNamed(hash: string, dir = p.dataDir): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await filesNamed(hash, path)));
    else if (entry.name.includes(hash) && entry.name.endsWith('.blob')) out.push(path);
  }
  return out;
}

describe('PUT and DELETE of one file, interleaved', () => {
  it('never leaves metadata without bytes; a re-PUT always leaves the file readable', async () => {
    const problems: string[] = [];
    const round = async (r: number) => {
      const data = randomBytes(32 * 1024 + r);
      const hash = sha(data);
      if (r % 2 === 0) expect([200, 201]).toContain((await put(data)).status); // half the rounds start with the file present
      const answers = await Promise.all([statusOf(put(data)), statusOf(del(hash)), statusOf(put(data)), statusOf(del(hash)), statusOf(put(data))]);
      for (const a of answers) if (!['200', '201', '204', '404 blob_not_found'].includes(a)) problems.push(`round ${r}: answer ${a}`);
      const [h, g] = [(await head(hash)).status, await get(data)];
      if (h !== g.status || (g.status === 200 && !g.exact)) problems.push(`round ${r}: HEAD ${h}, GET ${JSON.stringify(g)} after ${answers.join(', ')}`);
      const again = await put(data);
      const after = await get(data);
      if (![200, 201].includes(again.status) || after.status !== 200 || !after.exact) {
        problems.push(`round ${r}: re-PUT ${again.status}, then GET ${JSON.stringify(after)}`);
      }
    };
    for (let batch = 0; batch < 6; batch++) await Promise.all(Array.from({ length: 8 }, (_, i) => round(batch * 8 + i)));
    expect(problems).toEqual([]);
  }, 20_000);

  it('a PUT landing between a DELETE removing the metadata and removing the bytes: the PUT\'s 201 means a readable file', async () => {
    // The blob store is slow to delete (as S3 or a paused Lambda may be): each DELETE's byte removal
    // waits until a PUT of the same file, sent once the metadata is gone, has answered.
    const blobs = p.engine.blobs;
    const original = blobs.delete;
    const waiting = new Map<string, { entered: () => void; putDone: Promise<unknown> }>();
    blobs.delete = async (k: string) => {
      const hook = [...waiting.entries()].find(([hash]) => k.includes(hash))?.[1];
      if (hook) {
        hook.entered();
        await Promise.race([hook.putDone, sleep(2000)]);
      }
      return original.call(blobs, k);
    };
    const problems: string[] = [];
    try {
      const round = async (r: number) => {
        const data = randomBytes(16 * 1024 + r);
        const hash = sha(data);
        expect((await put(data)).status).toBe(201);
        let entered!: () => void;
        const metadataGone = new Promise<void>((resolve) => (entered = resolve));
        const putAnswer = metadataGone.then(() => statusOf(put(data)));
        waiting.set(hash, { entered, putDone: putAnswer });
        const answers = await Promise.all([statusOf(del(hash)), putAnswer]);
        waiting.delete(hash);
        const [h, g] = [(await head(hash)).status, await get(data)];
        if (answers[1] === '201' && (h !== 200 || g.status !== 200 || !g.exact)) {
          problems.push(`round ${r}: HEAD ${h}, GET ${JSON.stringify(g)} after DELETE ${answers[0]}, PUT ${answers[1]}`);
        }
        const again = await put(data);
        const after = await get(data);
        if (![200, 201].includes(again.status) || after.status !== 200 || !after.exact) {
          problems.push(`round ${r}: re-PUT ${again.status}, then GET ${JSON.stringify(after)}`);
        }
      };
      await Promise.all(Array.from({ length: 10 }, (_, r) => round(r)));
    } finally {
      blobs.delete = original;
    }
    expect(problems).toEqual([]);
  });

  it('a re-PUT stores the bytes again when the metadata outlived them', async () => {
    const data = randomBytes(10_000);
    const hash = sha(data);
    expect((await put(data)).status).toBe(201);
    const files = await filesNamed(hash);
    expect(files.length).toBeGreaterThan(0);
    for (const f of files) await unlink(f); // the bytes are lost under live metadata
    expect((await head(hash)).status).toBe(200);
    expect([200, 201]).toContain((await put(data)).status);
    expect(await get(data)).toEqual({ status: 200, exact: true });
  });
});

describe('multipart complete racing complete or abort', () => {
  async function openUpload(data: Buffer): Promise<{ id: string; parts: { part_number: number; etag: string }[] }> {
    const hash = sha(data);
    const created = await fetch(url(hash, '/uploads'), { method: 'POST', headers: bearer(key) });
    expect(created.status).toBe(201);
    const { upload_id: id } = (await created.json()) as any;
    const part = await fetch(url(hash, `/uploads/${id}/parts/1`), { method: 'PUT', headers: bearer(key), body: data });
    expect(part.status).toBe(200);
    const { etag } = (await part.json()) as any;
    return { id, parts: [{ part_number: 1, etag }] };
  }
  const complete = (data: Buffer, id: string, parts: object) =>
    drained(fetch(url(sha(data), `/uploads/${id}/complete`), { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json' }, body: JSON.stringify({ parts }) }));
  const abort = (data: Buffer, id: string) => drained(fetch(url(sha(data), `/uploads/${id}`), { method: 'DELETE', headers: bearer(key) }));

  it('two completes: one 201 with the whole file, the other 404 upload_not_found (or 409), never a 500', async () => {
    const problems: string[] = [];
    const round = async (r: number) => {
      const data = randomBytes(256 * 1024 + r);
      const { id, parts } = await openUpload(data);
      const answers = (await Promise.all([statusOf(complete(data, id, parts)), statusOf(complete(data, id, parts))])).sort();
      const ok = answers[0] === '201' && (answers[1] === '404 upload_not_found' || answers[1].startsWith('409'));
      const whole = await get(data);
      if (!ok || whole.status !== 200 || !whole.exact) problems.push(`round ${r}: ${answers.join(', ')}; GET ${JSON.stringify(whole)}`);
    };
    for (let batch = 0; batch < 5; batch++) await Promise.all(Array.from({ length: 8 }, (_, i) => round(batch * 8 + i)));
    expect(problems).toEqual([]);
  }, 20_000);

  it('complete and abort: either the file is whole (abort 404) or absent (complete 404), never a 500', async () => {
    const problems: string[] = [];
    const round = async (r: number) => {
      const data = randomBytes(256 * 1024 + r);
      const { id, parts } = await openUpload(data);
      const [c, a] = await Promise.all([statusOf(complete(data, id, parts)), statusOf(abort(data, id))]);
      const whole = await get(data);
      const completed = c === '201' && a === '404 upload_not_found' && whole.status === 200 && whole.exact;
      const aborted = c === '404 upload_not_found' && a === '204' && whole.status === 404;
      if (!completed && !aborted) problems.push(`round ${r}: complete ${c}, abort ${a}; GET ${JSON.stringify(whole)}`);
    };
    for (let batch = 0; batch < 5; batch++) await Promise.all(Array.from({ length: 8 }, (_, i) => round(batch * 8 + i)));
    expect(problems).toEqual([]);
  }, 20_000);
});
