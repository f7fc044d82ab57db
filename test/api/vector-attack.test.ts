/**
 * The vector database's routes as a hostile or careless client uses them, through the local server
 * (docs/ai/vector.md): many writers of one document at once, readers during writers, crafted ids,
 * cursors, bodies, numbers and filters, scope and workspace isolation, operation ids reused across
 * routes and keys, and an embedding upstream that answers junk.
 */
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startScriptedEmbedder, listOf, type ScriptedEmbedder } from '../helpers/scripted-embedder.js';
import { postBytes, postWithOperation, type Answer } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';
import { documentSha256 } from '../helpers/vector-content-hash.js';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { adminAsyncOk, adminOk } from '../helpers/cli.js';
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

const contentSha = documentSha256;
const shaOf = (matches: any[]) => contentSha(matches.map((m) => [m.id, m.text]));

/** A workspace of its own with a database and an application key with `knowledge` (counts start at 0). */
async function freshWorkspace(name: string, route = 'emb') {
  const ws = await tenants().createWorkspace(org, name);
  const app = await tenants().createApplication(ws.id, name, ['knowledge']);
  const { id: keyId, key: k } = await tenants().createSecretKey(org, app.id);
  await createVectorDatabase(p.engine, ws.id, route);
  return { ws: ws.id, key: k, keyId };
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

describe('a reader among many writers of one scope', () => {
  it('sees one whole generation of its document while other documents of the scope commit all the time', async () => {
    const { key: k } = await freshWorkspace('busy-scope');
    const parts = 4;
    // Six writers take the scope's write lease in turn with this one: a turn that does not come within
    // the lease's wait is 503 service_unavailable, "retry shortly", and the writer retries as a client does.
    const bump = async (g: number) => {
      for (let attempt = 1; ; attempt++) {
        const answer = await ingest({ scope: 'shared', documents: Array.from({ length: parts }, (_, i) => ({ id: `busy-${g}-${i}`, text: `busy reader generation ${g} part ${i}`, document_id: 'busy', generation: g, metadata: { source: 'busy' } })) }, k);
        if (answer.status !== 503 || attempt === 10) return answer;
        expect(answer.body).toMatchObject({ error: { code: 'service_unavailable' } });
      }
    };
    expect((await bump(1)).body.ingested).toBe(parts);
    let writing = true;
    const seen: string[][] = [];
    const reader = async () => {
      while (writing) seen.push(ids(await query({ mode: 'shared', query: 'busy reader generation part', top_k: 50, filter: { source: 'busy' } }, k)));
    };
    const other = async (w: number) => {
      for (let i = 0; writing; i++) await ingest({ scope: 'shared', documents: [{ id: `other-${w}-${i % 5}`, text: `other writer ${w} busy reader generation part ${i}`, document_id: `other-${w}`, generation: i + 1, metadata: { source: 'other' } }] }, k);
    };
    const writer = async () => {
      try {
        for (let g = 2; g <= 20; g++) expect((await bump(g)).body.ingested).toBe(parts);
      } finally {
        writing = false;
      }
    };
    await Promise.all([writer(), reader(), reader(), reader(), ...[0, 1, 2, 3, 4, 5].map(other)]);
    const bad = seen.filter((answer) => answer.length !== parts || new Set(answer.map((id) => id.split('-')[1])).size !== 1);
    expect(bad).toEqual([]);
    // The lease is not handed out in turn: the writer may wait out several others' turns (14-30 s here).
  }, 120_000);
});

describe('crafted document ids in the DELETE path', () => {
  const crafted = ['a/b', '..', '.', 'é文🐱', '%41', 'a?b#c', ' spaced ', 'x'.repeat(256), '\u0000nul'];

  beforeAll(async () => {
    const documents = crafted.map((documentId, i) => ({ id: `crafted-${i}`, text: `crafted document ${i}`, document_id: documentId, metadata: { category: 'crafted' } }));
    expect((await ingest({ scope: 'shared', documents })).body).toEqual({ ingested: crafted.length, skipped: [] });
  });

  it('an encoded id deletes exactly the document it names, whatever its characters', async () => {
    for (const [i, documentId] of crafted.entries()) {
      const del = await deleteDocument(documentId);
      expect([del.status, del.body]).toEqual([200, { document_id: documentId, generation: 1, deleted: 1 }]);
      const left = await query({ mode: 'shared', query: 'crafted document', top_k: 50, filter: { category: 'crafted' } });
      expect(ids(left).sort()).toEqual(crafted.slice(i + 1).map((_, j) => `crafted-${i + 1 + j}`).sort());
    }
  });

  it('dot segments, raw slashes, bad escapes, other normal forms and sizes never reach another document nor fail with 5xx', async () => {
    // key2's local scope holds one document only, "é" (precomposed).
    expect((await ingest({ scope: 'local', documents: [{ id: 'keeper', text: 'a document that must survive', document_id: 'é' }] }, key2)).body.ingested).toBe(1);
    const answers = await Promise.all(['..', '../..', '%2e%2e', '.%2F..', 'a/b', '%E0%A4%A', '%', '%00', 'e%CC%81', '%C3', '', '%20', '*', '%2A'].map((raw) => deletePath(raw, 'local', key2)));
    for (const a of answers) {
      expect(a.status).toBeLessThan(500);
      expect(a.body.error.code).toMatch(/^(document_not_found|not_found|invalid_field)$/);
    }
    // e + combining acute (the other normal form) is another id: the document is still there.
    expect((await listed('é', 'local', key2))?.passages).toBe(1);
    const long = await deleteDocument('y'.repeat(257), 'local', key2);
    expect([long.status, long.body.error.code, long.body.error.param]).toEqual([400, 'invalid_field', 'document_id']);
    const fourByte = await deleteDocument('🐱'.repeat(65), 'local', key2);
    expect([fourByte.status, fourByte.body.error.param]).toEqual([400, 'document_id']);
    expect((await deleteDocument('🐱'.repeat(64), 'local', key2)).body.error.code).toBe('document_not_found');
    expect((await deleteDocument('é', 'local', key2)).body).toEqual({ document_id: 'é', generation: 1, deleted: 1 });
  });

  it('a DELETE without an operation id, or with a scope that is not one, is refused before anything is removed', async () => {
    await ingest({ scope: 'shared', documents: [{ id: 'guarded', text: 'guarded passage', document_id: 'guarded' }] });
    const none = await send('DELETE', '/v1/vector/documents/guarded?scope=shared');
    expect([none.status, none.body.error.code]).toEqual([400, 'missing_operation_id']);
    for (const scope of ['', 'SHARED', 'local.other', 'shared&scope=local', '__proto__']) {
      const a = await deletePath('guarded', scope);
      expect(a.status).toBe(400);
    }
    expect((await listed('guarded'))?.passages).toBe(1);
  });
});

describe('cursors', () => {
  let first: Answer;

  beforeAll(async () => {
    for (let i = 0; i < 3; i++) await ingest({ scope: 'shared', documents: [{ id: `cursor-${i}`, text: `cursor page ${i}`, document_id: `cursor-doc-${i}` }] });
    first = await send('GET', '/v1/vector/documents?scope=shared&limit=1');
    expect(first.body.next_cursor).toEqual(expect.any(String));
  });

  it('a cursor replayed gives the same page; tampered, truncated, foreign or huge ones are 400 invalid_cursor', async () => {
    const cursor: string = first.body.next_cursor;
    const page = (c: string, k = key, scope = 'shared') => send('GET', `/v1/vector/documents?scope=${scope}&limit=1&cursor=${c}`, k);
    const once = await page(cursor);
    expect(once.status).toBe(200);
    expect((await page(cursor)).body.data).toEqual(once.body.data);
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    const invalid = [flip(cursor, 0), flip(cursor, Math.floor(cursor.length / 2)), flip(cursor, cursor.length - 1), cursor.slice(0, -4), `${cursor}AAAA`, 'A'.repeat(8_000), '%FF%FE', encodeURIComponent('{"p":"vd#x"}'), ''];
    for (const c of invalid) {
      const a = await page(c);
      expect([c.slice(0, 20), a.status, a.body?.error?.code]).toEqual([c.slice(0, 20), 400, c === '' ? expect.stringMatching(/invalid_cursor|invalid_field/) : 'invalid_cursor']);
    }
    // The same listing's cursor in the key's local scope, or another workspace's database.
    expect((await page(cursor, key, 'local')).body.error.code).toBe('invalid_cursor');
    const { key: elsewhere } = await freshWorkspace('cursor-elsewhere');
    expect((await page(cursor, elsewhere)).body.error.code).toBe('invalid_cursor');
    // Far too large for a request line: refused by the server, never a 5xx.
    const huge = await page('A'.repeat(200_000));
    expect(huge.status).toBeGreaterThanOrEqual(400);
    expect(huge.status).toBeLessThan(500);
  });

  it("a cursor of a database that was deleted and created again is not the new one's", async () => {
    const { ws, key: k } = await freshWorkspace('cursor-recreated');
    const fill = async () => {
      for (let i = 0; i < 3; i++) expect((await ingest({ scope: 'shared', documents: [{ id: `r-${i}`, text: `recreated ${i}`, document_id: `r-doc-${i}` }] }, k)).body.ingested).toBe(1);
    };
    await fill();
    const old = (await send('GET', '/v1/vector/documents?scope=shared&limit=1', k)).body.next_cursor;
    expect((await send('GET', `/v1/vector/documents?scope=shared&limit=1&cursor=${old}`, k)).status).toBe(200);
    await deleteVectorDatabase(p.engine, ws);
    await waitFor('the removal job', async () => (await readDatabase(p.engine, ws)) === undefined, 20_000);
    await createVectorDatabase(p.engine, ws, 'emb');
    await fill();
    const again = await send('GET', `/v1/vector/documents?scope=shared&limit=1&cursor=${old}`, k);
    expect([again.status, again.body.error.code]).toEqual([400, 'invalid_cursor']);
  });
});

describe('prototype-named ids and keys', () => {
  const names = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '__defineGetter__', 'valueOf'];

  it('are passage ids, document ids and metadata keys like any other', async () => {
    const documents = names.map((name, i) => ({ id: name, text: `prototype named passage ${name}`, document_id: names[(i + 1) % names.length], generation: 2, metadata: JSON.parse(`{"${name}": "v", "category": "proto"}`) }));
    expect((await ingest({ scope: 'local', documents })).body).toEqual({ ingested: names.length, skipped: [] });
    const q = await query({ mode: 'local', query: 'prototype named passage', top_k: 50, filter: { category: 'proto' } });
    expect(ids(q).sort()).toEqual([...names].sort());
    for (const m of q.body.matches) expect(Object.keys(m.metadata).sort()).toEqual([m.id, 'category'].sort());
    const docs = (await allDocuments('local')).filter((d) => names.includes(d.document_id));
    expect(docs.map((d) => [d.document_id, d.generation, d.passages]).sort()).toEqual(names.map((n) => [n, 2, 1]).sort());
    expect((await deleteDocument('__proto__', 'local')).body).toEqual({ document_id: '__proto__', generation: 2, deleted: 1 });
    expect((await ingest({ scope: 'local', documents: [{ id: 'again', text: 'back again', document_id: '__proto__', generation: 2 }] })).body.skipped).toEqual([{ index: 0, id: 'again', reason: 'document_deleted' }]);
    expect((await ingest({ scope: 'local', documents: [{ id: 'dup', text: 'one', document_id: 'constructor' }, { id: '__proto__', text: 'two' }, { id: '__proto__', text: 'three' }] })).body.skipped).toEqual([{ index: 1, id: '__proto__', reason: 'duplicate_in_call' }]);
  });

  it('as filter keys or operators, or nesting metadata, are refused', async () => {
    const refused = async (raw: string, param: string) => {
      const a = await postBytes(`${p.urls.ai}/v1/vector/query`, `{"mode":"shared","query":"x","filter":${raw}}`, { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() });
      expect([raw, a.status, a.body.error.code, a.body.error.param]).toEqual([raw, 400, 'invalid_field', param]);
    };
    await refused('{"__proto__":"x"}', 'filter.__proto__');
    await refused('{"constructor":"x"}', 'filter.constructor');
    await refused('{"kind":{"__proto__":["x"]}}', 'filter.kind');
    await refused('{"kind":{"$in":["a"],"__proto__":1}}', 'filter.kind');
    await refused('{"kind":{"$in":{"0":"a","length":1}}}', 'filter.kind');
    const nested = await ingest({ scope: 'shared', documents: [{ id: 'p1', text: 'x', metadata: JSON.parse('{"__proto__":{"kind":"x"}}') }] });
    expect(nested.body.skipped).toEqual([{ index: 0, id: 'p1', reason: 'invalid_metadata', message: expect.stringContaining('"__proto__"'), param: 'documents.0.metadata.__proto__' }]);
    const field = await postBytes(`${p.urls.ai}/v1/vector/ingest`, '{"scope":"shared","documents":[{"id":"p2","text":"x","__proto__":{"id":"y"}}]}', { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() });
    expect([field.status, field.body.error.code, field.body.error.param]).toEqual([400, 'unsupported_field', 'documents.0.__proto__']);
    const top = await postBytes(`${p.urls.ai}/v1/vector/ingest`, '{"scope":"shared","documents":[{"id":"p3","text":"x"}],"__proto__":{"scope":"local"}}', { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() });
    expect([top.status, top.body.error.code]).toEqual([400, 'unsupported_field']);
  });
});

describe('numbers in metadata and filters', () => {
  beforeAll(async () => {
    const raw = `{"scope":"shared","documents":[
      {"id":"n-negzero","text":"number negative zero","metadata":{"created_at":-0,"category":"numbers"}},
      {"id":"n-max","text":"number largest double","metadata":{"created_at":1.7976931348623157e308,"category":"numbers"}},
      {"id":"n-min","text":"number most negative","metadata":{"created_at":-1.7976931348623157e308,"category":"numbers"}},
      {"id":"n-tiny","text":"number smallest subnormal","metadata":{"created_at":5e-324,"category":"numbers"}},
      {"id":"n-unsafe","text":"number beyond safe integers","metadata":{"created_at":9007199254740993,"category":"numbers"}},
      {"id":"n-inf","text":"number overflowing","metadata":{"created_at":1e400,"category":"numbers"}},
      {"id":"n-neginf","text":"number overflowing negative","metadata":{"created_at":-1e400,"category":"numbers"}}
    ]}`;
    const a = await postBytes(`${p.urls.ai}/v1/vector/ingest`, raw, { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() });
    const infinite = (index: number, id: string) => ({ index, id, reason: 'invalid_metadata', message: 'metadata "created_at" is not a finite number.', param: `documents.${index}.metadata.created_at` });
    expect(a.body).toEqual({ ingested: 5, skipped: [infinite(5, 'n-inf'), infinite(6, 'n-neginf')] });
  });

  const filtered = (filter: string) =>
    postBytes(`${p.urls.ai}/v1/vector/query`, `{"mode":"shared","query":"number","top_k":50,"filter":{"category":"numbers","created_at":${filter}}}`, { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() });

  it('-0 is 0, extremes are found by equality, an overflow is refused', async () => {
    for (const [filter, expected] of [
      ['0', ['n-negzero']],
      ['-0', ['n-negzero']],
      ['0.0', ['n-negzero']],
      ['1.7976931348623157e308', ['n-max']],
      ['-1.7976931348623157e308', ['n-min']],
      ['5e-324', ['n-tiny']],
      ['9007199254740992', ['n-unsafe']],
      ['{"$in":[-0,5e-324,1.7976931348623157e308]}', ['n-max', 'n-negzero', 'n-tiny']],
      ['1e-400', ['n-negzero']],
    ] as const) {
      const a = await filtered(filter);
      expect([filter, a.status, ids(a).sort()]).toEqual([filter, 200, expected]);
    }
    const q = await query({ mode: 'shared', query: 'number negative zero', top_k: 1, filter: { category: 'numbers' } });
    expect(Object.is(q.body.matches[0].metadata.created_at, 0)).toBe(true);
    for (const filter of ['1e400', '-1e400', '{"$in":[1,1e400]}', 'null', '[0]', '{"$in":[null]}', '{"$in":[[1]]}']) {
      const a = await filtered(filter);
      expect([filter, a.status, a.body.error?.code, a.body.error?.param]).toEqual([filter, 400, 'invalid_field', 'filter.created_at']);
    }
  });

  it('top_k and generation refuse what is not a whole number in range', async () => {
    for (const topK of ['1e400', '-0.5', '1e2', '50.0000000000001', '"5"', 'true', '[5]']) {
      const a = await postBytes(`${p.urls.ai}/v1/vector/query`, `{"mode":"shared","query":"x","top_k":${topK}}`, { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() });
      expect([topK, a.status, a.body.error.param]).toEqual([topK, 400, 'top_k']);
    }
    // 50.0 is 50 to JSON: a whole number.
    expect((await postBytes(`${p.urls.ai}/v1/vector/query`, '{"mode":"shared","query":"x","top_k":50.0}', { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() })).status).toBe(200);
    for (const generation of ['9007199254740992', '1.5', '-1', '"2"', '1e400']) {
      const a = await postBytes(`${p.urls.ai}/v1/vector/ingest`, `{"scope":"shared","documents":[{"id":"g","text":"g","document_id":"gdoc","generation":${generation}}]}`, { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() });
      expect([generation, a.status, a.body.error.param]).toEqual([generation, 400, 'documents.0.generation']);
    }
    const top = await ingest({ scope: 'shared', documents: [{ id: 'g', text: 'top generation', document_id: 'gdoc', generation: Number.MAX_SAFE_INTEGER }] });
    expect(top.body.ingested).toBe(1);
    expect(await listed('gdoc')).toMatchObject({ generation: Number.MAX_SAFE_INTEGER, passages: 1 });
  });
});

describe('bodies', () => {
  const json = { 'content-type': 'application/json' };
  const rawIngest = (body: string, k = key) => postBytes(`${p.urls.ai}/v1/vector/ingest`, body, { authorization: `Bearer ${k}`, ...json, 'x-operation-id': op() });
  const rawQuery = (body: string, k = key) => postBytes(`${p.urls.ai}/v1/vector/query`, body, { authorization: `Bearer ${k}`, ...json, 'x-operation-id': op() });
  /** An object nesting `levels` deep ({} is 1). */
  const nest = (levels: number): string => '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1);

  it('nesting up to the chain\'s depth is parsed (and the metadata skipped); deeper, even 100,000 levels, is 400 invalid_body', async () => {
    // body 1, documents 2, the passage 3, its metadata 4 onwards: 64 levels in all.
    const at = await rawIngest(`{"scope":"shared","documents":[{"id":"deep","text":"deep","metadata":${nest(61)}}]}`);
    expect([at.status, at.body]).toEqual([200, { ingested: 0, skipped: [{ index: 0, id: 'deep', reason: 'invalid_metadata', message: expect.stringContaining('"a"'), param: 'documents.0.metadata.a' }] }]);
    const over = await rawIngest(`{"scope":"shared","documents":[{"id":"deep","text":"deep","metadata":${nest(62)}}]}`);
    expect([over.status, over.body.error.code]).toEqual([400, 'invalid_body']);
    const abyss = await rawIngest(`{"scope":"shared","documents":[{"id":"deep","text":"deep","metadata":${'['.repeat(100_000)}${']'.repeat(100_000)}}]}`);
    expect([abyss.status, abyss.body.error.code]).toEqual([400, 'invalid_body']);
    const filter = await rawQuery(`{"mode":"shared","query":"x","filter":{"kind":{"$in":${'['.repeat(30_000)}${']'.repeat(30_000)}}}}`);
    expect([filter.status, filter.body.error.code]).toEqual([400, 'invalid_body']);
  });

  it('an ingest of exactly 5 MiB is read; one byte more is 413; a query over its 64 KiB is 413', async () => {
    const head = '{"scope":"shared","documents":[{"id":"padded","text":"padded body passage"}]';
    const exact = head + ' '.repeat(5 * 1024 * 1024 - head.length - 1) + '}';
    expect(Buffer.byteLength(exact)).toBe(5 * 1024 * 1024);
    const ok = await rawIngest(exact);
    expect([ok.status, ok.body]).toEqual([200, { ingested: 1, skipped: [] }]);
    const over = await rawIngest(`${exact} `);
    expect([over.status, over.body.error.code]).toEqual([413, 'request_too_large']);
    const bigQuery = await rawQuery(JSON.stringify({ mode: 'shared', query: 'x', filter: { kind: 'y'.repeat(5 * 1024 * 1024) } }));
    expect([bigQuery.status, bigQuery.body.error.code]).toEqual([413, 'request_too_large']);
  });

  it('100 passages of exactly 10 KiB each are stored whole; one byte more each is passage_too_large', async () => {
    const metadata = { category: 'ten-kib' };
    const passage = (i: number, bytes: number) => {
      const id = `kib-${String(i).padStart(3, '0')}`;
      const prefix = `ten kib passage ${i} é `;
      const fixed = Buffer.byteLength(id) + Buffer.byteLength(JSON.stringify(metadata)) + Buffer.byteLength(prefix);
      return { id, text: prefix + 'x'.repeat(bytes - fixed), metadata };
    };
    const full = Array.from({ length: 100 }, (_, i) => passage(i, 10 * 1024));
    const stored = await ingest({ scope: 'shared', documents: full });
    expect([stored.status, stored.body]).toEqual([200, { ingested: 100, skipped: [] }]);
    const q = await query({ mode: 'shared', query: 'ten kib passage 42 é', top_k: 50, filter: { category: 'ten-kib' } });
    expect(q.body.matches).toHaveLength(50);
    for (const m of q.body.matches) expect(m.text).toBe(full[Number(m.id.slice(4))].text);
    const over = await ingest({ scope: 'shared', documents: Array.from({ length: 100 }, (_, i) => ({ ...passage(i, 10 * 1024 + 1), id: `kib-over-${i}`.padEnd(7, '-').slice(0, 7) })) });
    expect(over.body.ingested).toBe(0);
    expect(new Set(over.body.skipped.map((s: any) => s.reason))).toEqual(new Set(['passage_too_large']));
  });
});

describe('scopes and workspaces cannot be crossed', () => {
  const secret = { id: 'secret-local', text: 'the private plans of the first key', document_id: 'secret-doc', metadata: { scope: 'shared', kind: 'secret-kind', category: 'secret', tag: ['secret'], source: 'local.operator' } };
  const every = [undefined, { kind: 'secret-kind' }, { category: 'secret' }, { tag: { $in: ['secret', 'other'] } }, { source: 'local.operator' }];

  beforeAll(async () => {
    expect((await ingest({ scope: 'local', documents: [secret] })).body.ingested).toBe(1);
    expect((await ingest({ scope: 'shared', documents: [{ id: 'ws1-shared', text: 'first workspace shared notes', document_id: 'ws1-doc', metadata: { category: 'ws1' } }] })).body.ingested).toBe(1);
  });

  it('filters naming the internal scope key or operators are refused', async () => {
    for (const name of ['scope', '$and', '$or', '$in', '$not', '$exists', 'Scope', 'scope ', '']) {
      const a = await query({ mode: 'hybrid', query: secret.text, filter: { [name]: name === '$and' || name === '$or' ? [{ scope: 'shared' }] : 'shared' } }, key2);
      expect([name, a.status, a.body.error.code, a.body.error.param]).toEqual([name, 400, 'invalid_field', `filter.${name}`]);
    }
    const inScope = await query({ mode: 'local', query: secret.text, filter: { kind: 'secret-kind', scope: { $in: ['shared', 'local.x'] } } }, key2);
    expect([inScope.status, inScope.body.error.param]).toEqual([400, 'filter.scope']);
  });

  it("another key of the organization sees nothing of the first key's local scope, by any mode or filter", async () => {
    for (const mode of ['local', 'shared', 'hybrid']) {
      for (const filter of every) {
        const a = await query({ mode, query: secret.text, top_k: 50, ...(filter ? { filter } : {}) }, key2);
        expect([mode, filter, a.status, ids(a).includes('secret-local')]).toEqual([mode, filter, 200, false]);
      }
    }
    const app = await tenants().createApplication(p.credentials.workspace_id, 'same-workspace-app', ['knowledge']);
    const { key: appKey } = await tenants().createSecretKey(org, app.id);
    for (const mode of ['local', 'shared', 'hybrid']) expect(ids(await query({ mode, query: secret.text, top_k: 50 }, appKey))).not.toContain('secret-local');
    expect(ids(await query({ mode: 'shared', query: 'first workspace shared notes', top_k: 1 }, appKey))).toEqual(['ws1-shared']);
    for (const k of [key2, appKey]) {
      expect((await allDocuments('local', k)).map((d) => d.document_id)).not.toContain('secret-doc');
      expect((await deleteDocument('secret-doc', 'local', k)).body.error.code).toBe('document_not_found');
      // Its own passage of the same id is another passage.
      expect((await ingest({ scope: 'local', documents: [{ id: 'secret-local', text: 'not the secret', document_id: 'secret-doc' }] }, k)).body.ingested).toBe(1);
    }
    const own = await query({ mode: 'hybrid', query: secret.text, top_k: 1 });
    expect(own.body.matches[0]).toMatchObject({ id: 'secret-local', scope: 'local', text: secret.text, metadata: secret.metadata });
    expect(await listed('secret-doc', 'local')).toMatchObject({ passages: 1, content_sha256: contentSha([[secret.id, secret.text]]) });
  });

  it("an application key of another workspace, or a key of another organization, sees nothing of this workspace's database", async () => {
    const { key: other } = await freshWorkspace('isolated-workspace');
    const otherOrg = await tenants().createOrganization('isolated-organization');
    await tenants().createWorkspace(otherOrg.id, 'theirs');
    await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(otherOrg.id, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
    const { key: foreign } = await tenants().createSecretKey(otherOrg.id);
    await createVectorDatabase(p.engine, (await tenants().defaultWorkspace(otherOrg.id))!, 'emb');
    const cursor = (await send('GET', '/v1/vector/documents?scope=shared&limit=1')).body.next_cursor;
    for (const k of [other, foreign]) {
      for (const mode of ['local', 'shared', 'hybrid']) {
        for (const text of [secret.text, 'first workspace shared notes']) {
          expect(ids(await query({ mode, query: text, top_k: 50 }, k))).toEqual([]);
        }
      }
      expect(await allDocuments('shared', k)).toEqual([]);
      expect((await deleteDocument('ws1-doc', 'shared', k)).body.error.code).toBe('document_not_found');
      expect((await send('GET', `/v1/vector/documents?scope=shared&limit=1&cursor=${cursor}`, k)).body.error.code).toBe('invalid_cursor');
    }
    expect(ids(await query({ mode: 'shared', query: 'first workspace shared notes', top_k: 1 }))).toEqual(['ws1-shared']);
  });
});

describe('selective filters', () => {
  beforeAll(async () => {
    // 1,100 passages closer to the query than the 3 that match: the crowd a graph search meets first.
    for (let call = 0; call < 11; call++) {
      const documents = Array.from({ length: 100 }, (_, i) => ({ id: `crowd-${call}-${i}`, text: `haystack needle query words ${call} ${i}`, metadata: { category: 'crowd', kind: 'hay' } }));
      expect((await ingest({ scope: 'shared', documents })).body.ingested).toBe(100);
    }
    const needles = [0, 1, 2].map((i) => ({ id: `needle-${i}`, text: `unrelated zebra vocabulary ${i}`, document_id: 'needles', metadata: { category: 'needle', kind: 'hay' } }));
    expect((await ingest({ scope: 'shared', documents: needles })).body.ingested).toBe(3);
    // The same filter matches passages of another key's local scope: they must not count either.
    const theirs = Array.from({ length: 100 }, (_, i) => ({ id: `their-needle-${i}`, text: `haystack needle query words ${i}`, metadata: { category: 'needle' } }));
    expect((await ingest({ scope: 'local', documents: theirs }, key2)).body.ingested).toBe(100);
  });

  it('top_k 50 with 3 matching passages among 1,100 closer ones answers exactly those 3, in every mode and filter form', async () => {
    const ask = (mode: string, filter: object, topK = 50) => query({ mode, query: 'haystack needle query words', top_k: topK, filter });
    const three = ['needle-0', 'needle-1', 'needle-2'];
    for (const mode of ['shared', 'hybrid']) {
      expect(ids(await ask(mode, { category: 'needle' })).sort()).toEqual(three);
      expect(ids(await ask(mode, { category: { $in: ['needle', 'nothing'] }, kind: 'hay' })).sort()).toEqual(three);
      expect(ids(await ask(mode, { category: 'needle' }, 2))).toHaveLength(2);
    }
    expect(ids(await ask('local', { category: 'needle' }))).toEqual([]);
    expect(ids(await ask('shared', { category: 'crowd' }))).toHaveLength(50);
    // A new generation of the needles' document leaves replaced entries behind for a moment: still 3.
    for (let g = 2; g <= 4; g++) {
      await ingest({ scope: 'shared', documents: [0, 1, 2].map((i) => ({ id: `needle-${i}`, text: `unrelated zebra vocabulary ${i} gen ${g}`, document_id: 'needles', generation: g, metadata: { category: 'needle' } })) });
      const a = await ask('shared', { category: 'needle' });
      expect(a.body.matches.map((m: any) => [m.id, m.text.endsWith(`gen ${g}`)]).sort()).toEqual(three.map((id) => [id, true]));
    }
  });
});

describe('query text', () => {
  it('8,000 four-byte characters are a query; 8,001 are refused, as are 8,001 of any kind', async () => {
    const ok = await query({ mode: 'hybrid', query: '🐱'.repeat(8000), top_k: 3, filter: { kind: 'hay' } });
    expect([ok.status, ok.body.matches.length]).toEqual([200, 3]);
    for (const text of ['🐱'.repeat(8001), `${'🐱'.repeat(7999)}ab`, 'e\u0301'.repeat(4001), 'x'.repeat(8001)]) {
      const a = await query({ mode: 'shared', query: text });
      expect([a.status, a.body.error.code, a.body.error.param]).toEqual([400, 'invalid_field', 'query']);
    }
    for (const text of [' \n\t ', '\u3000']) expect((await query({ mode: 'shared', query: text })).body.error.param).toBe('query');
    const lone = await postBytes(`${p.urls.ai}/v1/vector/query`, '{"mode":"shared","query":"\\ud83d\\ud83d lone halves \\udc31"}', { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': op() });
    expect(lone.status).toBeLessThan(500);
  });
});

describe('operation ids', () => {
  it('an id used on ingest, query, delete or embeddings is 409 operation_id_reused on each of the others', async () => {
    await ingest({ scope: 'shared', documents: [{ id: 'op-doc-p', text: 'operation id document', document_id: 'op-doc' }] });
    const used = { ingest: op(), query: op(), delete: op(), embeddings: op() };
    expect((await ingest({ scope: 'shared', documents: [{ id: 'op-a', text: 'operation ids' }] }, key, used.ingest)).status).toBe(200);
    expect((await query({ mode: 'shared', query: 'operation ids' }, key, used.query)).status).toBe(200);
    expect((await deleteDocument('op-doc', 'shared', key, used.delete)).status).toBe(200);
    expect((await postWithOperation(p.urls.ai, key, '/v1/embeddings', used.embeddings, { input: 'x' })).status).toBe(200);
    const calls: Record<keyof typeof used, (id: string) => Promise<Answer>> = {
      ingest: (id) => ingest({ scope: 'shared', documents: [{ id: 'op-b', text: 'should not be stored' }] }, key, id),
      query: (id) => query({ mode: 'shared', query: 'operation ids' }, key, id),
      delete: (id) => deleteDocument('op-doc', 'shared', key, id),
      embeddings: (id) => postWithOperation(p.urls.ai, key, '/v1/embeddings', id, { input: 'x' }),
    };
    for (const [usedOn, id] of Object.entries(used)) {
      for (const [name, call] of Object.entries(calls)) {
        if (name === usedOn) continue;
        const a = await call(id);
        expect([usedOn, name, a.status, a.body.error?.code]).toEqual([usedOn, name, 409, 'operation_id_reused']);
      }
    }
    expect(ids(await query({ mode: 'shared', query: 'should not be stored', top_k: 50 }))).not.toContain('op-b');
  });

  it('one id on many ingests at once stores one of them; the others replay it or are told it is in progress', async () => {
    const id = op();
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => ingest({ scope: 'shared', documents: [{ id: `same-op-${i}`, text: `same operation id writer ${i}`, metadata: { category: 'same-op' } }] }, key, id)));
    for (const a of answers) {
      if (a.status === 409) expect(a.body.error.code).toBe('operation_in_progress');
      else expect([a.status, a.body]).toEqual([200, { ingested: 1, skipped: [] }]);
    }
    expect(ids(await query({ mode: 'shared', query: 'same operation id writer', top_k: 50, filter: { category: 'same-op' } }))).toHaveLength(1);
  });
});

describe('operation ids across keys', () => {
  it("another key replaying a key's query id never gets its local matches, nor its ingest's answer as its own", async () => {
    expect((await ingest({ scope: 'local', documents: [{ id: 'replay-secret', text: 'replayed private diary entry' }] })).body.ingested).toBe(1);
    const id = op();
    const mine = await query({ mode: 'local', query: 'replayed private diary entry', top_k: 1 }, key, id);
    expect(ids(mine)).toEqual(['replay-secret']);
    const theirs = await query({ mode: 'local', query: 'replayed private diary entry', top_k: 1 }, key2, id);
    expect(theirs.text).not.toContain('replay-secret');
    expect([theirs.status, theirs.body.error?.code]).toEqual([409, 'operation_id_reused']);
    const ingestId = op();
    expect((await ingest({ scope: 'local', documents: [{ id: 'replay-ingest', text: 'mine' }] }, key, ingestId)).body.ingested).toBe(1);
    const again = await ingest({ scope: 'local', documents: [{ id: 'replay-ingest', text: 'theirs' }] }, key2, ingestId);
    expect([again.status, again.body.error?.code]).toEqual([409, 'operation_id_reused']);
  });
});

describe('an embedding upstream answering junk', () => {
  let k: string;
  let ws: string;

  beforeAll(async () => {
    scripted.script = undefined;
    ({ ws, key: k } = await freshWorkspace('junk-upstream', 'junk'));
    expect((await ingest({ scope: 'shared', documents: [{ id: 'before', text: 'stored before the junk' }] }, k)).body.ingested).toBe(1);
  });
  afterAll(() => {
    scripted.script = undefined;
  });

  const good = (text: string) => {
    const v = new Array<unknown>(32).fill(0.5);
    v[text.length % 32] = 1;
    return v;
  };
  const junk: [string, (inputs: string[]) => { status?: number; contentType?: string; body: string }][] = [
    ['strings', (inputs) => ({ body: listOf(inputs.map((t) => good(t).map(String))) })],
    ['"NaN" strings', (inputs) => ({ body: listOf(inputs.map(() => new Array(32).fill('NaN'))) })],
    ['null', (inputs) => ({ body: listOf(inputs.map(() => null)) })],
    ['nulls', (inputs) => ({ body: listOf(inputs.map(() => new Array(32).fill(null))) })],
    ['nested arrays', (inputs) => ({ body: listOf(inputs.map((t) => good(t).map((x) => [x]))) })],
    ['an object', (inputs) => ({ body: listOf(inputs.map(() => ({ 0: 1, length: 32 }))) })],
    ['booleans', (inputs) => ({ body: listOf(inputs.map(() => new Array(32).fill(true))) })],
    ['one vector too few', (inputs) => ({ body: listOf(inputs.slice(1).map(good)) })],
    ['one vector too many', (inputs) => ({ body: listOf([...inputs, 'extra'].map(good)) })],
    ['no vectors', () => ({ body: listOf([]) })],
    ['duplicate indexes', (inputs) => ({ body: JSON.stringify({ object: 'list', data: inputs.map((t) => ({ index: 0, embedding: good(t) })), usage: { prompt_tokens: 1 } }) })],
    ['an index out of range', (inputs) => ({ body: JSON.stringify({ object: 'list', data: inputs.map((t, i) => ({ index: i + 7, embedding: good(t) })), usage: { prompt_tokens: 1 } }) })],
    ['data null', () => ({ body: '{"object":"list","data":null}' })],
    ['data an object', () => ({ body: '{"object":"list","data":{"0":{"index":0,"embedding":[1]}}}' })],
    ['no data', () => ({ body: '{"object":"list"}' })],
    ['a bare array', (inputs) => ({ body: JSON.stringify(inputs.map(good)) })],
    ['a JSON string', () => ({ body: '"embedding"' })],
    ['NaN literals (not JSON)', (inputs) => ({ body: listOf(inputs.map(good)).replace(/0\.5/g, 'NaN') })],
    ['an overflowing number', (inputs) => ({ body: listOf(inputs.map(good)).replace(/0\.5/, '1e400') })],
    ['a number over the float range', (inputs) => ({ body: listOf(inputs.map(good)).replace(/0\.5/, '1e39') })],
    ['garbage', () => ({ body: 'garbage', contentType: 'text/plain' })],
    ['an HTML page', () => ({ body: '<html><body>ok</body></html>', contentType: 'text/html' })],
    ['an empty body', () => ({ body: '' })],
    ['an error object with 200', () => ({ body: '{"error":{"message":"overloaded"}}' })],
    ['a 200 truncated', (inputs) => ({ body: listOf(inputs.map(good)).slice(0, 40) })],
    ['components that underflow a float to zero', (inputs) => ({ body: listOf(inputs.map(() => new Array(32).fill(1e-46))) })],
    ['other dimensions for one input', (inputs) => ({ body: listOf(inputs.map((t, i) => (i === 0 ? good(t) : good(t).slice(1)))) })],
  ];

  /** Junk only where there are two inputs or more: a query's one input is answered well. */
  const manyOnly = new Set(['duplicate indexes', 'other dimensions for one input']);

  it.each(junk)('%s: ingest and query answer 502 upstream_error, nothing is stored', async (name, script) => {
    scripted.script = script;
    try {
      const i = await ingest({ scope: 'shared', documents: [{ id: 'junk-1', text: 'junk one' }, { id: 'junk-2', text: 'junk two' }] }, k);
      expect([i.status, i.body.error?.code]).toEqual([502, 'upstream_error']);
      const q = await query({ mode: 'hybrid', query: 'junk one' }, k);
      expect([q.status, q.body.error?.code]).toEqual(manyOnly.has(name) ? [200, undefined] : [502, 'upstream_error']);
    } finally {
      scripted.script = undefined;
    }
    expect((await readDatabase(p.engine, ws))!.passages).toBe(1);
    expect(ids(await query({ mode: 'shared', query: 'junk one', top_k: 50 }, k))).toEqual(['before']);
  });
});

describe('more races', () => {
  it('paging the document listing while documents come and go never repeats one nor skips one that stayed', async () => {
    const { key: k } = await freshWorkspace('listing-churn');
    const stay = Array.from({ length: 30 }, (_, i) => `stay-${String(i).padStart(2, '0')}`);
    for (const documentId of stay) await ingest({ scope: 'shared', documents: [{ id: `${documentId}-p`, text: `listing churn ${documentId}`, document_id: documentId }] }, k);
    let churning = true;
    const churn = async () => {
      for (let i = 0; churning; i++) {
        const documentId = `stay-${String(i % 30).padStart(2, '0')}x`;
        await ingest({ scope: 'shared', documents: [{ id: `${documentId}-p`, text: `churn ${i}`, document_id: documentId, generation: i + 1 }] }, k);
        await deleteDocument(documentId, 'shared', k);
      }
    };
    const pages = async () => {
      try {
        for (let round = 0; round < 6; round++) {
          const seen: string[] = [];
          let cursor: string | null = null;
          do {
            const page: Answer = await send('GET', `/v1/vector/documents?scope=shared&limit=7${cursor ? `&cursor=${cursor}` : ''}`, k);
            expect(page.status).toBe(200);
            seen.push(...page.body.data.map((d: Listed) => d.document_id));
            cursor = page.body.next_cursor;
          } while (cursor);
          expect(new Set(seen).size).toBe(seen.length);
          expect(seen.filter((d) => !d.endsWith('x'))).toEqual(stay);
        }
      } finally {
        churning = false;
      }
    };
    await Promise.all([churn(), pages()]);
  });

  it('ingests and queries while the database is deleted answer 200 or 409, never 5xx, and nothing is left of it', async () => {
    const { ws, key: k, keyId } = await freshWorkspace('deleted-under-writers');
    expect((await ingest({ scope: 'shared', documents: [{ id: 'first', text: 'before the deletion', document_id: 'd' }] }, k)).body.ingested).toBe(1);
    const old = (await readDatabase(p.engine, ws))!.database_id;
    const started = embedder.calls.length;
    // The embedder is slow, so the calls have opened the database and are embedding when it is deleted.
    embedder.behavior.stallMs = 150;
    let answers: Answer[];
    try {
      const calls: Promise<Answer>[] = [];
      for (let i = 0; i < 12; i++) {
        calls.push(ingest({ scope: i % 2 ? 'local' : 'shared', documents: Array.from({ length: 20 }, (_, j) => ({ id: `w-${i}-${j}`, text: `writer ${i} passage ${j}`, document_id: `d-${i % 3}` })) }, k));
        calls.push(query({ mode: 'hybrid', query: 'writer passage', top_k: 10 }, k));
      }
      await waitFor('the calls to reach the embedder', () => embedder.calls.length >= started + 12, 5_000, 2);
      await deleteVectorDatabase(p.engine, ws);
      answers = await Promise.all(calls);
    } finally {
      embedder.behavior.stallMs = 0;
    }
    for (const a of answers) {
      expect(a.status, a.text).toBeLessThan(500);
      if (a.status !== 200) expect(a.body.error.code).toBe('vector_database_deleting');
    }
    await waitFor('the removal job', async () => (await readDatabase(p.engine, ws)) === undefined, 20_000);
    // Nothing of the old database is left in the store: the job cleared each scope in its writer's turn.
    const partitions = [`vs#${old}`, ...['shared', `local.${keyId}`].flatMap((tag) => ['vp', 'vd', 'vi', 'vh', 'vl'].map((kind) => `${kind}#${old}#${tag}`)), ...['d', 'd-0', 'd-1', 'd-2'].flatMap((d) => [`vm#${old}#shared#${d}`, `vm#${old}#local.${keyId}#${d}`])];
    for (const pk of partitions) expect((await p.engine.kv.query({ pk, limit: 1 })).items, pk).toEqual([]);
    await createVectorDatabase(p.engine, ws, 'emb');
    expect(ids(await query({ mode: 'hybrid', query: 'writer passage before the deletion', top_k: 50 }, k))).toEqual([]);
    expect(await allDocuments('shared', k)).toEqual([]);
    expect((await readDatabase(p.engine, ws))!.passages).toBe(0);
  });

  it('a passage moved out of a document (to another, or standalone) survives that document\'s next generation and its deletion; counts follow', async () => {
    const { ws, key: k } = await freshWorkspace('movers-out');
    const put = async (documents: object[]) => expect((await ingest({ scope: 'shared', documents }, k)).body.skipped).toEqual([]);
    const visible = async () => ids(await query({ mode: 'shared', query: 'moving passage', top_k: 50, filter: { category: 'moving' } }, k)).sort();
    const m = { category: 'moving' };
    await put([1, 2, 3].map((i) => ({ id: `m${i}`, text: `moving passage ${i}`, document_id: 'origin', metadata: m })));
    await put([{ id: 'loose', text: 'moving passage loose', metadata: m }]);
    // m1 to another document, m2 standalone, the loose one into the origin document.
    await put([{ id: 'm1', text: 'moving passage 1 elsewhere', document_id: 'elsewhere', metadata: m }]);
    await put([{ id: 'm2', text: 'moving passage 2 alone', metadata: m }]);
    await put([{ id: 'loose', text: 'moving passage loose joined', document_id: 'origin', metadata: m }]);
    expect(await listed('origin', 'shared', k)).toMatchObject({ generation: 1, passages: 2, content_sha256: contentSha([['m3', 'moving passage 3'], ['loose', 'moving passage loose joined']]) });
    expect(await listed('elsewhere', 'shared', k)).toMatchObject({ passages: 1 });
    expect((await readDatabase(p.engine, ws))!.passages).toBe(4);
    // The origin's next generation replaces m3 and loose only; its deletion removes its own only.
    await put([{ id: 'm3', text: 'moving passage 3 again', document_id: 'origin', generation: 2, metadata: m }]);
    expect(await visible()).toEqual(['m1', 'm2', 'm3']);
    expect((await readDatabase(p.engine, ws))!.passages).toBe(3);
    expect((await deleteDocument('origin', 'shared', k)).body).toEqual({ document_id: 'origin', generation: 2, deleted: 1 });
    expect(await visible()).toEqual(['m1', 'm2']);
    expect((await readDatabase(p.engine, ws))!.passages).toBe(2);
    // The same passage sent again at a new generation with the same text is still one passage.
    await put([{ id: 'm1', text: 'moving passage 1 elsewhere', document_id: 'elsewhere', generation: 2, metadata: m }]);
    expect(await listed('elsewhere', 'shared', k)).toMatchObject({ generation: 2, passages: 1, content_sha256: contentSha([['m1', 'moving passage 1 elsewhere']]) });
    expect((await readDatabase(p.engine, ws))!.passages).toBe(2);
  });

  it('one id in both scopes is two passages: hybrid answers both, each naming its scope', async () => {
    await ingest({ scope: 'shared', documents: [{ id: 'twin', text: 'twin passage shared copy', metadata: { category: 'twins' } }] });
    await ingest({ scope: 'local', documents: [{ id: 'twin', text: 'twin passage local copy', metadata: { category: 'twins' } }] });
    const a = await query({ mode: 'hybrid', query: 'twin passage copy', top_k: 50, filter: { category: 'twins' } });
    expect(a.body.matches.map((m: any) => [m.id, m.scope, m.text]).sort()).toEqual([
      ['twin', 'local', 'twin passage local copy'],
      ['twin', 'shared', 'twin passage shared copy'],
    ]);
    expect(ids(await query({ mode: 'hybrid', query: 'twin passage copy', top_k: 50, filter: { category: 'twins' } }, key2))).toEqual(['twin']);
  });
});

describe('lone surrogates (JSON "\\ud800": not Unicode, stored as U+FFFD by DynamoDB and S3 Vectors)', () => {
  const json = (k: string) => ({ authorization: `Bearer ${k}`, 'content-type': 'application/json', 'x-operation-id': op() });

  it('in an id, a text or metadata the passage is skipped; in a document id the call is refused; two such ids never become one passage', async () => {
    const { ws, key: k } = await freshWorkspace('lone-surrogates');
    const documents = [
      '{"id":"lone\\ud800","text":"lone half one","metadata":{"category":"lone"}}',
      '{"id":"lone\\udbff","text":"lone half two","metadata":{"category":"lone"}}',
      '{"id":"text","text":"lone half \\udc31 text","metadata":{"category":"lone"}}',
      '{"id":"value","text":"lone half value","metadata":{"category":"lone \\ud83d"}}',
      '{"id":"element","text":"lone half element","metadata":{"tag":["ok","\\ud83d"]}}',
      '{"id":"key","text":"lone half key","metadata":{"k\\ud83d":"v"}}',
      '{"id":"pair\\ud83d\\udc31","text":"a whole pair \\ud83d\\udc31 is a character","metadata":{"category":"lone"}}',
    ];
    const a = await postBytes(`${p.urls.ai}/v1/vector/ingest`, `{"scope":"shared","documents":[${documents.join(',')}]}`, json(k));
    expect(a.body).toEqual({
      ingested: 1,
      skipped: [
        { index: 0, id: 'lone\ud800', reason: 'invalid_id' },
        { index: 1, id: 'lone\udbff', reason: 'invalid_id' },
        { index: 2, id: 'text', reason: 'invalid_text' },
        { index: 3, id: 'value', reason: 'invalid_metadata', message: expect.stringContaining('"category"'), param: 'documents.3.metadata.category' },
        { index: 4, id: 'element', reason: 'invalid_metadata', message: expect.stringContaining('"tag"'), param: 'documents.4.metadata.tag' },
        { index: 5, id: 'key', reason: 'invalid_metadata', message: expect.stringContaining('"k\\ud83d"'), param: 'documents.5.metadata' },
      ],
    });
    expect(ids(await query({ mode: 'shared', query: 'a whole pair 🐱 is a character', top_k: 1 }, k))).toEqual(['pair🐱']);
    expect((await readDatabase(p.engine, ws))!.passages).toBe(1);
    const document = await postBytes(`${p.urls.ai}/v1/vector/ingest`, '{"scope":"shared","documents":[{"id":"d","text":"d","document_id":"half\\ud800"}]}', json(k));
    expect([document.status, document.body.error.code, document.body.error.param]).toEqual([400, 'invalid_body', 'documents.0.document_id']);
  });

  it('in a query or a filter value, 400 invalid_field', async () => {
    const q = await postBytes(`${p.urls.ai}/v1/vector/query`, '{"mode":"shared","query":"lone \\ud800 half"}', json(key));
    expect([q.status, q.body.error.code, q.body.error.param]).toEqual([400, 'invalid_field', 'query']);
    const f = await postBytes(`${p.urls.ai}/v1/vector/query`, '{"mode":"shared","query":"lone","filter":{"kind":{"$in":["a","\\udc00"]}}}', json(key));
    expect([f.status, f.body.error.code, f.body.error.param]).toEqual([400, 'invalid_field', 'filter.kind']);
  });
});

describe('two workers (npm start, LOCAL_WORKERS=2)', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'vector-attack-'));
  let server: LocalProcess;
  let k: string;
  const call = (path: string, body: object) => postWithOperation(server.urls.ai, k, path, op(), body);

  beforeAll(async () => {
    server = await startLocalProcess({ DATA_DIR: dataDir, LOCAL_WORKERS: '2' });
    const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    k = credentials.secret_key;
    adminOk(dataDir, 'route', 'set', '--org', credentials.organization_id, '--id', 'emb', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', embedder.baseUrl, '--model', 'fake-embed', '--default');
    await adminAsyncOk(dataDir, 'vector-db', 'create', '--workspace', credentials.workspace_id, '--embedding-route', 'emb');
  }, 60_000);
  afterAll(async () => {
    if (server) await crashLocalProcess(server);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('readers on both workers during generation bumps through both see one whole generation, the latest acknowledged or newer', async () => {
    const parts = 4;
    let acknowledged = 0;
    const bump = async (g: number) => {
      const a = await call('/v1/vector/ingest', { scope: 'shared', documents: Array.from({ length: parts }, (_, i) => ({ id: `w-${g}-${i}`, text: `two workers generation ${g} part ${i}`, document_id: 'two-workers', generation: g, metadata: { source: 'two-workers' } })) });
      expect([a.status, a.body.ingested]).toEqual([200, parts]);
      acknowledged = g;
    };
    await bump(1);
    let writing = true;
    const bad: unknown[] = [];
    let answers = 0;
    const reader = async () => {
      while (writing) {
        const floor = acknowledged;
        const q = await call('/v1/vector/query', { mode: 'shared', query: 'two workers generation part', top_k: 50, filter: { source: 'two-workers' } });
        answers++;
        const found: string[] = q.status === 200 ? ids(q) : [];
        const generations = [...new Set(found.map((id) => Number(id.split('-')[1])))];
        if (q.status !== 200 || found.length !== parts || generations.length !== 1 || generations[0] < floor) bad.push({ status: q.status, floor, found });
      }
    };
    const writer = async () => {
      try {
        for (let g = 2; g <= 30; g++) await bump(g);
      } finally {
        writing = false;
      }
    };
    await Promise.all([writer(), reader(), reader(), reader()]);
    expect(answers).toBeGreaterThan(10);
    expect(bad).toEqual([]);
  }, 60_000);
});
