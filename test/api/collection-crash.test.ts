/**
 * Crash safety of collection item processing (docs/decisions/knowledge-items.md, "Processing"):
 * `npm start` with two workers and KNOWLEDGE_LEASE_S=3 (a development setting) processes the items of
 * a cloud collection (PDFs of several pages and Markdown files) through a stalling fake embedder, and
 * is killed with SIGKILL, every process at once, while items are processing; restarted on the same
 * DATA_DIR, and killed again the same way; restarted again. Then:
 *
 * - every item reaches `done` or `failed` within a bound (the dead processors' leases lapse and the
 *   processing sweep sends their items again);
 * - the collection's counts are exact: total = done + failed = the items listed, none queued or processing;
 * - no chunk is indexed twice: a query of each item's own words (top_k 20) names no item and chunk
 *   twice, and the index (vectors.db, read beside the server) holds only entries of the package each
 *   item serves, exactly one per chunk of it, and none of a failed item;
 * - each done item's chunk_count is its package's chunks.
 */
import { afterAll, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { adminAsyncOk, adminOk } from '../helpers/cli.js';
import { addItem, call, createCollection, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { paragraphs, pdfFile, proseLines } from '../helpers/knowledge-files.js';
import { waitFor } from '../helpers/wait.js';
import { collectionScope } from '../../lambdas/knowledge/chunk-index.js';

const PDFS = 10;
const MARKDOWNS = 10;
/** Each embeddings call waits this long, so processing is under way when the kill comes. */
const STALL_MS = 800;
/** After the last restart, every item is final within this. */
const SETTLE_MS = 60_000;

const dataDir = mkdtempSync(join(tmpdir(), 'collection-crash-'));
let server: LocalProcess | undefined;
let embedder: FakeEmbedder | undefined;

afterAll(async () => {
  if (server) await crashLocalProcess(server);
  await embedder?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const start = async () => (server = await startLocalProcess({ DATA_DIR: dataDir, LOCAL_WORKERS: '2', KNOWLEDGE_LEASE_S: '3' }));
const client = (key: string): Client => ({ url: server!.urls.ai, key });

interface Sent {
  id: string;
  /** A word only this item's file holds. */
  word: string;
  filename: string;
}

/** A PDF of 4 to 12 pages, or a Markdown file of a few headings; each page or paragraph names the item's own word. */
async function itemFile(n: number, word: string): Promise<{ filename: string; pdf?: Uint8Array; text?: string }> {
  if (n < PDFS) {
    const pages = proseLines(4 + (n % 3) * 4).map((lines, p) => [`${word} page ${p + 1}`, ...lines]);
    return { filename: `doc-${n}.pdf`, pdf: await pdfFile(pages) };
  }
  const body = paragraphs(12 + n, 6, n).map((text, i) => (i % 4 === 0 ? `## Part ${i / 4 + 1} ${word}\n\n${text}` : `${text} ${word}`));
  return { filename: `notes-${n}.md`, text: `# Notes ${word}\n\n${body.join('\n\n')}\n` };
}

const counts = async (c: Client, col: string) => (await call(c, 'GET', `/v1/collections/${col}`)).body.counts as { total: number; queued: number; processing: number; done: number; failed: number };

/** Waits until at least `done` items are done while some are still processing; false when everything settled first. */
async function processingUnderway(c: Client, col: string, done: number): Promise<boolean> {
  let settled = false;
  await waitFor(
    `${done} items done with others processing`,
    async () => {
      const n = await counts(c, col);
      settled = n.queued + n.processing === 0;
      return settled || (n.done >= done && n.processing > 0);
    },
    60_000,
    20,
  );
  return !settled;
}

it('brings every item to a final state, counted exactly and indexed once, across SIGKILLs of every process mid-processing', async () => {
  embedder = await startFakeEmbedder();
  await start();
  const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
  adminOk(dataDir, 'route', 'set', '--org', credentials.organization_id, '--id', 'emb', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', embedder.baseUrl, '--model', 'fake-embed', '--default');
  await adminAsyncOk(dataDir, 'vector-db', 'create', '--workspace', credentials.workspace_id, '--embedding-route', 'emb');
  let c = client(credentials.secret_key);
  const col = await createCollection(c, 'cloud', 'crash');

  embedder.behavior.stallMs = STALL_MS;
  const sent: Sent[] = [];
  for (let n = 0; n < PDFS + MARKDOWNS; n++) {
    const word = `w${randomBytes(6).toString('hex')}`;
    const file = await itemFile(n, word);
    const body = file.pdf ? { upload_id: await uploadFile(c, file.pdf, file.filename, 'application/pdf') } : { text: file.text!, filename: file.filename };
    const added = await addItem(c, col, body);
    expect(added.status, added.text).toBe(202);
    sent.push({ id: added.body.item_id, word, filename: file.filename });
  }

  // Two kills, each once a few items are done and others are processing.
  const report: string[] = [];
  for (let cycle = 0; cycle < 2; cycle++) {
    const before = await counts(c, col);
    if (!(await processingUnderway(c, col, before.done + (cycle === 0 ? 3 : 1)))) {
      report.push(`kill ${cycle + 1}: skipped, every item settled first`);
      break;
    }
    const at = await counts(c, col);
    await crashLocalProcess(server!);
    report.push(`kill ${cycle + 1}: ${at.done} done, ${at.processing} processing, ${at.queued} queued`);
    await start();
    c = client(credentials.secret_key);
  }
  embedder.behavior.stallMs = 0;

  // Every item final within the bound.
  const settling = Date.now();
  await waitFor('every item final', async () => {
    const n = await counts(c, col);
    return n.queued + n.processing === 0;
  }, SETTLE_MS, 100);
  report.push(`settled ${((Date.now() - settling) / 1000).toFixed(1)} s after the last restart`);

  // Exact counts: total = done + failed = the items listed.
  const listed = (await call(c, 'GET', `/v1/collections/${col}/items?limit=100`)).body.data as any[];
  const n = await counts(c, col);
  expect(listed.map((i) => i.item_id).sort()).toEqual(sent.map((s) => s.id).sort());
  expect(n).toEqual({ total: sent.length, queued: 0, processing: 0, done: n.done, failed: n.failed });
  expect(n.done + n.failed).toBe(sent.length);
  expect(listed.filter((i) => i.status === 'done').length).toBe(n.done);
  expect(listed.filter((i) => i.status === 'failed').length).toBe(n.failed);
  for (const item of listed.filter((i) => i.status === 'failed')) expect(item.error, item.filename).toMatchObject({ code: expect.any(String) });
  report.push(`${n.done} done, ${n.failed} failed`);

  // Each done item's chunk_count is its package's chunks.
  const byId = new Map(listed.map((i) => [i.item_id as string, i]));
  for (const item of listed.filter((i) => i.status === 'done')) {
    const chunks = await call(c, 'GET', `/v1/collections/${col}/items/${item.item_id}/chunks?limit=500`);
    expect(chunks.status, chunks.text).toBe(200);
    expect([item.filename, chunks.body.package_id, chunks.body.chunk_count, chunks.body.data.length]).toEqual([item.filename, item.package_id, item.chunk_count, item.chunk_count]);
  }

  // No item and chunk answered twice by a query of the item's own word.
  for (const s of sent) {
    const r = await call(c, 'POST', `/v1/collections/${col}/query`, { query: s.word, top_k: 20 });
    expect(r.status, r.text).toBe(200);
    const seen = r.body.matches.map((m: any) => `${m.citation.item_id}/${m.citation.chunk_id}`);
    expect(new Set(seen).size, `${s.filename}: ${seen.join(' ')}`).toBe(seen.length);
    for (const m of r.body.matches) expect(m.citation.package_id).toBe(byId.get(m.citation.item_id).package_id);
  }

  // The index itself: only the served packages' entries, one per chunk.
  const db = new Database(join(dataDir, 'vectors.db'), { readonly: true, fileMustExist: true });
  let keys: string[];
  try {
    keys = (db.prepare('SELECT key, filterable FROM vector_entries').all() as { key: string; filterable: string }[])
      .filter((row) => JSON.parse(row.filterable).scope === collectionScope(col))
      .map((row) => row.key);
  } finally {
    db.close();
  }
  const perItem = new Map<string, number>();
  const stray: string[] = [];
  for (const key of keys) {
    const [itemId, pkg] = key.split('.');
    if (byId.get(itemId)?.package_id !== pkg) stray.push(key);
    else perItem.set(itemId, (perItem.get(itemId) ?? 0) + 1);
  }
  expect(stray).toEqual([]);
  for (const item of listed) expect([item.filename, perItem.get(item.item_id) ?? 0]).toEqual([item.filename, item.status === 'done' ? item.chunk_count : 0]);
  report.push(`${keys.length} index entries, each of a served package`);
  console.log(`collection crash:\n${report.join('\n')}`);
}, 240_000);
