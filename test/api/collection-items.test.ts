/**
 * Collection items through the local server with a real HTTP client, fake upstreams and files the
 * test makes (docs/ai/collections.md): uploads of a PDF, a DOCX, an HTML page and Markdown become
 * items, processed by the local queue's consumer into packages whose chunks cite page and heading;
 * queries report `indexing` truthfully (during processing, with failed items); local_vectors and
 * download modes; every code of the routes; deletion and re-processing; expiry removes the data.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, fakeVector, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { addItem, call, createCollection, op, post, query, settledCollection, settledItem, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { docxFile, htmlFile, markdownFile, pdfFile, OUTLINE } from '../helpers/knowledge-files.js';
import { waitFor } from '../helpers/wait.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import type { Clock } from '../../lambdas/engine/ports.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { itemsPk, packageBlobKey } from '../../lambdas/knowledge/collection-keys.js';
import { sweepExpiredCollections } from '../../lambdas/knowledge/collections.js';

const DAY_MS = 24 * 3600 * 1000;
let offsetMs = 0;
const clock: Clock = { now: () => systemClock.now() + offsetMs, sleep: systemClock.sleep };

let p: TestPlatform;
let embedder: FakeEmbedder;
let c: Client;
let org: string;

beforeAll(async () => {
  p = await startTestPlatform({ clock });
  embedder = await startFakeEmbedder();
  org = p.credentials.organization_id;
  c = { url: p.urls.ai, key: p.credentials.secret_key };
  await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
  await createVectorDatabase(p.engine, p.credentials.workspace_id, 'emb');
});

afterAll(async () => {
  await embedder?.close();
  await p?.close();
});

const pages = [
  ['Page one is about the harbour and its lighthouse keepers.'],
  ['Page two explains the volcanic geology of the island in detail.'],
  ['Page three lists the ferry timetable for the winter season.'],
];

describe('a cloud collection', () => {
  let col: string;
  const items: Record<string, string> = {};

  beforeAll(async () => {
    col = await createCollection(c, 'cloud', 'Island');
    const files: [string, Uint8Array, string][] = [
      ['island.pdf', await pdfFile(pages), 'application/pdf'],
      ['guide.docx', await docxFile(OUTLINE), 'application/vnd.openxmlformats-officedocument.wordprocessingml.document'],
      ['guide.html', Buffer.from(htmlFile()), 'text/html'],
    ];
    for (const [name, bytes, type] of files) {
      const upload = await uploadFile(c, bytes, name, type);
      const r = await addItem(c, col, { upload_id: upload });
      expect(r.status, r.text).toBe(202);
      expect(r.body).toMatchObject({ item_id: expect.stringMatching(/^itm_[0-9a-f]{32}$/), upload_id: upload, filename: name, status: 'queued' });
      items[name] = r.body.item_id;
    }
    const md = await addItem(c, col, { text: markdownFile(), filename: 'guide.md' });
    expect(md.status, md.text).toBe(202);
    items['guide.md'] = md.body.item_id;
    await settledCollection(c, col);
  });

  it('processes every file into a package, and the collection counts them done', async () => {
    const got = await call(c, 'GET', `/v1/collections/${col}`);
    expect(got.body).toMatchObject({ status: 'ready', counts: { total: 4, queued: 0, processing: 0, done: 4, failed: 0 } });
    expect(got.body.items).toHaveLength(4);
    for (const id of Object.values(items)) {
      const item = (await call(c, 'GET', `/v1/collections/${col}/items/${id}`)).body;
      expect(item).toMatchObject({ status: 'done', error: null, package_id: expect.stringMatching(/^pkg_[0-9a-f]{32}$/) });
      expect(item.chunk_count).toBeGreaterThan(0);
    }
  });

  it('cites the page a PDF passage came from', async () => {
    const r = await query(c, col, { query: 'volcanic geology of the island', top_k: 3 });
    expect(r.status, r.text).toBe(200);
    expect(r.body.collection_id).toBe(col);
    expect(r.body.matches[0]).toMatchObject({
      text: expect.stringContaining('volcanic geology'),
      citation: { collection_id: col, item_id: items['island.pdf'], package_id: expect.stringMatching(/^pkg_/), chunk_id: expect.stringMatching(/^chk_\d{6}$/), locator: 'page=2' },
    });
    expect(r.body.indexing).toEqual({ indexed: 4, total: 4, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 });
  });

  it('cites the heading path of DOCX, HTML and Markdown passages', async () => {
    const r = await query(c, col, { query: 'Use apt.', top_k: 10 });
    const byItem = new Map<string, string>();
    for (const m of r.body.matches) if (m.text.includes('Use apt')) byItem.set(m.citation.item_id, m.citation.locator);
    expect(byItem.get(items['guide.docx'])).toBe('heading=Install > Linux > Debian');
    expect(byItem.get(items['guide.html'])).toBe('heading=Install > Linux > Debian');
    expect(byItem.get(items['guide.md'])).toBe('heading=Install > Linux > Debian');
  });

  it('never shows collection chunks to /v1/vector/query', async () => {
    const r = await post(c, '/v1/vector/query', { mode: 'shared', query: 'volcanic geology of the island', top_k: 5 });
    expect(r.status, r.text).toBe(200);
    expect(r.body.matches).toEqual([]);
  });
});

describe('honest indexing', () => {
  it('a query while items are processing says complete: false; a failed item is skipped and does not fail the others', async () => {
    const col = await createCollection(c, 'cloud');
    embedder.behavior.stallMs = 1500;
    try {
      const a = await addItem(c, col, { text: 'Lighthouses guide ships along the rocky coast.', filename: 'a.txt' });
      const bad = await addItem(c, col, { text: '\u0000\u0001\u0002 binary', filename: 'blob.bin', content_type: 'application/octet-stream' });
      expect(a.status).toBe(202);
      expect(bad.status).toBe(202);
      const during = await query(c, col, { query: 'lighthouses' });
      expect(during.status, during.text).toBe(200);
      expect(during.body.indexing).toMatchObject({ total: 2, complete: false });
      expect(during.body.indexing.indexed).toBeLessThan(2);
    } finally {
      embedder.behavior.stallMs = 0;
    }
    const settled = await settledCollection(c, col);
    expect(settled).toMatchObject({ status: 'partial', counts: { total: 2, done: 1, failed: 1 } });
    const failed = settled.items.find((i: any) => i.status === 'failed');
    expect(failed.error).toMatchObject({ code: 'unsupported_type', message: expect.any(String) });
    const after = await query(c, col, { query: 'lighthouses' });
    expect(after.body.indexing).toEqual({ indexed: 1, total: 2, complete: false, searchable: true, skipped_items: 1, skipped_chunks: 0 });
    expect(after.body.matches[0].text).toContain('Lighthouses');
  });
});

describe('the vector database a cloud collection needs', () => {
  it('a query whose embedding route is no embeddings route any more is 503 service_unavailable, and answers again once it is back', async () => {
    const col = await createCollection(c, 'cloud');
    await settledItem(c, col, (await addItem(c, col, { text: 'Gannets dive for fish.', filename: 'g.txt' })).body.item_id);
    const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
    const input = { id: 'emb', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000 };
    await routes.set(org, { ...input, endpoint: '/v1/chat/completions' }, { force: true });
    try {
      await waitFor('the route change', async () => (await query(c, col, { query: 'gannets' })).status === 503, 5_000);
      const r = await query(c, col, { query: 'gannets' });
      expect([r.status, r.body.error.code]).toEqual([503, 'service_unavailable']);
    } finally {
      await routes.set(org, { ...input, endpoint: '/v1/embeddings', default: true }, { force: true });
    }
    await waitFor('the route back', async () => (await query(c, col, { query: 'gannets' })).status === 200, 5_000);
  });
});

describe('local_vectors', () => {
  it('the client fetches chunks, stores its vectors, and queries with its own vector; no text goes upstream', async () => {
    const col = await createCollection(c, 'local_vectors');
    const callsBefore = embedder.calls.length;
    const added = await addItem(c, col, { text: markdownFile(), filename: 'guide.md' });
    const item = await settledItem(c, col, added.body.item_id);
    expect(item).toMatchObject({ status: 'done', vectors_stored: 0 });
    const before = await query(c, col, { query: 'apt', vector: fakeVector('Use apt.') });
    expect(before.body.indexing).toMatchObject({ indexed: 0, total: 1, complete: false, searchable: false, skipped_chunks: item.chunk_count });
    // The package's blob is read once for its chunks, then its vectors (a package never changes).
    const get = p.engine.blobs.get.bind(p.engine.blobs);
    let blobReads = 0;
    p.engine.blobs.get = (key) => (blobReads++, get(key));
    let chunks: Awaited<ReturnType<typeof call>>;
    try {
      const first = await call(c, 'GET', `/v1/collections/${col}/items/${item.item_id}/chunks?limit=1`);
      expect(first.body.data).toHaveLength(1);
      chunks = await call(c, 'GET', `/v1/collections/${col}/items/${item.item_id}/chunks?limit=500`);
    } finally {
      p.engine.blobs.get = get;
    }
    expect(blobReads).toBe(1);
    expect(chunks.status).toBe(200);
    expect(chunks.body.data).toHaveLength(item.chunk_count);
    const vectors = chunks.body.data.map((ch: any) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) }));
    const put = await call(c, 'PUT', `/v1/collections/${col}/items/${item.item_id}/vectors`, { vectors });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toMatchObject({ stored: vectors.length, vectors_stored: vectors.length, indexed: true });
    const again = await call(c, 'PUT', `/v1/collections/${col}/items/${item.item_id}/vectors`, { vectors: vectors.slice(0, 1) });
    expect(again.body.vectors_stored).toBe(vectors.length); // counted once
    const r = await query(c, col, { query: 'apt', vector: fakeVector('Use apt.') });
    expect(r.status, r.text).toBe(200);
    expect(r.body.matches[0].citation.locator).toBe('heading=Install > Linux > Debian');
    expect(r.body.indexing).toEqual({ indexed: 1, total: 1, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 });
    expect(embedder.calls.length).toBe(callsBefore);
    const wrong = await query(c, col, { query: 'apt', vector: [1, 2, 3] });
    expect([wrong.status, wrong.body.error.code, wrong.body.error.param]).toEqual([400, 'invalid_body', 'vector']);
  });
});

describe('download', () => {
  it('prepares the package as JSON Lines; querying is 409 mode_not_supported', async () => {
    const col = await createCollection(c, 'download');
    const added = await addItem(c, col, { upload_id: await uploadFile(c, await pdfFile(pages), 'island.pdf', 'application/pdf') });
    const item = await settledItem(c, col, added.body.item_id);
    const res = await call(c, 'GET', `/v1/collections/${col}/items/${item.item_id}/package`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/x-ndjson');
    const lines = res.text.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ object: 'package', package_id: item.package_id, item_id: item.item_id, chunk_count: item.chunk_count });
    expect(lines.filter((l) => l.object === 'section').map((l) => l.locator)).toEqual(['page=1', 'page=2', 'page=3']);
    expect(lines.filter((l) => l.object === 'chunk')).toHaveLength(item.chunk_count);
    const q = await query(c, col, { query: 'ferry' });
    expect([q.status, q.body.error.code]).toEqual([409, 'mode_not_supported']);
  });
});

describe('operation ids, deletion, re-processing, expiry', () => {
  it('the same operation id with the same file replays; with another file is 409 operation_id_reused', async () => {
    const col = await createCollection(c, 'download');
    const id = op();
    const a = await addItem(c, col, { text: 'one', filename: 'a.txt' }, id);
    const b = await addItem(c, col, { text: 'one', filename: 'a.txt' }, id);
    expect(b.status).toBe(202);
    expect(b.headers['x-idempotent-replay']).toBe('true');
    expect(b.body.item_id).toBe(a.body.item_id);
    const other = await addItem(c, col, { text: 'two', filename: 'a.txt' }, id);
    expect([other.status, other.body.error.code]).toEqual([409, 'operation_id_reused']);
    expect((await call(c, 'GET', `/v1/collections/${col}`)).body.counts.total).toBe(1);
  });

  it('deleting an item takes its chunks out of queries at once and leaves the counts', async () => {
    const col = await createCollection(c, 'cloud');
    const a = await addItem(c, col, { text: 'Penguins nest on the southern cliffs.', filename: 'p.txt' });
    const item = await settledItem(c, col, a.body.item_id);
    expect((await query(c, col, { query: 'penguins nest' })).body.matches).toHaveLength(1);
    const del = await call(c, 'DELETE', `/v1/collections/${col}/items/${item.item_id}`);
    expect(del.status, del.text).toBe(200);
    expect(del.body).toEqual({ item_id: item.item_id, deleted: true });
    const r = await query(c, col, { query: 'penguins nest' });
    expect(r.body.matches).toEqual([]);
    expect(r.body.indexing).toEqual({ indexed: 0, total: 0, complete: true, searchable: false, skipped_items: 0, skipped_chunks: 0 });
    expect((await call(c, 'GET', `/v1/collections/${col}`)).body).toMatchObject({ status: 'empty', counts: { total: 0 } });
    const gone = await call(c, 'GET', `/v1/collections/${col}/items/${item.item_id}`);
    expect([gone.status, gone.body.error.code]).toEqual([404, 'item_not_found']);
  });

  it('re-processing makes a new package; the old one disappears in one step', async () => {
    const col = await createCollection(c, 'cloud');
    const a = await addItem(c, col, { text: 'Seals rest on the eastern beach.', filename: 's.txt' });
    const first = await settledItem(c, col, a.body.item_id);
    const r = await post(c, `/v1/collections/${col}/items/${first.item_id}/reprocess`, {});
    expect(r.status, r.text).toBe(202);
    await waitFor('a new package', async () => (await call(c, 'GET', `/v1/collections/${col}/items/${first.item_id}`)).body.package_id !== first.package_id, 20_000);
    const q = await query(c, col, { query: 'seals rest' });
    expect(q.body.matches).toHaveLength(1);
    expect(q.body.matches[0].citation.package_id).not.toBe(first.package_id);
    // Queries stop serving the old package with the commit; its blob is removed right after it.
    await waitFor('the old package removed', async () => (await p.engine.blobs.head(packageBlobKey(org, p.credentials.workspace_id, col, first.item_id, first.package_id))) === undefined, 5_000);
  });

  it('an expired collection answers 410 on its item routes and its data is gone after the sweep', async () => {
    const col = await createCollection(c, 'cloud');
    const a = await addItem(c, col, { text: 'Puffins visit in summer.', filename: 'x.txt' });
    const item = await settledItem(c, col, a.body.item_id);
    const blob = packageBlobKey(org, p.credentials.workspace_id, col, item.item_id, item.package_id);
    expect(await p.engine.blobs.head(blob)).toBeDefined();
    offsetMs += 31 * DAY_MS;
    try {
      for (const [method, path] of [
        ['GET', `/v1/collections/${col}/items`],
        ['GET', `/v1/collections/${col}/items/${item.item_id}`],
        ['POST', `/v1/collections/${col}/query`],
        ['POST', `/v1/collections/${col}/items`],
      ]) {
        const r = await call(c, method, path, method === 'POST' ? { query: 'puffins', text: 'x', filename: 'y' } : undefined);
        expect([path, r.status, r.body?.error?.code]).toEqual([path, 410, 'collection_expired']);
      }
      await sweepExpiredCollections(p.engine, 1000);
      expect(await p.engine.blobs.head(blob)).toBeUndefined();
      expect((await p.engine.kv.query({ pk: itemsPk(org, p.credentials.workspace_id, col) })).items).toEqual([]);
    } finally {
      offsetMs -= 31 * DAY_MS;
    }
  });
});
