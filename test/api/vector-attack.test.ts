/**
 * The vector database's routes as a hostile or careless client uses them, through the local server
 * (docs/ai/vector.md): many writers of one document at once, readers during writers, crafted ids,
 * cursors, bodies, numbers and filters, scope and workspace isolation, operation ids reused across
 * routes and keys, and an embedding upstream that answers junk.
 */
import http from 'node:http';
import { createHash, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startScriptedEmbedder, listOf, type ScriptedEmbedder } from '../helpers/scripted-embedder.js';
import { postBytes, postWithOperation, type Answer } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { createVectorDatabase, deleteVectorDatabase, readDatabase } from '../../lambdas/vector/databases.js';

let p: TestPlatform;
let embedder: FakeEmbedder;
let scripted: ScriptedEmbedder;
let org: string;
/** Organization-wide: works in the organization's default workspace. */
let key: string;
/** Another organization-wide key of the same organization: the same shared scope, its own local one. */
let key2: string;
const tenants = () => new Tenants(p.engine.kv, () => p.engine.clock.now());

const op = () => `op-${randomUUID()}`;
const ingest = (body: object, k = key, id = op()) => postWithOperation(p.urls.ai, k, '/v1/vector/ingest', id, body);
const query = (body: object, k = key, id = op()) => postWithOperation(p.urls.ai, k, '/v1/vector/query', id, body);
const ids = (answer: Answer): string[] => answer.body.matches.map((m: any) => m.id);

/** Any request with the path sent byte for byte (fetch would resolve `..` and re-encode). */
function send(method: string, path: string, k = key, headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(`${p.urls.ai}`, { method, path, agent: false, headers: { authorization: `Bearer ${k}`, ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => {
        let body: any;
        try {
          body = JSON.parse(text);
        } catch {
          body = undefined;
        }
        resolve({ status: res.statusCode!, headers: res.headers, text, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}
const deletePath = (rawId: string, scope = 'shared', k = key, id = op()) => send('DELETE', `/v1/vector/documents/${rawId}?scope=${scope}`, k, { 'x-operation-id': id });
const deleteDocument = (documentId: string, scope = 'shared', k = key, id = op()) => deletePath(encodeURIComponent(documentId), scope, k, id);

interface Listed {
  document_id: string;
  generation: number;
  content_sha256: string;
  passages: number;
}
/** Every document of the scope, page by page. */
async function allDocuments(scope: string, k = key): Promise<Listed[]> {
  const out: Listed[] = [];
  let cursor: string | null = null;
  do {
    const page: Answer = await send('GET', `/v1/vector/documents?scope=${scope}&limit=100${cursor ? `&cursor=${cursor}` : ''}`, k);
    expect(page.status).toBe(200);
    out.push(...page.body.data);
    cursor = page.body.next_cursor;
  } while (cursor);
  return out;
}
const listed = async (documentId: string, scope = 'shared', k = key) => (await allDocuments(scope, k)).find((d) => d.document_id === documentId);

/** A document's content_sha256 as docs/ai/vector.md defines it, over [id, text] pairs. */
const contentSha = (passages: [string, string][]) =>
  createHash('sha256')
    .update(
      [...passages]
        .sort(([a], [b]) => Buffer.compare(Buffer.from(a), Buffer.from(b)))
        .map(([id, text]) => `${id}\n${createHash('sha256').update(text).digest('hex')}\n`)
        .join(''),
    )
    .digest('hex');
const shaOf = (matches: any[]) => contentSha(matches.map((m) => [m.id, m.text]));

/** A workspace of its own with a database and an application key with `knowledge` (counts start at 0). */
async function freshWorkspace(name: string, route = 'emb') {
  const ws = await tenants().createWorkspace(org, name);
  const app = await tenants().createApplication(ws.id, name, ['knowledge']);
  const { key: k } = await tenants().createSecretKey(org, app.id);
  await createVectorDatabase(p.engine, ws.id, route);
  return { ws: ws.id, key: k };
}

beforeAll(async () => {
  p = await startTestPlatform();
  embedder = await startFakeEmbedder();
  scripted = await startScriptedEmbedder();
  org = p.credentials.organization_id;
  key = p.credentials.secret_key;
  key2 = (await tenants().createSecretKey(org)).key;
  const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
  await routes.set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
  await routes.set(org, { id: 'junk', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: scripted.baseUrl, upstream_model: 'scripted', timeout_ms: 2_000 });
  await createVectorDatabase(p.engine, p.credentials.workspace_id, 'emb');
});

afterAll(async () => {
  await embedder?.close();
  await scripted?.close();
  await p?.close();
});

describe('many writers of one document at once', () => {
  it('clients ingesting different and equal generations at once leave one generation whose count and hash are what queries return', async () => {
    const { ws, key: k } = await freshWorkspace('race-generations');
    const calls: Promise<Answer>[] = [];
    for (let g = 1; g <= 6; g++) {
      for (let c = 0; c < 3; c++) {
        const passage = (suffix: string) => ({ id: `rg-${g}-${c}-${suffix}`, text: `race generation ${g} client ${c} part ${suffix}`, document_id: 'race', generation: g, metadata: { source: 'race' } });
        // One id every writer sends: the survivor is a single version of it.
        calls.push(ingest({ scope: 'shared', documents: [passage('a'), passage('b'), { id: 'rg-common', text: `race common from ${g} ${c}`, document_id: 'race', generation: g, metadata: { source: 'race' } }] }, k));
      }
    }
    const answers = await Promise.all(calls);
    for (const a of answers) {
      expect(a.status).toBe(200);
      expect(a.body.ingested + a.body.skipped.length).toBe(3);
      for (const s of a.body.skipped) expect(s.reason).toBe('stale_generation');
    }
    // The three generation-6 calls are never stale: they are all there, and nothing older is.
    const document = (await listed('race', 'shared', k))!;
    expect(document).toMatchObject({ generation: 6, passages: 7 });
    const q = await query({ mode: 'shared', query: 'race generation client part common', top_k: 50, filter: { source: 'race' } }, k);
    expect(ids(q).sort()).toEqual(['rg-6-0-a', 'rg-6-0-b', 'rg-6-1-a', 'rg-6-1-b', 'rg-6-2-a', 'rg-6-2-b', 'rg-common']);
    expect(q.body.matches.find((m: any) => m.id === 'rg-common').text).toMatch(/^race common from 6 /);
    expect(document.content_sha256).toBe(shaOf(q.body.matches));
    expect((await readDatabase(p.engine, ws))!.passages).toBe(7);
  });

  it('ingests, deletions and re-ingests of one document interleaved leave it either whole at one generation or gone', async () => {
    const { ws, key: k } = await freshWorkspace('interleaved');
    const passages = (g: number) => [1, 2].map((i) => ({ id: `il-${g}-${i}`, text: `interleaved generation ${g} passage ${i}`, document_id: 'inter', generation: g, metadata: { source: 'inter' } }));
    const calls: Promise<Answer>[] = [];
    for (let g = 1; g <= 8; g++) {
      calls.push(ingest({ scope: 'shared', documents: passages(g) }, k));
      calls.push(deleteDocument('inter', 'shared', k));
    }
    const answers = await Promise.all(calls);
    for (const [i, a] of answers.entries()) {
      if (i % 2 === 0) {
        expect(a.status).toBe(200);
        for (const s of a.body.skipped) expect(['stale_generation', 'document_deleted']).toContain(s.reason);
      } else {
        expect([200, 404]).toContain(a.status);
        if (a.status === 404) expect(a.body.error.code).toBe('document_not_found');
      }
    }
    const check = async () => {
      const document = await listed('inter', 'shared', k);
      const q = await query({ mode: 'shared', query: 'interleaved generation passage', top_k: 50, filter: { source: 'inter' } }, k);
      if (!document) {
        expect(ids(q)).toEqual([]);
        expect((await readDatabase(p.engine, ws))!.passages).toBe(0);
        return;
      }
      const g = document.generation;
      expect(ids(q).sort()).toEqual([`il-${g}-1`, `il-${g}-2`]);
      expect(document.passages).toBe(2);
      expect(document.content_sha256).toBe(shaOf(q.body.matches));
      expect((await readDatabase(p.engine, ws))!.passages).toBe(2);
    };
    await check();
    // Deleted now, whatever happened: only a generation above the one it was deleted at comes back.
    const deleted = await deleteDocument('inter', 'shared', k);
    expect(deleted.status).toBe(200);
    const at = deleted.body.generation;
    expect((await ingest({ scope: 'shared', documents: passages(at) }, k)).body.skipped.map((s: any) => s.reason)).toEqual(['document_deleted', 'document_deleted']);
    expect((await ingest({ scope: 'shared', documents: passages(at + 1) }, k)).body.ingested).toBe(2);
    await check();
    expect((await listed('inter', 'shared', k))!.generation).toBe(at + 1);
  });

  it('writers moving one passage id between two documents at once leave it in exactly one, both documents recounted', async () => {
    const { ws, key: k } = await freshWorkspace('movers');
    const calls: Promise<Answer>[] = [];
    for (let i = 0; i < 12; i++) {
      const doc = i % 2 ? 'doc-b' : 'doc-a';
      calls.push(
        ingest({
          scope: 'shared',
          documents: [
            { id: 'mover', text: `mover written into ${doc} by writer ${i}`, document_id: doc, metadata: { source: doc, category: 'movers' } },
            { id: `filler-${i}`, text: `filler of ${doc} number ${i}`, document_id: doc, metadata: { source: doc, category: 'movers' } },
          ],
        }, k),
      );
    }
    for (const a of await Promise.all(calls)) expect([a.status, a.body.ingested]).toEqual([200, 2]);
    const q = await query({ mode: 'shared', query: 'mover filler written into doc', top_k: 50, filter: { category: 'movers' } }, k);
    expect(ids(q).filter((id) => id === 'mover')).toHaveLength(1);
    expect(q.body.matches).toHaveLength(13);
    const mover = q.body.matches.find((m: any) => m.id === 'mover');
    expect(mover.text).toContain(mover.metadata.source);
    for (const doc of ['doc-a', 'doc-b']) {
      const mine = q.body.matches.filter((m: any) => m.metadata.source === doc);
      expect(await listed(doc, 'shared', k)).toMatchObject({ passages: mine.length, content_sha256: shaOf(mine) });
    }
    expect((await readDatabase(p.engine, ws))!.passages).toBe(13);
  });

  it('a reader during many generation bumps of one document sees one whole generation in every answer, never two mixed, never none', async () => {
    const { key: k } = await freshWorkspace('readers');
    const parts = 4;
    const bump = (g: number) =>
      ingest({ scope: 'shared', documents: Array.from({ length: parts }, (_, i) => ({ id: `rd-${g}-${i}`, text: `reader document generation ${g} part ${i}`, document_id: 'reader', generation: g, metadata: { source: 'reader' } })) }, k);
    expect((await bump(1)).body.ingested).toBe(parts);
    let writing = true;
    const seen: string[][] = [];
    const reader = async () => {
      while (writing) {
        const q = await query({ mode: 'shared', query: 'reader document generation part', top_k: 50, filter: { source: 'reader' } }, k);
        expect(q.status).toBe(200);
        seen.push(ids(q));
      }
    };
    const writer = async () => {
      try {
        for (let g = 2; g <= 25; g++) expect((await bump(g)).body.ingested).toBe(parts);
      } finally {
        writing = false;
      }
    };
    await Promise.all([writer(), reader(), reader(), reader()]);
    expect(seen.length).toBeGreaterThan(10);
    for (const answer of seen) {
      const generations = new Set(answer.map((id) => id.split('-')[1]));
      expect({ answer, generations: generations.size, count: answer.length }).toEqual({ answer, generations: 1, count: parts });
    }
  });
});
