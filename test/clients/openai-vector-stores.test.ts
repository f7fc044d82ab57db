/**
 * OpenAI's vector stores, their files and file batches through the official SDK (openai 6.49.0,
 * unchanged) over the local platform (docs/ai/openai-compatibility.md, "Vector stores"): a store is a
 * cloud collection, its files are the collection's items processed by the real consumer (extraction
 * children, chunking, the fake embedder's vectors), and the SDK's pollers see OpenAI's statuses.
 * Files are uploads made with /v1/uploads (a completed upload is a file), and with files.create.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import OpenAI, { toFile } from 'openai';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';
import { call, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { docxFile, markdownFile, OUTLINE, paragraphs, pdfFile, proseLines } from '../helpers/knowledge-files.js';
import { DOCX_TYPE, zipBombDocx } from '../helpers/hostile-files.js';

let w: OpenAiWorld;
let client: OpenAI;
let c: Client;
const DAY = 86_400;
const POLL = { pollIntervalMs: 50 };

beforeAll(async () => {
  w = await startOpenAiWorld();
  client = w.client;
  c = { url: w.p.urls.ai, key: w.p.credentials.secret_key };
});

afterAll(async () => {
  await w?.close();
});

const colOf = (vsId: string) => `col_${vsId.slice(3)}`;
const textFile = (name: string, text: string) => uploadFile(c, Buffer.from(text, 'utf8'), name, 'text/markdown');

describe('vector stores', () => {
  it('create, retrieve, update, list and delete: a cloud collection under a vs_ id', async () => {
    const before = Math.floor(Date.now() / 1000);
    const vs = await client.vectorStores.create({ name: 'Handbook', metadata: { team: 'ops' }, expires_after: { anchor: 'last_active_at', days: 7 } });
    expect(vs).toMatchObject({
      id: expect.stringMatching(/^vs_[0-9a-f]{32}$/),
      object: 'vector_store',
      name: 'Handbook',
      status: 'completed',
      usage_bytes: 0,
      file_counts: { in_progress: 0, completed: 0, failed: 0, cancelled: 0, total: 0 },
      metadata: { team: 'ops' },
      expires_after: { anchor: 'last_active_at', days: 7 },
    });
    expect(vs.expires_at! - before).toBeGreaterThanOrEqual(7 * DAY - 1);
    expect(vs.expires_at! - before).toBeLessThanOrEqual(7 * DAY + 5);
    // The same store natively: a cloud collection with the earlier end.
    const native = await call(c, 'GET', `/v1/collections/${colOf(vs.id)}`);
    expect(native.body).toMatchObject({ mode: 'cloud', name: 'Handbook', retention: 'custom', expires_at: new Date(vs.expires_at! * 1000).toISOString() });

    expect(await client.vectorStores.retrieve(vs.id)).toEqual(vs);
    const renamed = await client.vectorStores.update(vs.id, { name: 'Renamed', metadata: { team: 'docs', tier: '1' }, expires_after: null });
    expect(renamed).toMatchObject({ name: 'Renamed', metadata: { team: 'docs', tier: '1' } });
    expect(renamed.expires_after).toBeUndefined();
    expect(renamed.expires_at! - renamed.created_at).toBe(30 * DAY);
    expect((await call(c, 'GET', `/v1/collections/${colOf(vs.id)}`)).body).toMatchObject({ name: 'Renamed', retention: 'standard_30d' });

    const more = [await client.vectorStores.create({ name: 'b' }), await client.vectorStores.create({ name: 'c' })];
    // A download collection is no vector store.
    expect((await call(c, 'POST', '/v1/collections', { mode: 'download' })).status).toBe(201);
    const seen: string[] = [];
    for await (const s of client.vectorStores.list({ limit: 2 })) seen.push(s.id);
    expect(seen.slice(0, 3)).toEqual([more[1].id, more[0].id, vs.id]);
    expect(seen.every((id) => id.startsWith('vs_'))).toBe(true);
    const asc = await client.vectorStores.list({ order: 'asc', after: more[0].id });
    expect(asc.data.map((s) => s.id)).toContain(more[1].id);
    expect(asc.data.map((s) => s.id)).not.toContain(vs.id);

    expect(await client.vectorStores.delete(vs.id)).toEqual({ id: vs.id, object: 'vector_store.deleted', deleted: true });
    await expect(client.vectorStores.retrieve(vs.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(client.vectorStores.retrieve(colOf(more[0].id))).resolves.toMatchObject({ id: more[0].id });
  });

  it('refuses what a collection cannot be: expiry over 30 days, a name over 63 characters, unknown fields', async () => {
    await expect(client.vectorStores.create({ expires_after: { anchor: 'last_active_at', days: 31 } })).rejects.toMatchObject({ status: 400, param: 'expires_after' });
    await expect(client.vectorStores.create({ name: 'x'.repeat(64) })).rejects.toMatchObject({ status: 400, param: 'name' });
    await expect(client.vectorStores.create({ bogus: 1 } as never)).rejects.toMatchObject({ status: 400, code: 'unsupported_field' });
  });

  it("another organization's vs_ id is NotFoundError on every route", async () => {
    const vs = await client.vectorStores.create({ name: 'mine' });
    const other = await w.otherOrganization();
    await expect(other.client.vectorStores.retrieve(vs.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(other.client.vectorStores.update(vs.id, { name: 'x' })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(other.client.vectorStores.delete(vs.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    await expect(other.client.vectorStores.files.list(vs.id)).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    expect((await client.vectorStores.retrieve(vs.id)).name).toBe('mine');
  });
});

describe('vector store files', () => {
  let vs: OpenAI.VectorStores.VectorStore;
  let pdf: string;
  let docx: string;

  beforeAll(async () => {
    vs = await client.vectorStores.create({ name: 'files' });
    pdf = await uploadFile(c, await pdfFile(proseLines(3)), 'handbook.pdf', 'application/pdf');
    docx = await uploadFile(c, await docxFile(OUTLINE), 'guide.docx', DOCX_TYPE);
  });

  it('createAndPoll of a PDF and a DOCX ends completed, with attributes; the store counts them', async () => {
    const a = await client.vectorStores.files.createAndPoll(vs.id, { file_id: pdf, attributes: { kind: 'pdf', year: 2024, draft: false } }, POLL);
    expect(a).toMatchObject({ id: pdf, object: 'vector_store.file', vector_store_id: vs.id, status: 'completed', last_error: null, attributes: { kind: 'pdf', year: 2024, draft: false } });
    expect(a.chunking_strategy).toEqual({ type: 'static', static: { max_chunk_size_tokens: 800, chunk_overlap_tokens: 400 } });
    const b = await client.vectorStores.files.createAndPoll(vs.id, { file_id: docx }, POLL);
    expect(b).toMatchObject({ id: docx, status: 'completed' });
    const store = await client.vectorStores.retrieve(vs.id);
    expect(store).toMatchObject({ status: 'completed', file_counts: { in_progress: 0, completed: 2, failed: 0, cancelled: 0, total: 2 } });
    expect(store.usage_bytes).toBe(a.usage_bytes + b.usage_bytes);
    // Attaching the same file again is the same object (no second item).
    expect(await client.vectorStores.files.create(vs.id, { file_id: pdf })).toMatchObject({ id: pdf, status: 'completed' });
    expect((await call(c, 'GET', `/v1/collections/${colOf(vs.id)}`)).body.counts.total).toBe(2);
    // Its content: the chunks' text.
    const content = await client.vectorStores.files.content(pdf, { vector_store_id: vs.id });
    const texts: string[] = [];
    for await (const part of content) texts.push(part.text!);
    expect(texts.length).toBeGreaterThan(0);
    expect(texts.join(' ')).toContain('Page 2');
  });

  it('a hostile file fails with last_error invalid_file; the list filters by status', async () => {
    const bomb = zipBombDocx();
    const id = await uploadFile(c, bomb.bytes, bomb.filename, bomb.contentType);
    const f = await client.vectorStores.files.createAndPoll(vs.id, { file_id: id }, POLL);
    expect(f.status).toBe('failed');
    expect(f.last_error).toMatchObject({ code: 'invalid_file', message: expect.stringMatching(/^too_large: /) });
    const failed = await client.vectorStores.files.list(vs.id, { filter: 'failed' });
    expect(failed.data.map((x) => x.id)).toEqual([id]);
    const completed = await client.vectorStores.files.list(vs.id, { filter: 'completed', order: 'asc' });
    expect(completed.data.map((x) => x.id)).toEqual([pdf, docx]);
    expect((await client.vectorStores.retrieve(vs.id)).file_counts).toMatchObject({ failed: 1, completed: 2, total: 3 });
  });

  it('attributes round trip through update; delete takes the item out', async () => {
    const updated = await client.vectorStores.files.update(docx, { vector_store_id: vs.id, attributes: { kind: 'docx', score: 1.5 } });
    expect(updated.attributes).toEqual({ kind: 'docx', score: 1.5 });
    expect((await client.vectorStores.files.retrieve(docx, { vector_store_id: vs.id })).attributes).toEqual({ kind: 'docx', score: 1.5 });
    expect(await client.vectorStores.files.delete(docx, { vector_store_id: vs.id })).toEqual({ id: docx, object: 'vector_store.file.deleted', deleted: true });
    await expect(client.vectorStores.files.retrieve(docx, { vector_store_id: vs.id })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    const store = await client.vectorStores.retrieve(vs.id);
    expect(store.file_counts).toMatchObject({ completed: 1, failed: 1, total: 2 });
  });

  it('a static chunking strategy is the item\'s chunking', async () => {
    const text = paragraphs(12, 8).join('\n\n');
    const id = await textFile('long.md', text);
    const f = await client.vectorStores.files.createAndPoll(vs.id, { file_id: id, chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 } } }, POLL);
    expect(f).toMatchObject({ status: 'completed', chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 100, chunk_overlap_tokens: 0 } } });
    const items = (await call(c, 'GET', `/v1/collections/${colOf(vs.id)}/items?limit=100`)).body.data as Array<{ item_id: string; upload_id: string }>;
    const item = items.find((i) => i.upload_id === id)!;
    const chunks = (await call(c, 'GET', `/v1/collections/${colOf(vs.id)}/items/${item.item_id}/chunks?limit=100`)).body.data as Array<{ tokens: number }>;
    expect(chunks.length).toBeGreaterThan(3);
    expect(Math.max(...chunks.map((k) => k.tokens))).toBeLessThanOrEqual(100);
    await expect(
      client.vectorStores.files.create(vs.id, { file_id: id, chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 99, chunk_overlap_tokens: 0 } } }),
    ).rejects.toMatchObject({ status: 400, param: 'chunking_strategy' });
    await expect(
      client.vectorStores.files.create(vs.id, { file_id: id, chunking_strategy: { type: 'static', static: { max_chunk_size_tokens: 200, chunk_overlap_tokens: 101 } } }),
    ).rejects.toMatchObject({ status: 400 });
  });
});

describe('file batches', () => {
  it('createAndPoll ends completed with the counts', async () => {
    const vs = await client.vectorStores.create({ name: 'batch' });
    const ids = [await textFile('a.md', markdownFile()), await textFile('b.md', 'Lighthouses guide ships along the rocky coast.')];
    const batch = await client.vectorStores.fileBatches.createAndPoll(vs.id, { file_ids: ids }, POLL);
    expect(batch).toMatchObject({ id: expect.stringMatching(/^vsfb_[0-9a-f]{32}$/), object: 'vector_store.files_batch', vector_store_id: vs.id, status: 'completed', file_counts: { completed: 2, total: 2, in_progress: 0, failed: 0, cancelled: 0 } });
    const files = await client.vectorStores.fileBatches.listFiles(batch.id, { vector_store_id: vs.id, order: 'asc' });
    expect(files.data.map((f) => [f.id, f.status])).toEqual(ids.map((id) => [id, 'completed']));
    // An unknown file: 404 before anything is added.
    await expect(client.vectorStores.fileBatches.create(vs.id, { file_ids: [await textFile('c.md', 'one more'), 'upl-unknown-file-id'] })).rejects.toBeInstanceOf(OpenAI.NotFoundError);
    expect((await client.vectorStores.retrieve(vs.id)).file_counts.total).toBe(2);
  });

  it('cancel while processing is held: the queued files are cancelled, the poll returns cancelled', async () => {
    const vs = await client.vectorStores.create({ name: 'cancel' });
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) ids.push(await textFile(`n${i}.md`, `Note ${i}: the harbour ferry leaves at dawn.`));
    w.embedder.behavior.stallMs = 1_200;
    try {
      const batch = await client.vectorStores.fileBatches.create(vs.id, { file_ids: ids });
      const cancelled = await client.vectorStores.fileBatches.cancel(batch.id, { vector_store_id: vs.id });
      expect(['in_progress', 'cancelled']).toContain(cancelled.status);
      expect(cancelled.file_counts.cancelled).toBeGreaterThan(0);
      const done = await client.vectorStores.fileBatches.poll(vs.id, batch.id, { pollIntervalMs: 100 });
      expect(done.status).toBe('cancelled');
      expect(done.file_counts.cancelled + done.file_counts.completed).toBe(6);
      expect(done.file_counts.in_progress).toBe(0);
      const store = await client.vectorStores.retrieve(vs.id);
      expect(store.file_counts).toEqual({ ...done.file_counts });
      const listed = await client.vectorStores.files.list(vs.id, { filter: 'cancelled' });
      expect(listed.data).toHaveLength(done.file_counts.cancelled);
      // The collection counts only the items left.
      expect((await call(c, 'GET', `/v1/collections/${colOf(vs.id)}`)).body.counts.total).toBe(done.file_counts.completed);
    } finally {
      w.embedder.behavior.stallMs = 0;
    }
  }, 60_000);

  it('uploadAndPoll: files.create, then a batch of them', async () => {
    const vs = await client.vectorStores.create({ name: 'upload' });
    const files = [await toFile(await pdfFile(proseLines(2)), 'handbook.pdf', { type: 'application/pdf' }), await toFile(await docxFile(OUTLINE), 'guide.docx', { type: DOCX_TYPE })];
    const batch = await client.vectorStores.fileBatches.uploadAndPoll(vs.id, { files }, POLL);
    expect(batch).toMatchObject({ status: 'completed', file_counts: { completed: 2, total: 2 } });
  }, 60_000);
});
