/**
 * OpenAI's Files API through the official SDK, unchanged (issue 38; docs/ai/openai-compatibility.md,
 * "Files"): files.create of a PDF and a DOCX made here, paging, retrieve, content, delete, expiry
 * bounds, retries counted once (an Idempotency-Key; the SDK's own retry through a proxy that drops
 * the first answer), another organization's file, and a 200 MiB file streamed without buffering.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import OpenAI, { BadRequestError, ConflictError, NotFoundError, toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { docxFile, OUTLINE, pdfFile, proseLines } from '../helpers/knowledge-files.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';
import { bearer } from '../helpers/platform.js';

const MiB = 1024 * 1024;
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const DOCX_TYPE = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

let w: OpenAiWorld;
let client: OpenAI;
beforeAll(async () => {
  w = await startOpenAiWorld();
  client = w.client;
}, 60_000);
afterAll(() => w?.close());

const upload = async (id: string, key = w.p.credentials.secret_key): Promise<any> => (await fetch(`${w.p.urls.ai}/v1/uploads/${id}`, { headers: bearer(key) })).json();
const text = (s: string, name: string) => toFile(Buffer.from(s), name, { type: 'text/plain' });
/** Every file id the listing holds now (the SDK pages through all of it). */
async function allIds(c: OpenAI = client): Promise<string[]> {
  const ids: string[] = [];
  for await (const f of c.files.list({ limit: 100 })) ids.push(f.id);
  return ids;
}

describe('files.create', () => {
  it('stores a PDF and a DOCX made here as completed uploads: bytes, name, purpose, processed, SHA-256 kept', async () => {
    const pdf = await pdfFile(proseLines(3));
    const docx = await docxFile(OUTLINE);
    const a = await client.files.create({ file: await toFile(pdf, 'handbook.pdf', { type: 'application/pdf' }), purpose: 'assistants' });
    expect(a).toMatchObject({ object: 'file', bytes: pdf.length, filename: 'handbook.pdf', purpose: 'assistants', status: 'processed', status_details: null });
    expect(a.id).toMatch(/^file-[0-9a-f]{32}$/);
    expect(Math.abs(a.created_at - Date.now() / 1000)).toBeLessThan(60);
    expect(a.expires_at! - a.created_at).toBe(7 * 24 * 3600);
    expect(await upload(a.id)).toMatchObject({ id: a.id, status: 'completed', sha256: sha(pdf), size: pdf.length, content_type: 'application/pdf', filename: 'handbook.pdf' });

    // No media type on the part (a Blob without one): the extension names it.
    const b = await client.files.create({ file: await toFile(docx, 'outline.docx'), purpose: 'user_data' });
    expect(b).toMatchObject({ bytes: docx.length, filename: 'outline.docx', purpose: 'user_data', status: 'processed' });
    expect(await upload(b.id)).toMatchObject({ sha256: sha(docx), content_type: DOCX_TYPE });

    expect(await client.files.retrieve(a.id)).toEqual(a);
    const content = await client.files.content(b.id);
    expect(content.headers.get('content-type')).toBe(DOCX_TYPE);
    expect(Buffer.from(await content.arrayBuffer()).equals(Buffer.from(docx))).toBe(true);
  });

  it('a completed upload made through /v1/uploads is a file too (purpose assistants), a pending one is not', async () => {
    const bytes = Buffer.from('made through the uploads route');
    const start = await fetch(`${w.p.urls.ai}/v1/uploads`, {
      method: 'POST',
      headers: { ...bearer(w.p.credentials.secret_key), 'content-type': 'application/json', 'x-operation-id': `upl-${Date.now()}` },
      body: JSON.stringify({ filename: 'notes.txt', content_type: 'text/plain', size: bytes.length, sha256: sha(bytes) }),
    }).then((r) => r.json() as Promise<any>);
    await expect(client.files.retrieve(start.id)).rejects.toBeInstanceOf(NotFoundError);
    expect(await allIds()).not.toContain(start.id);
    const part = await fetch(`${w.p.urls.ai}${new URL(start.parts[0].url, w.p.urls.ai).pathname}`, { method: 'PUT', headers: { ...bearer(w.p.credentials.secret_key), 'x-operation-id': `prt-${Date.now()}` }, body: bytes });
    expect(part.status).toBe(200);
    const done = await fetch(`${w.p.urls.ai}/v1/uploads/${start.id}/complete`, {
      method: 'POST',
      headers: { ...bearer(w.p.credentials.secret_key), 'content-type': 'application/json', 'x-operation-id': `cpl-${Date.now()}` },
      body: '{}',
    });
    expect(done.status).toBe(200);
    expect(await client.files.retrieve(start.id)).toMatchObject({ id: start.id, filename: 'notes.txt', bytes: bytes.length, purpose: 'assistants', status: 'processed' });
    expect(await allIds()).toContain(start.id);
  });

  it('expires_after: 1 hour to 7 days, rounded up to whole hours; outside, 400 naming expires_after[seconds]', async () => {
    const hour = await client.files.create({ file: await text('an hour', 'hour.txt'), purpose: 'user_data', expires_after: { anchor: 'created_at', seconds: 3600 } });
    expect(hour.expires_at! - hour.created_at).toBe(3600);
    const rounded = await client.files.create({ file: await text('an hour and a half', 'half.txt'), purpose: 'user_data', expires_after: { anchor: 'created_at', seconds: 5400 } });
    expect(rounded.expires_at! - rounded.created_at).toBe(7200);
    const week = await client.files.create({ file: await text('a week', 'week.txt'), purpose: 'user_data', expires_after: { anchor: 'created_at', seconds: 604800 } });
    expect(week.expires_at! - week.created_at).toBe(604800);
    for (const seconds of [3599, 604801, 2592000]) {
      const error = await client.files.create({ file: await text('x', 'x.txt'), purpose: 'user_data', expires_after: { anchor: 'created_at', seconds } }).catch((e) => e);
      expect(error, String(seconds)).toBeInstanceOf(BadRequestError);
      expect(error.error).toMatchObject({ code: 'invalid_body', param: 'expires_after[seconds]' });
    }
  });

  it('a purpose other than assistants or user_data: 400 naming purpose', async () => {
    const error = await client.files.create({ file: await text('x', 'x.jsonl'), purpose: 'fine-tune' }).catch((e) => e);
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error.error).toMatchObject({ code: 'invalid_body', param: 'purpose' });
  });
});

describe('files.list, retrieve, delete', () => {
  it('pages with after (3 pages of 2), newest first or oldest first, narrowed by purpose', async () => {
    const other = await w.otherOrganization();
    const made: string[] = [];
    for (let i = 0; i < 6; i++) made.push((await other.client.files.create({ file: await text(`file ${i}`, `f${i}.txt`), purpose: i % 2 ? 'user_data' : 'assistants' })).id);
    const pages: string[][] = [];
    let page = await other.client.files.list({ limit: 2 });
    pages.push(page.data.map((f) => f.id));
    while (page.hasNextPage()) {
      page = await page.getNextPage();
      pages.push(page.data.map((f) => f.id));
    }
    expect(pages).toEqual([made.slice(4).reverse(), made.slice(2, 4).reverse(), made.slice(0, 2).reverse()]);
    const asc: string[] = [];
    for await (const f of other.client.files.list({ limit: 4, order: 'asc' })) asc.push(f.id);
    expect(asc).toEqual(made);
    const userData: string[] = [];
    for await (const f of other.client.files.list({ purpose: 'user_data' })) userData.push(f.id);
    expect(userData).toEqual([made[5], made[3], made[1]]);
    // OpenAI's limit goes to 10,000: taken, a page holds 100 at most.
    expect((await other.client.files.list({ limit: 10_000 })).data).toHaveLength(6);
  });

  it('delete: gone from retrieve, content and the listing; a second delete 404', async () => {
    const f = await client.files.create({ file: await text('to delete', 'gone.txt'), purpose: 'assistants' });
    expect(await client.files.delete(f.id)).toEqual({ id: f.id, object: 'file', deleted: true });
    await expect(client.files.retrieve(f.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.files.content(f.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(client.files.delete(f.id)).rejects.toBeInstanceOf(NotFoundError);
    expect(await allIds()).not.toContain(f.id);
    expect((await fetch(`${w.p.urls.ai}/v1/uploads/${f.id}`, { headers: bearer(w.p.credentials.secret_key) })).status).toBe(404);
  });

  it("another organization's file: 404 on every route, indistinguishable from an unknown id", async () => {
    const other = await w.otherOrganization();
    const theirs = await other.client.files.create({ file: await text('theirs', 'theirs.txt'), purpose: 'assistants' });
    for (const call of [() => client.files.retrieve(theirs.id), () => client.files.content(theirs.id), () => client.files.delete(theirs.id)]) {
      const error = await call().catch((e) => e);
      expect(error).toBeInstanceOf(NotFoundError);
      expect(error.error).toMatchObject({ code: 'upload_not_found', message: `No file "${theirs.id}" in this workspace.` });
    }
    expect(await allIds()).not.toContain(theirs.id);
    expect(await other.client.files.retrieve(theirs.id)).toMatchObject({ id: theirs.id });
  });
});

describe('retries count once', () => {
  it('the same Idempotency-Key twice: one file, one listing entry; other bytes with it: 409, not retried', async () => {
    const key = `files-${Date.now()}`;
    const bytes = Buffer.from('idempotent bytes');
    const first = await client.files.create({ file: await toFile(bytes, 'once.txt'), purpose: 'assistants' }, { headers: { 'Idempotency-Key': key } });
    const second = await client.files.create({ file: await toFile(bytes, 'once.txt'), purpose: 'assistants' }, { headers: { 'Idempotency-Key': key } });
    expect(second).toEqual(first);
    expect((await allIds()).filter((id) => id === first.id)).toHaveLength(1);

    let calls = 0;
    const counting = w.clientFor(w.p.credentials.secret_key, { fetch: (url: any, init: any) => (String(url).endsWith('/v1/files') && calls++, fetch(url, init)) });
    const error = await counting.files.create({ file: await toFile(Buffer.from('other bytes'), 'once.txt'), purpose: 'assistants' }, { headers: { 'Idempotency-Key': key } }).catch((e) => e);
    expect(error).toBeInstanceOf(ConflictError);
    expect(error.error).toMatchObject({ code: 'operation_id_reused', param: 'idempotency-key' });
    expect(error.headers.get('x-should-retry')).toBe('false');
    expect(calls).toBe(1);
  });

  it('a retried upload without a key (the answer lost on the way): the SDK retries, one file', async () => {
    const proxy = await droppingProxy(new URL(w.p.urls.ai));
    try {
      const retrying = w.clientFor(w.p.credentials.secret_key, { baseURL: `http://127.0.0.1:${proxy.port}/v1`, maxRetries: 2 });
      const name = `retried-${Date.now()}.txt`;
      const file = await retrying.files.create({ file: await toFile(Buffer.from('sent twice, kept once'), name), purpose: 'assistants' });
      expect(proxy.dropped).toBe(1);
      expect(proxy.retryCounts).toEqual(['0', '1']);
      const named: string[] = [];
      for await (const f of client.files.list({ limit: 100 })) if (f.filename === name) named.push(f.id);
      expect(named).toEqual([file.id]);
      // A deliberate second upload of the same file (no retry header) is a file of its own.
      const again = await client.files.create({ file: await toFile(Buffer.from('sent twice, kept once'), name), purpose: 'assistants' });
      expect(again.id).not.toBe(file.id);
    } finally {
      await proxy.close();
    }
  });
});

describe('a large file', () => {
  it('200 MiB streamed from a generator: stored whole, its SHA-256 right, the platform’s memory not growing by its size', async () => {
    const size = 200 * MiB;
    // The SDK runs in a child process, so only the platform's memory is this process's.
    const child = spawn(process.execPath, ['--input-type=module', '-e', LARGE_UPLOAD], {
      cwd: process.cwd(),
      env: { ...process.env, AI_URL: `${w.p.urls.ai}/v1`, KEY: w.p.credentials.secret_key, MIB_COUNT: String(size / MiB) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 20);
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    clearInterval(sampler);
    expect(code, err).toBe(0);
    const { file, sha256 } = JSON.parse(out);
    expect(file).toMatchObject({ bytes: size, filename: 'big.bin', status: 'processed' });
    expect((await upload(file.id)).sha256).toBe(sha256);
    expect(peak - before, `RSS grew ${Math.round((peak - before) / MiB)} MiB`).toBeLessThan(80 * MiB);
    // The content streams back as it was stored (the SDK's files.content, read as a stream).
    const back = createHash('sha256');
    const res = await client.files.content(file.id);
    let n = 0;
    for await (const part of res.body as unknown as AsyncIterable<Uint8Array>) {
      back.update(part);
      n += part.length;
    }
    expect(n).toBe(size);
    expect(back.digest('hex')).toBe(sha256);
  }, 180_000);
});

/** The child's SDK call: a file of MIB_COUNT MiB from a generator (toStreamingFile: never a whole File in memory). */
const LARGE_UPLOAD = `
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import OpenAI, { toStreamingFile } from 'openai';
const client = new OpenAI({ apiKey: process.env.KEY, baseURL: process.env.AI_URL, organization: null, project: null });
const hash = createHash('sha256');
async function* bytes() {
  for (let i = 0; i < Number(process.env.MIB_COUNT); i++) {
    const chunk = Buffer.alloc(1024 * 1024, i % 251);
    hash.update(chunk);
    yield chunk;
  }
}
const file = await client.files.create({ file: toStreamingFile(bytes(), 'big.bin', { type: 'application/octet-stream' }), purpose: 'user_data' });
process.stdout.write(JSON.stringify({ file, sha256: hash.digest('hex') }));
`;

/**
 * A TCP proxy in front of the platform that forwards the first POST /v1/files whole but drops its
 * answer (closes the client's connection when the platform answers): the SDK sees a lost connection
 * and retries. Records each request's X-Stainless-Retry-Count.
 */
async function droppingProxy(target: URL): Promise<{ port: number; dropped: number; retryCounts: string[]; close(): Promise<void> }> {
  const state = { dropped: 0, retryCounts: [] as string[] };
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    const upstream = connect(Number(target.port), target.hostname);
    sockets.add(upstream);
    let head = '';
    let seen = false;
    let drop = false;
    client.on('data', (data) => {
      if (!seen && head.length < 8192) {
        head += data.toString('latin1');
        const m = /^POST \/v1\/files HTTP[\s\S]*?\r\nx-stainless-retry-count: (\d+)/im.exec(head);
        if (m) {
          seen = true;
          state.retryCounts.push(m[1]);
          if (state.dropped === 0) drop = true;
        }
      }
      upstream.write(data);
    });
    upstream.on('data', (data) => {
      if (drop) {
        state.dropped++;
        drop = false;
        client.destroy();
        upstream.destroy();
        return;
      }
      client.write(data);
    });
    client.on('end', () => upstream.end());
    upstream.on('end', () => client.end());
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get dropped() {
      return state.dropped;
    },
    retryCounts: state.retryCounts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
