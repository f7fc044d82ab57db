/**
 * The vector database through the local server with a real HTTP client (spec 4.6, 4.7; docs/ai/vector.md):
 * ingest and its skip reasons, scopes, generations, documents, filters, hybrid queries, reranking,
 * the database's lifecycle and every error code, against a fake embeddings upstream whose vectors
 * mean something and a fake reranker.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { startFakeReranker, type FakeReranker } from '../helpers/fake-reranker.js';
import { postBytes, postWithOperation } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';
import { documentSha256 } from '../helpers/vector-content-hash.js';
import { ModelRoutes, ModelRouteError } from '../../lambdas/ai/model-routes.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { createVectorDatabase, deleteVectorDatabase, readDatabase } from '../../lambdas/vector/databases.js';
import { RerankProfiles } from '../../lambdas/vector/rerank-profiles.js';
import { AiKeyLimits } from '../../lambdas/ai/limits.js';

let p: TestPlatform;
let embedder: FakeEmbedder;
let reranker: FakeReranker;
let org: string;
let key: string;
/** A second organization-wide key of the same organization: its own local scope. */
let key2: string;
const tenants = () => new Tenants(p.engine.kv, () => p.engine.clock.now());
const routes = () => new ModelRoutes(p.engine.kv, () => p.engine.clock.now());

const op = () => `op-${randomUUID()}`;
const ingest = (body: object, k = key, id = op()) => postWithOperation(p.urls.ai, k, '/v1/vector/ingest', id, body);
const query = (body: object, k = key, id = op()) => postWithOperation(p.urls.ai, k, '/v1/vector/query', id, body);
const ids = (answer: { body: any }) => answer.body.matches.map((m: any) => m.id);

async function request(method: string, path: string, k = key, headers: Record<string, string> = {}) {
  const res = await fetch(`${p.urls.ai}${path}`, { method, headers: { ...bearer(k), ...headers } });
  return { status: res.status, headers: res.headers, body: (await res.json().catch(() => undefined)) as any };
}
const listDocuments = (scope: string, extra = '', k = key) => request('GET', `/v1/vector/documents?scope=${scope}${extra}`, k);
const deleteDocument = (id: string, scope: string, k = key) => request('DELETE', `/v1/vector/documents/${encodeURIComponent(id)}?scope=${scope}`, k, { 'x-operation-id': op() });

beforeAll(async () => {
  p = await startTestPlatform();
  embedder = await startFakeEmbedder();
  reranker = await startFakeReranker();
  org = p.credentials.organization_id;
  key = p.credentials.secret_key;
  key2 = (await tenants().createSecretKey(org)).key;
  await routes().set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 1_000, default: true });
  await new RerankProfiles(p.engine.kv, () => p.engine.clock.now()).set(org, { id: 'fake', provider: 'openai-compatible', base_url: reranker.baseUrl, model: 'rr', timeout_ms: 300 });
});

afterAll(async () => {
  await embedder?.close();
  await reranker?.close();
  await p?.close();
});

describe('before a database exists', () => {
  it('every vector route answers 409 vector_database_not_created', async () => {
    const other = await tenants().createOrganization('no vectors');
    await tenants().createWorkspace(other.id, 'w');
    const { key: k } = await tenants().createSecretKey(other.id);
    expect((await ingest({ scope: 'shared', documents: [{ id: 'a', text: 'x' }] }, k)).body.error.code).toBe('vector_database_not_created');
    const q = await query({ mode: 'shared', query: 'x' }, k);
    expect([q.status, q.body.error.code]).toEqual([409, 'vector_database_not_created']);
    expect((await listDocuments('shared', '', k)).body.error.code).toBe('vector_database_not_created');
  });
});

describe('with the workspace database', () => {
  beforeAll(async () => {
    const database = await createVectorDatabase(p.engine, p.credentials.workspace_id, 'emb');
    expect(database).toMatchObject({ state: 'active', embedding_route: 'emb', upstream_model: 'fake-embed', dimensions: 32, passages: 0 });
  });

  it('ingests and finds a passage by meaning, best first, with its metadata and scope', async () => {
    const a = await ingest({
      scope: 'shared',
      documents: [
        { id: 'cats', text: 'cats purr and sleep all day', metadata: { kind: 'note', tag: ['pets', 'cats'], rating: 4 } },
        { id: 'rust', text: 'rust ownership and borrowing rules', metadata: { kind: 'doc', language: 'en' } },
      ],
    });
    expect([a.status, a.body]).toEqual([200, { ingested: 2, skipped: [] }]);
    const q = await query({ mode: 'shared', query: 'cats purr and sleep all day', top_k: 2 });
    expect(q.status).toBe(200);
    expect(q.body.matches[0]).toEqual({ id: 'cats', score: expect.closeTo(1, 5), text: 'cats purr and sleep all day', metadata: { kind: 'note', tag: ['pets', 'cats'], rating: 4 }, scope: 'shared' });
    expect(q.body.matches[1].score).toBeLessThan(q.body.matches[0].score);
    expect(q.body.retrieval).toEqual({ mode: 'vector', reranked: false, profile: null, outcome: 'none' });
    expect(q.headers['x-operation-id']).toBeDefined();
  });

  it('an invalid_metadata skip names the key that was wrong, in its message and its param', async () => {
    const a = await ingest({
      scope: 'shared',
      documents: [
        { id: 'm0', text: 'nested', metadata: { kind: 'ok', source: { deep: 1 } } },
        { id: 'm1', text: 'numbers', metadata: { tag: ['a', 2] } },
        { id: 'm2', text: 'null', metadata: { kind: 'ok', language: null } },
        { id: 'm3', text: 'not an object', metadata: 'kind=doc' },
        { id: 'm4', text: 'long key', metadata: { ['k'.repeat(65)]: 'v' } },
        { id: 'm5', text: 'lone surrogate', metadata: JSON.parse('{"note":"\\ud800"}') },
        { id: 'm6', text: 'filterable over 1,536 bytes', metadata: { kind: 'doc', category: 'c'.repeat(1600) } },
        { id: 'm7', text: 'stored', metadata: { kind: 'ok' } },
      ],
    });
    expect(a.status, a.text).toBe(200);
    expect(a.body.ingested).toBe(1);
    const byId = Object.fromEntries(a.body.skipped.map((s: any) => [s.id, s]));
    const expected: Record<string, [string, string]> = {
      m0: ['documents.0.metadata.source', '"source"'],
      m1: ['documents.1.metadata.tag', '"tag"'],
      m2: ['documents.2.metadata.language', '"language"'],
      m3: ['documents.3.metadata', 'metadata is a JSON object'],
      // A key that is not one (over 64 characters) is quoted in the message only: param names the metadata.
      m4: ['documents.4.metadata', `"${'k'.repeat(65)}"`],
      m5: ['documents.5.metadata.note', '"note"'],
      m6: ['documents.6.metadata.category', '"category"'],
    };
    for (const [id, [param, named]] of Object.entries(expected)) {
      expect(byId[id], id).toEqual({ index: Number(id.slice(1)), id, reason: 'invalid_metadata', message: expect.stringContaining(named), param });
    }
    expect(byId.m6.message).toContain('over 1536');
  });

  it('absent or empty metadata counts nothing toward the 10 KiB of a passage; any key counts its whole JSON', async () => {
    // id + text exactly 10 KiB: stored without metadata (absent or {}), too large with any.
    const text = (id: string) => 'y'.repeat(10 * 1024 - Buffer.byteLength(id));
    const a = await ingest({
      scope: 'shared',
      documents: [
        { id: 'absent', text: text('absent') },
        { id: 'empty', text: text('empty'), metadata: {} },
        { id: 'keyed', text: text('keyed'), metadata: { kind: 'a' } },
      ],
    });
    expect([a.status, a.body]).toEqual([200, { ingested: 2, skipped: [{ index: 2, id: 'keyed', reason: 'passage_too_large' }] }]);
  });

  it('lists each passage it could not store with its index, id and reason; stores the others', async () => {
    const big = 'x'.repeat(10 * 1024);
    const a = await ingest({
      scope: 'shared',
      documents: [
        { id: '', text: 'empty id' },
        { id: 'é'.repeat(129), text: 'id over 256 bytes' },
        { id: 'no-text', text: '' },
        { id: 'nested', text: 'nested metadata', metadata: { a: { b: 1 } } },
        { id: 'numbers', text: 'array of numbers', metadata: { tag: [1, 2] } },
        { id: 'big', text: big },
        { id: 'twice', text: 'first of two' },
        { id: 'twice', text: 'second of two' },
        { id: 'fine', text: 'a fine passage', metadata: JSON.parse('{"__proto__":"x","constructor":1}') },
        { text: 'no id at all' },
      ],
    });
    expect(a.status).toBe(200);
    expect(a.body).toEqual({
      ingested: 2,
      skipped: [
        { index: 0, id: '', reason: 'invalid_id' },
        { index: 1, id: 'é'.repeat(129), reason: 'invalid_id' },
        { index: 2, id: 'no-text', reason: 'invalid_text' },
        { index: 3, id: 'nested', reason: 'invalid_metadata', message: expect.stringContaining('"a"'), param: 'documents.3.metadata.a' },
        { index: 4, id: 'numbers', reason: 'invalid_metadata', message: expect.stringContaining('"tag"'), param: 'documents.4.metadata.tag' },
        { index: 5, id: 'big', reason: 'passage_too_large' },
        { index: 6, id: 'twice', reason: 'duplicate_in_call' },
        { index: 9, id: null, reason: 'invalid_id' },
      ],
    });
    const q = await query({ mode: 'shared', query: 'second of two', top_k: 1 });
    expect(q.body.matches[0]).toMatchObject({ id: 'twice', text: 'second of two' });
    const f = await query({ mode: 'shared', query: 'a fine passage', top_k: 1 });
    expect(f.body.matches[0].metadata).toEqual(JSON.parse('{"__proto__":"x","constructor":1}'));
  });

  it('answers whole-call problems with 400 and 413, storing nothing', async () => {
    const bad = async (body: string | object, code: string, status = 400) => {
      const r = typeof body === 'string' ? await postBytes(`${p.urls.ai}/v1/vector/ingest`, body, { ...bearer(key), 'content-type': 'application/json', 'x-operation-id': op() }) : await ingest(body);
      expect([r.status, r.body.error.code]).toEqual([status, code]);
      return r.body.error;
    };
    await bad('{"scope":', 'invalid_body');
    await bad({ documents: [{ id: 'a', text: 'b' }] }, 'invalid_body');
    await bad({ scope: 'everyone', documents: [{ id: 'a', text: 'b' }] }, 'invalid_body');
    await bad({ scope: 'shared', documents: [] }, 'invalid_body');
    await bad({ scope: 'shared', documents: Array.from({ length: 101 }, (_, i) => ({ id: `p${i}`, text: 't' })) }, 'invalid_body');
    await bad({ scope: 'shared', documents: ['text'] }, 'invalid_body');
    expect(await bad({ scope: 'shared', documents: [{ id: 'a', text: 'b' }], namespace: 'x' }, 'unsupported_field')).toMatchObject({ param: 'namespace' });
    expect(await bad({ scope: 'shared', documents: [{ id: 'a', text: 'b', vector: [1] }] }, 'unsupported_field')).toMatchObject({ param: 'documents.0.vector' });
    await bad({ scope: 'shared', documents: [{ id: 'a', text: 'b', document_id: 'd', generation: 0 }] }, 'invalid_body');
    await bad({ scope: 'shared', documents: [{ id: 'a', text: 'b', generation: 2 }] }, 'invalid_body');
    await bad('{"scope":"shared","documents":[{"id":"a","text":"b","document_id":"d","generation":1e400}]}', 'invalid_body');
    await bad(JSON.stringify({ scope: 'shared', documents: [{ id: 'a', text: 'x'.repeat(5 * 1024 * 1024) }] }), 'request_too_large', 413);
    const none = await postBytes(`${p.urls.ai}/v1/vector/ingest`, '{}', { ...bearer(key), 'content-type': 'application/json' });
    expect(none.body.error.code).toBe('missing_operation_id');
  });

  it('keeps the local scope to the key that wrote it; the shared one is every key\'s', async () => {
    expect((await ingest({ scope: 'local', documents: [{ id: 'mine', text: 'private lunch plans' }] })).body.ingested).toBe(1);
    expect(ids(await query({ mode: 'local', query: 'private lunch plans' }))).toEqual(['mine']);
    expect(ids(await query({ mode: 'local', query: 'private lunch plans' }, key2))).toEqual([]);
    expect(ids(await query({ mode: 'shared', query: 'private lunch plans' }))).not.toContain('mine');
    expect(ids(await query({ mode: 'shared', query: 'cats purr', top_k: 1 }, key2))).toEqual(['cats']);
    // The same id in the other scope is another passage.
    await ingest({ scope: 'local', documents: [{ id: 'cats', text: 'my own cat notes' }] });
    expect((await query({ mode: 'shared', query: 'cats purr and sleep all day', top_k: 1 })).body.matches[0].text).toBe('cats purr and sleep all day');
  });

  it('hybrid searches both scopes at once and merges them by score, each match naming its scope', async () => {
    await ingest({ scope: 'local', documents: [{ id: 'h-local', text: 'zebra stripes local copy' }] });
    await ingest({ scope: 'shared', documents: [{ id: 'h-shared', text: 'zebra stripes shared' }] });
    const q = await query({ mode: 'hybrid', query: 'zebra stripes local copy', top_k: 3 });
    expect(q.body.matches.slice(0, 2).map((m: any) => [m.id, m.scope])).toEqual([['h-local', 'local'], ['h-shared', 'shared']]);
    const scores = q.body.matches.map((m: any) => m.score);
    expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    expect(ids(await query({ mode: 'hybrid', query: 'zebra stripes local copy', top_k: 3 }, key2))).not.toContain('h-local');
  });

  describe('documents and generations', () => {
    const doc = (id: string, text: string, generation?: number, document_id = 'manual') => ({ id, text, document_id, ...(generation === undefined ? {} : { generation }) });
    it('grows a generation over several calls, lists it with its content hash, and replaces it whole with a higher one', async () => {
      expect((await ingest({ scope: 'shared', documents: [doc('m1', 'install on linux'), doc('m2', 'install on mac')] })).body).toEqual({ ingested: 2, skipped: [] });
      expect((await ingest({ scope: 'shared', documents: [doc('m3', 'install on windows', 1)] })).body.ingested).toBe(1);
      let listed = (await listDocuments('shared')).body.data.find((d: any) => d.document_id === 'manual');
      expect(listed).toEqual({
        document_id: 'manual',
        generation: 1,
        passages: 3,
        content_sha256: documentSha256([['m1', 'install on linux'], ['m2', 'install on mac'], ['m3', 'install on windows']]),
        updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
      });
      expect(ids(await query({ mode: 'shared', query: 'install on', top_k: 10, filter: {} }))).toEqual(expect.arrayContaining(['m1', 'm2', 'm3']));
      // Generation 2 replaces the three with one; the same id m1 now holds new text.
      expect((await ingest({ scope: 'shared', documents: [doc('m1', 'install with the package manager', 2)] })).body).toEqual({ ingested: 1, skipped: [] });
      const after = ids(await query({ mode: 'shared', query: 'install on linux mac windows', top_k: 20 }));
      expect(after).toContain('m1');
      expect(after).not.toContain('m2');
      expect(after).not.toContain('m3');
      listed = (await listDocuments('shared')).body.data.find((d: any) => d.document_id === 'manual');
      expect(listed).toMatchObject({ generation: 2, passages: 1, content_sha256: documentSha256([['m1', 'install with the package manager']]) });
      // Lower is stale; a passage without a generation joins the current one.
      expect((await ingest({ scope: 'shared', documents: [doc('m9', 'old', 1), doc('m4', 'install notes')] })).body).toEqual({ ingested: 1, skipped: [{ index: 0, id: 'm9', reason: 'stale_generation' }] });
      expect((await listDocuments('shared')).body.data.find((d: any) => d.document_id === 'manual')).toMatchObject({ generation: 2, passages: 2 });
    });

    it('deletes a document at once, remembers its generation, and takes it back only above it', async () => {
      await ingest({ scope: 'shared', documents: [doc('g1', 'glossary alpha', 3, 'glossary'), doc('g2', 'glossary beta', 3, 'glossary')] });
      const del = await deleteDocument('glossary', 'shared');
      expect([del.status, del.body]).toEqual([200, { document_id: 'glossary', generation: 3, deleted: 2 }]);
      expect(ids(await query({ mode: 'shared', query: 'glossary alpha beta', top_k: 20 }))).not.toEqual(expect.arrayContaining(['g1']));
      expect((await listDocuments('shared')).body.data.map((d: any) => d.document_id)).not.toContain('glossary');
      expect((await ingest({ scope: 'shared', documents: [doc('g1', 'glossary alpha', 3, 'glossary')] })).body.skipped).toEqual([{ index: 0, id: 'g1', reason: 'document_deleted' }]);
      expect((await ingest({ scope: 'shared', documents: [doc('g1', 'glossary alpha', undefined, 'glossary')] })).body.skipped).toEqual([{ index: 0, id: 'g1', reason: 'document_deleted' }]);
      expect((await ingest({ scope: 'shared', documents: [doc('g3', 'glossary gamma', 4, 'glossary')] })).body.ingested).toBe(1);
      expect(ids(await query({ mode: 'shared', query: 'glossary alpha beta gamma', top_k: 20 }))).toContain('g3');
      expect((await deleteDocument('never-was', 'shared')).body.error.code).toBe('document_not_found');
      expect((await deleteDocument('glossary', 'elsewhere')).body.error).toMatchObject({ code: 'invalid_field', param: 'scope' });
    });

    it('pages the listing with sealed cursors bound to the scope', async () => {
      for (let i = 0; i < 5; i++) await ingest({ scope: 'local', documents: [doc(`page-${i}`, `page ${i}`, 1, `book-${i}`)] });
      const first = await listDocuments('local', '&limit=2');
      expect(first.body.data).toHaveLength(2);
      const seen = [...first.body.data];
      let cursor = first.body.next_cursor;
      while (cursor) {
        const next = await listDocuments('local', `&limit=2&cursor=${cursor}`);
        expect(next.status).toBe(200);
        seen.push(...next.body.data);
        cursor = next.body.next_cursor;
      }
      expect(seen.map((d) => d.document_id).filter((d) => d.startsWith('book-'))).toEqual(['book-0', 'book-1', 'book-2', 'book-3', 'book-4']);
      expect((await listDocuments('shared', `&limit=2&cursor=${first.body.next_cursor}`)).body.error.code).toBe('invalid_cursor');
      expect((await listDocuments('local', `&limit=2&cursor=${first.body.next_cursor}`, key2)).body.error.code).toBe('invalid_cursor');
      expect((await listDocuments('local', '&limit=0')).body.error).toMatchObject({ code: 'invalid_field', param: 'limit' });
      expect((await listDocuments('local', '&limit=101')).body.error).toMatchObject({ code: 'invalid_field', param: 'limit' });
      expect((await listDocuments('local', '&sort=x')).body.error.code).toBe('unsupported_field');
      expect((await request('GET', '/v1/vector/documents')).body.error).toMatchObject({ code: 'invalid_field', param: 'scope' });
    });
  });

  describe('filters', () => {
    beforeAll(async () => {
      const documents = Array.from({ length: 60 }, (_, i) => ({
        id: `f${i}`,
        text: `filter corpus passage number ${i}`,
        metadata: { category: i % 20 === 0 ? 'rare' : 'common', source: `s${i % 3}`, tag: i % 2 ? ['odd', 'all'] : ['even', 'all'], created_at: 2000 + (i % 5), language: i % 2 ? 'en' : 'de' },
      }));
      expect((await ingest({ scope: 'shared', documents })).body.ingested).toBe(60);
    });

    it('equality, $in and array keys; a selective filter still fills top_k', async () => {
      const rare = await query({ mode: 'shared', query: 'filter corpus passage', top_k: 5, filter: { category: 'rare' } });
      expect(ids(rare).sort()).toEqual(['f0', 'f20', 'f40']);
      const byTag = await query({ mode: 'shared', query: 'filter corpus passage', top_k: 50, filter: { tag: 'odd', source: 's1' } });
      expect(byTag.body.matches.every((m: any) => m.metadata.tag.includes('odd') && m.metadata.source === 's1')).toBe(true);
      expect(byTag.body.matches).toHaveLength(10);
      const inYears = await query({ mode: 'shared', query: 'filter corpus passage', top_k: 50, filter: { created_at: { $in: [2001, 2003] } } });
      expect(inYears.body.matches).toHaveLength(24);
      const inTags = await query({ mode: 'shared', query: 'filter corpus passage', top_k: 7, filter: { tag: { $in: ['even', 'missing'] }, language: 'de' } });
      expect(inTags.body.matches).toHaveLength(7);
    });

    it('refuses what is not a filter with 400 invalid_field naming it', async () => {
      const bad = async (filter: unknown, param: string) => {
        const r = await query({ mode: 'shared', query: 'x', filter });
        expect([r.status, r.body.error.code, r.body.error.param]).toEqual([400, 'invalid_field', param]);
      };
      await bad({ color: 'red' }, 'filter.color');
      await bad({ tag: { $in: [] } }, 'filter.tag');
      await bad({ tag: { $in: Array.from({ length: 21 }, (_, i) => `t${i}`) } }, 'filter.tag');
      await bad({ tag: { $nin: ['a'] } }, 'filter.tag');
      await bad({ tag: { $in: [{}] } }, 'filter.tag');
      await bad({ tag: ['a'] }, 'filter.tag');
      await bad({ kind: null }, 'filter.kind');
      await bad('kind=a', 'filter');
    });
  });

  describe('query input', () => {
    it('answers a malformed body or a missing mode or query 400 invalid_body, values out of range 400 invalid_field', async () => {
      const r = await postBytes(`${p.urls.ai}/v1/vector/query`, 'nope', { ...bearer(key), 'content-type': 'application/json', 'x-operation-id': op() });
      expect(r.body.error.code).toBe('invalid_body');
      expect((await query({ query: 'x' })).body.error).toMatchObject({ code: 'invalid_body', param: 'mode' });
      expect((await query({ mode: 'shared' })).body.error).toMatchObject({ code: 'invalid_body', param: 'query' });
      const field = async (body: object, param: string) => expect((await query({ mode: 'shared', query: 'x', ...body })).body.error).toMatchObject({ code: 'invalid_field', param });
      await field({ mode: 'global' }, 'mode');
      await field({ query: '' }, 'query');
      await field({ query: 'x'.repeat(8001) }, 'query');
      await field({ query: 5 }, 'query');
      await field({ top_k: 0 }, 'top_k');
      await field({ top_k: 51 }, 'top_k');
      await field({ top_k: 2.5 }, 'top_k');
      await field({ retrieval: 'hybrid' }, 'retrieval');
      await field({ rerank_profile: 'fake' }, 'rerank_profile');
      await field({ retrieval: 'vector_rerank' }, 'rerank_profile');
      await field({ retrieval: 'vector_rerank', rerank_profile: 'nobody' }, 'rerank_profile');
      expect((await query({ mode: 'shared', query: 'x', namespace: 'y' })).body.error).toMatchObject({ code: 'unsupported_field', param: 'namespace' });
      expect((await query({ mode: 'shared', query: '🐱'.repeat(8000) })).status).toBe(200);
    });
  });

  describe('rerank', () => {
    const rerankQuery = () => query({ mode: 'shared', query: 'filter corpus passage number 7', top_k: 3, retrieval: 'vector_rerank', rerank_profile: 'fake' });

    it('reranks top_k × 4 candidates and answers the reranker\'s order and relevance', async () => {
      reranker.mode = 'answer';
      reranker.requests.length = 0;
      const q = await rerankQuery();
      expect(q.status).toBe(200);
      expect(q.body.retrieval).toEqual({ mode: 'vector_rerank', reranked: true, profile: 'fake', outcome: 'reranked' });
      expect(reranker.requests[0].body).toMatchObject({ model: 'rr', query: 'filter corpus passage number 7', top_n: 3 });
      expect((reranker.requests[0].body.documents as string[]).length).toBe(12);
      expect(q.body.matches).toHaveLength(3);
      const scores = q.body.matches.map((m: any) => m.score);
      expect([...scores].sort((a, b) => b - a)).toEqual(scores);
    });

    it('a failing or slow reranker answers 200 in vector order, saying why', async () => {
      reranker.mode = 'fail';
      const failed = await rerankQuery();
      expect([failed.status, failed.body.retrieval]).toEqual([200, { mode: 'vector_rerank', reranked: false, profile: 'fake', outcome: 'rerank_failed' }]);
      expect(failed.body.matches).toHaveLength(3);
      reranker.mode = 'slow';
      reranker.slowMs = 2_000;
      const slow = await rerankQuery();
      expect([slow.status, slow.body.retrieval.outcome, slow.body.matches.length]).toEqual([200, 'rerank_timeout', 3]);
      reranker.mode = 'answer';
    });
  });

  it('records every call, the embedded tokens and each rerank call in the activity log', async () => {
    const from = Date.now();
    reranker.mode = 'answer';
    await ingest({ scope: 'shared', documents: [{ id: 'metered', text: 'metered passage' }] });
    await query({ mode: 'shared', query: 'metered passage', top_k: 1, retrieval: 'vector_rerank', rerank_profile: 'fake' });
    await listDocuments('shared');
    const items = async () => {
      const res = await fetch(`${p.urls.data}/v1/activity?from=${from}&limit=500`, { headers: bearer(key) });
      return ((await res.json()) as { items: any[] }).items;
    };
    let seen: any[] = [];
    await waitFor(
      'the calls in the activity log',
      async () => (seen = await items()).filter((i) => i.kind === 'api.call' && String(i.route).startsWith('/v1/vector/')).length >= 3 && seen.some((i) => i.kind === 'ai.rerank'),
      10_000,
      100,
    );
    expect(seen.filter((i) => i.kind === 'api.call').map((i) => i.route)).toEqual(expect.arrayContaining(['/v1/vector/ingest', '/v1/vector/query', '/v1/vector/documents']));
    const usage = seen.filter((i) => i.kind === 'ai.usage' && i.route === 'emb');
    expect(usage.length).toBeGreaterThanOrEqual(2);
    expect(usage.every((u) => u.usage.prompt_tokens > 0 && u.status === 200)).toBe(true);
    expect(seen.filter((i) => i.kind === 'ai.rerank')).toEqual([expect.objectContaining({ route: 'fake', status: 200 })]);
  });

  it('replays a query or an ingest by its X-Operation-Id', async () => {
    const id = op();
    const first = await ingest({ scope: 'shared', documents: [{ id: 'replayed', text: 'replay me' }] }, key, id);
    const again = await ingest({ scope: 'shared', documents: [{ id: 'other', text: 'other' }] }, key, id);
    expect(again.body).toEqual(first.body);
    expect(again.headers['x-idempotent-replay']).toBe('true');
    expect(ids(await query({ mode: 'shared', query: 'other', top_k: 50 }))).not.toContain('other');
    const chatId = op();
    await postWithOperation(p.urls.ai, key, '/v1/embeddings', chatId, { input: 'x' });
    expect((await query({ mode: 'shared', query: 'x' }, key, chatId)).body.error.code).toBe('operation_id_reused');
  });

  describe('the embedding upstream', () => {
    it('its failure is 502, its silence 504; its changed dimensions 502 saying to re-create', async () => {
      embedder.behavior.status = 500;
      expect((await ingest({ scope: 'shared', documents: [{ id: 'u', text: 'u' }] })).body.error.code).toBe('upstream_error');
      embedder.behavior.status = 200;
      embedder.behavior.stallMs = 1_500;
      expect((await query({ mode: 'shared', query: 'u' })).body.error.code).toBe('timeout_error');
      embedder.behavior.stallMs = 0;
      embedder.behavior.dimensions = 16;
      const changed = await ingest({ scope: 'shared', documents: [{ id: 'u', text: 'u' }] });
      expect([changed.status, changed.body.error.code]).toEqual([502, 'upstream_error']);
      expect(changed.body.error.message).toMatch(/re-create the vector database/);
      expect((await query({ mode: 'shared', query: 'u' })).body.error.code).toBe('upstream_error');
      embedder.behavior.dimensions = 32;
    });

    it("the organization's and the key's limits apply (429)", async () => {
      const { id, key: limited } = await tenants().createSecretKey(org);
      await new AiKeyLimits(p.engine.kv, () => p.engine.clock.now()).set(id, { rpm: 1 });
      expect((await query({ mode: 'shared', query: 'cats' }, limited)).status).toBe(200);
      const second = await query({ mode: 'shared', query: 'cats' }, limited);
      expect([second.status, second.body.error.code]).toEqual([429, 'rate_limited']);
    });

    it('a stamped route keeps its upstream model unless forced', async () => {
      const stamped = (await routes().list(org)).find((r) => r.id === 'emb')!;
      const input = { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, timeout_ms: 1_000, default: true };
      await expect(routes().set(org, { ...input, upstream_model: 'another-model' })).rejects.toThrow(ModelRouteError);
      await expect(routes().set(org, { ...input, upstream_model: 'fake-embed', price_in_per_mtok: 1 })).resolves.toMatchObject({ upstream_model: 'fake-embed' });
      await routes().set(org, { ...input, upstream_model: 'another-model' }, { force: true });
      await routes().set(org, { ...input, upstream_model: stamped.upstream_model! }, { force: true });
    });

    it('a stamped route that is no embeddings route any more is 503: nothing is embedded with another model', async () => {
      const input = { id: 'emb', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 1_000 };
      await routes().set(org, { ...input, endpoint: '/v1/chat/completions' }, { force: true });
      try {
        await waitFor('the route change', async () => (await query({ mode: 'shared', query: 'cats' })).status === 503, 5_000);
        const r = await ingest({ scope: 'shared', documents: [{ id: 'x', text: 'x' }] });
        expect([r.status, r.body.error.code]).toEqual([503, 'service_unavailable']);
        expect(r.body.error.message).toMatch(/emb/);
      } finally {
        await routes().set(org, { ...input, endpoint: '/v1/embeddings', default: true }, { force: true });
      }
      await waitFor('the route back', async () => (await query({ mode: 'shared', query: 'cats' })).status === 200, 5_000);
    });
  });

  describe('who may call', () => {
    it('an application key needs the knowledge capability and works in its own workspace', async () => {
      const ws2 = await tenants().createWorkspace(org, 'second');
      const without = await tenants().createApplication(p.credentials.workspace_id, 'no-knowledge', ['ai.chat']);
      const { key: noCap } = await tenants().createSecretKey(org, without.id);
      const q = await query({ mode: 'shared', query: 'cats' }, noCap);
      expect([q.status, q.body.error.code]).toEqual([403, 'capability_not_enabled']);
      const app = await tenants().createApplication(ws2.id, 'other-ws', ['knowledge']);
      const { key: other } = await tenants().createSecretKey(org, app.id);
      expect((await query({ mode: 'shared', query: 'cats' }, other)).body.error.code).toBe('vector_database_not_created');
      await createVectorDatabase(p.engine, ws2.id, 'emb');
      expect((await query({ mode: 'shared', query: 'cats purr and sleep all day' }, other)).body.matches).toEqual([]);
      expect((await ingest({ scope: 'shared', documents: [{ id: 'ws2', text: 'second workspace only' }] }, other)).body.ingested).toBe(1);
      expect(ids(await query({ mode: 'shared', query: 'second workspace only', top_k: 50 }))).not.toContain('ws2');
      // The organization's default workspace moves the organization-wide keys with it.
      await tenants().setDefaultWorkspace(org, ws2.id);
      expect(ids(await query({ mode: 'shared', query: 'second workspace only', top_k: 1 }))).toEqual(['ws2']);
      await tenants().setDefaultWorkspace(org, p.credentials.workspace_id);
    });

    it('the organization switch answers 403 vector_database_disabled and keeps the data', async () => {
      const settings = new AiOrgSettings(p.engine.kv, () => p.engine.clock.now());
      await settings.setFeatures(org, { disable: ['vector'] });
      try {
        await waitFor('the switch', async () => (await query({ mode: 'shared', query: 'cats' })).status === 403, 5_000);
        expect((await ingest({ scope: 'shared', documents: [{ id: 'x', text: 'x' }] })).body.error.code).toBe('vector_database_disabled');
        expect((await listDocuments('shared')).body.error.code).toBe('vector_database_disabled');
      } finally {
        await settings.setFeatures(org, { enable: ['vector'] });
      }
      await waitFor('the switch back', async () => (await query({ mode: 'shared', query: 'cats purr and sleep all day', top_k: 1 })).body.matches?.[0]?.id === 'cats', 5_000);
    });
  });
});

describe('deleting a database', () => {
  it('is 409 vector_database_deleting at once, then gone, and can be created again empty', async () => {
    const ws = await tenants().createWorkspace(org, 'short-lived');
    const app = await tenants().createApplication(ws.id, 'a', ['knowledge']);
    const { key: k } = await tenants().createSecretKey(org, app.id);
    await createVectorDatabase(p.engine, ws.id, 'emb');
    expect((await ingest({ scope: 'shared', documents: [{ id: 'old', text: 'old passage', document_id: 'd' }] }, k)).body.ingested).toBe(1);
    expect((await readDatabase(p.engine, ws.id))!.passages).toBe(1);
    await deleteVectorDatabase(p.engine, ws.id);
    expect((await query({ mode: 'shared', query: 'old passage' }, k)).body.error.code).toBe('vector_database_deleting');
    await waitFor('the removal job', async () => (await readDatabase(p.engine, ws.id)) === undefined, 20_000);
    expect((await query({ mode: 'shared', query: 'old passage' }, k)).body.error.code).toBe('vector_database_not_created');
    await createVectorDatabase(p.engine, ws.id, 'emb');
    expect((await query({ mode: 'shared', query: 'old passage' }, k)).body.matches).toEqual([]);
    expect((await request('GET', '/v1/vector/documents?scope=shared', k)).body.data).toEqual([]);
  });
});
