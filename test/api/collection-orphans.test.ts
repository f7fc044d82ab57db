/**
 * Orphan index entries (docs/decisions/knowledge-index-sweep.md): `npm start` processes a long
 * Markdown item of a cloud collection through a stalling fake embedder, with KNOWLEDGE_LEASE_S=900 so
 * the processor renews its lease only every 5 minutes and learns of the delete at its final write. The
 * item is deleted while it is processing (its delete removes the chunks its package names, then the
 * processor puts more), and every process is killed with SIGKILL once the processor has put entries
 * after the delete: the dead processor never finds its item gone, so nothing names those entries.
 * Restarted on the same DATA_DIR with COLLECTION_INDEX_SWEEP_S=1, the index sweep removes them (no
 * package blob is left: the delete took it), and leaves the entries of an item that still serves its
 * package.
 */
import { afterAll, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { adminAsyncOk, adminOk } from '../helpers/cli.js';
import { addItem, call, createCollection, settledItem, type Client } from '../helpers/knowledge-calls.js';
import { paragraphs } from '../helpers/knowledge-files.js';
import { waitFor } from '../helpers/wait.js';
import { collectionScope } from '../../lambdas/knowledge/chunk-index.js';

/** Each embeddings call (64 chunks) waits this long, so the processor is mid-way when the delete comes. */
const STALL_MS = 1500;

const dataDir = mkdtempSync(join(tmpdir(), 'collection-orphans-'));
let server: LocalProcess | undefined;
let embedder: FakeEmbedder | undefined;

afterAll(async () => {
  if (server) await crashLocalProcess(server);
  await embedder?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const start = async (env: Record<string, string> = {}) => (server = await startLocalProcess({ DATA_DIR: dataDir, LOCAL_WORKERS: '1', KNOWLEDGE_LEASE_S: '900', ...env }));

/** The index entries of the collection, as vectors.db holds them (read beside the server). */
function entries(col: string): string[] {
  const file = join(dataDir, 'vectors.db');
  if (!existsSync(file)) return [];
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return (db.prepare('SELECT key, filterable FROM vector_entries').all() as { key: string; filterable: string }[])
      .filter((row) => JSON.parse(row.filterable).scope === collectionScope(col))
      .map((row) => row.key);
  } finally {
    db.close();
  }
}

/** The package blobs of an item in the blob directory (knowledge/<org>/<ws>/<col>/<item>/<package>.jsonl). */
function packageBlobs(item: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, name.name);
      if (name.isDirectory()) walk(path);
      else if (path.includes(`/${item}/`) && name.name.endsWith('.jsonl')) found.push(path);
    }
  };
  walk(dataDir);
  return found;
}

it('removes the entries a processor killed while its item was deleted left in the workspace index, and keeps those still served', async () => {
  embedder = await startFakeEmbedder();
  await start();
  const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
  adminOk(dataDir, 'route', 'set', '--org', credentials.organization_id, '--id', 'emb', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', embedder.baseUrl, '--model', 'fake-embed', '--default');
  await adminAsyncOk(dataDir, 'vector-db', 'create', '--workspace', credentials.workspace_id, '--embedding-route', 'emb');
  let c: Client = { url: server!.urls.ai, key: credentials.secret_key };
  const col = await createCollection(c, 'cloud', 'orphans');

  // An item that stays: its entries must survive the sweep.
  const kept = await addItem(c, col, { text: `# Kept\n\n${paragraphs(6, 4, 1).join('\n\n')}\n`, filename: 'kept.md' });
  expect(kept.status, kept.text).toBe(202);
  const keptItem = await settledItem(c, col, kept.body.item_id);
  expect(keptItem.status).toBe('done');
  const keptEntries = entries(col).filter((k) => k.startsWith(`${kept.body.item_id}.`));
  expect(keptEntries).toHaveLength(keptItem.chunk_count);

  // A long item: several embeddings calls of 64 chunks, each stalled.
  embedder.behavior.stallMs = STALL_MS;
  const long = await addItem(c, col, { text: `# Long\n\n${paragraphs(900, 6, 2).join('\n\n')}\n`, filename: 'long.md' });
  expect(long.status, long.text).toBe(202);
  const item = long.body.item_id as string;
  const mine = () => entries(col).filter((k) => k.startsWith(`${item}.`));
  await waitFor('the long item processing, its first chunks indexed', async () => mine().length > 0, 60_000, 50);

  // Deleted while processing: the delete takes the chunks indexed so far...
  const deleted = await call(c, 'DELETE', `/v1/collections/${col}/items/${item}`);
  expect(deleted.status, deleted.text).toBe(200);
  // ...and the processor, not knowing, puts its next batch; every process is killed before it finds out.
  await waitFor('entries put after the delete', async () => mine().length > 0, 30_000, 10);
  await crashLocalProcess(server!);
  const orphans = mine();
  expect(orphans.length).toBeGreaterThan(0);
  embedder.behavior.stallMs = 0;

  // Restarted: nothing will ever name those entries but the index sweep.
  await start({ COLLECTION_INDEX_SWEEP_S: '1' });
  c = { url: server!.urls.ai, key: credentials.secret_key };
  await waitFor('the orphan entries removed by the index sweep', async () => mine().length === 0, 30_000, 200);
  expect(packageBlobs(item)).toEqual([]);
  expect(entries(col).filter((k) => k.startsWith(`${kept.body.item_id}.`)).sort()).toEqual(keptEntries.sort());
  const q = await call(c, 'POST', `/v1/collections/${col}/query`, { query: 'kept', top_k: 5 });
  expect(q.status, q.text).toBe(200);
  for (const m of q.body.matches) expect(m.citation.item_id).toBe(kept.body.item_id);
  console.log(`collection orphans: ${orphans.length} entries of ${item} left by the killed processor, removed by the index sweep`);
}, 180_000);
