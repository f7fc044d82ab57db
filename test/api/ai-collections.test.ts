/**
 * Knowledge collections through the local server with a real HTTP client (spec 2, 4.9; docs/ai/collections.md):
 * create (each mode, the vector database a `cloud` one needs, replay by operation id), list with sealed
 * cursors, get, delete; every refusal (bad body, unknown field, unknown, malformed and foreign ids,
 * capability, workspace, the organization's switch); expiry (410, then the sweep) on a clock the test
 * moves and with COLLECTION_RETENTION_S; the curl walk-through of the docs.
 */
import { randomUUID } from 'node:crypto';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { postWithOperation } from '../helpers/ai-calls.js';
import { docBlocks } from '../helpers/doc-blocks.js';
import { waitFor } from '../helpers/wait.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import type { Clock } from '../../lambdas/engine/ports.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { createVectorDatabase, deleteVectorDatabase } from '../../lambdas/vector/databases.js';
import { collectionKey, collectionSweepKey } from '../../lambdas/knowledge/collection-keys.js';
import { countsWrite, type ItemState } from '../../lambdas/knowledge/collections.js';
import { TransactionCanceledError } from '../../lambdas/engine/errors.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { ERROR_STATUS } from '../../lambdas/shared/errors.js';

const DAY_MS = 24 * 3600 * 1000;
/** Real time plus what the test adds: the server's sleeps and leases still run. */
let offsetMs = 0;
const clock: Clock = { now: () => systemClock.now() + offsetMs, sleep: systemClock.sleep };

let p: TestPlatform;
let embedder: FakeEmbedder;
let org: string;
let key: string;
const tenants = () => new Tenants(p.engine.kv, () => p.engine.clock.now());

const op = () => `op-${randomUUID()}`;
const create = (body: object, k = key, id = op()) => postWithOperation(p.urls.ai, k, '/v1/collections', id, body);

async function request(method: string, path: string, k = key, headers: Record<string, string> = {}) {
  const res = await fetch(`${p.urls.ai}${path}`, { method, headers: { ...bearer(k), ...headers } });
  return { status: res.status, headers: res.headers, body: (await res.json().catch(() => undefined)) as any };
}
const get = (id: string, k = key) => request('GET', `/v1/collections/${id}`, k);
const list = (query = '', k = key) => request('GET', `/v1/collections${query}`, k);
const remove = (id: string, k = key, opId = op()) => request('DELETE', `/v1/collections/${id}`, k, { 'x-operation-id': opId });
const codeOf = (a: { status: number; body: any }) => [a.status, a.body?.error?.code];

/** A key of a new workspace's application (with `knowledge` unless told otherwise). */
async function workspaceKey(name: string, capabilities: string[] = ['knowledge']) {
  const ws = await tenants().createWorkspace(org, name);
  const app = await tenants().createApplication(ws.id, name, capabilities as never);
  return { workspace: ws.id, key: (await tenants().createSecretKey(org, app.id)).key };
}

beforeAll(async () => {
  p = await startTestPlatform({ clock });
  embedder = await startFakeEmbedder();
  org = p.credentials.organization_id;
  key = p.credentials.secret_key;
  await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 1_000, default: true });
});

afterAll(async () => {
  await embedder?.close();
  await p?.close();
});

describe('creating a collection', () => {
  it('answers 201 with every field of spec 2, and replays the same collection for the same operation id', async () => {
    const id = op();
    const a = await create({ mode: 'download', name: 'Handbooks' }, key, id);
    expect(a.status).toBe(201);
    expect(a.headers['x-operation-id']).toBe(id);
    expect(a.body).toEqual({
      id: expect.stringMatching(/^col_[0-9a-f]{32}$/),
      object: 'collection',
      name: 'Handbooks',
      mode: 'download',
      retention: 'standard_30d',
      status: 'empty',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.000Z$/),
      expires_at: expect.any(String),
      counts: { total: 0, queued: 0, processing: 0, done: 0, failed: 0 },
      items: [],
    });
    expect(Date.parse(a.body.expires_at) - Date.parse(a.body.created_at)).toBe(30 * DAY_MS);
    const again = await create({ mode: 'download', name: 'Handbooks' }, key, id);
    expect([again.status, again.headers['x-idempotent-replay'], again.body]).toEqual([201, 'true', a.body]);
    expect((await get(a.body.id)).body).toEqual(a.body);
  });

  it('takes local_vectors without a vector database, name optional (null)', async () => {
    const a = await create({ mode: 'local_vectors' });
    expect([a.status, a.body.mode, a.body.name]).toEqual([201, 'local_vectors', null]);
  });

  it('a cloud collection needs the workspace vector database: 409 vector_database_not_created, 403 vector_database_disabled, 409 vector_database_deleting', async () => {
    const { workspace, key: k } = await workspaceKey('cloudy');
    expect(codeOf(await create({ mode: 'cloud' }, k))).toEqual([409, 'vector_database_not_created']);
    // The other modes need none.
    expect((await create({ mode: 'download' }, k)).status).toBe(201);
    await createVectorDatabase(p.engine, workspace, 'emb');
    const made = await create({ mode: 'cloud', name: 'docs' }, k);
    expect([made.status, made.body.mode, made.body.status]).toEqual([201, 'cloud', 'empty']);

    const settings = new AiOrgSettings(p.engine.kv, () => p.engine.clock.now());
    await settings.setFeatures(org, { disable: ['vector'] });
    try {
      await waitFor('the vector switch', async () => (await create({ mode: 'cloud' }, k)).status === 403, 5_000);
      expect(codeOf(await create({ mode: 'cloud' }, k))).toEqual([403, 'vector_database_disabled']);
      expect((await create({ mode: 'local_vectors' }, k)).status).toBe(201);
    } finally {
      await settings.setFeatures(org, { enable: ['vector'] });
    }
    await deleteVectorDatabase(p.engine, workspace);
    expect(codeOf(await create({ mode: 'cloud' }, k))).toEqual([409, 'vector_database_deleting']);
    // The collection made before stays readable.
    expect((await get(made.body.id, k)).body.mode).toBe('cloud');
  });

  it('refuses unknown fields (400 unsupported_field) and bad values (400 invalid_body naming the field)', async () => {
    const unknown = await create({ mode: 'cloud', retention: 'forever' });
    expect([...codeOf(unknown), unknown.body.error.param]).toEqual([400, 'unsupported_field', 'retention']);
    const bad: [object, string][] = [
      [{}, 'mode'],
      [{ mode: 'hybrid' }, 'mode'],
      [{ mode: 7 }, 'mode'],
      [{ mode: 'download', name: '' }, 'name'],
      [{ mode: 'download', name: 'x'.repeat(64) }, 'name'],
      [{ mode: 'download', name: 'a\nb' }, 'name'],
      [{ mode: 'download', name: null }, 'name'],
    ];
    for (const [body, param] of bad) {
      const r = await create(body);
      expect([JSON.stringify(body), r.status, r.body.error.code, r.body.error.param]).toEqual([JSON.stringify(body), 400, 'invalid_body', param]);
    }
    expect((await create({ mode: 'download', name: 'x'.repeat(63) })).status).toBe(201);
  });

  it('needs an X-Operation-Id, as every AI write', async () => {
    const res = await fetch(`${p.urls.ai}/v1/collections`, { method: 'POST', headers: { ...bearer(key), 'content-type': 'application/json' }, body: JSON.stringify({ mode: 'download' }) });
    expect([res.status, ((await res.json()) as any).error.code]).toEqual([400, 'missing_operation_id']);
  });
});

describe('listing', () => {
  it('pages newest first with sealed cursors; limit 1..100; unknown parameters and foreign cursors refused', async () => {
    const { key: k } = await workspaceKey('lister');
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await create({ mode: 'download', name: `c${i}` }, k)).body.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page: any = await list(`?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, k);
      expect(page.status).toBe(200);
      expect(page.body.object).toBe('list');
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.data.map((c: any) => c.id));
      cursor = page.body.next_cursor;
      pages++;
    } while (cursor);
    expect(seen).toEqual([...made].reverse());
    expect(pages).toBeGreaterThanOrEqual(3);
    expect((await list('', k)).body.data[0]).toMatchObject({ id: made[4], name: 'c4', status: 'empty', items: [] });

    for (const q of ['?limit=0', '?limit=101', '?limit=x', '?limit=1.5']) expect([q, ...codeOf(await list(q, k))]).toEqual([q, 400, 'invalid_field']);
    expect(codeOf(await list('?order=asc', k))).toEqual([400, 'unsupported_field']);
    expect(codeOf(await list('?cursor=nonsense', k))).toEqual([400, 'invalid_cursor']);
    // A cursor of this workspace's listing is no cursor of another's.
    const first = await list('?limit=1', k);
    expect(codeOf(await list(`?cursor=${encodeURIComponent(first.body.next_cursor)}`))).toEqual([400, 'invalid_cursor']);
  });
});

describe('who sees a collection', () => {
  let id: string;
  beforeAll(async () => {
    id = (await create({ mode: 'download' })).body.id;
  });

  it('unknown and malformed ids: 404 collection_not_found on get and delete', async () => {
    for (const bad of ['col_' + '0'.repeat(32), 'col_' + 'A'.repeat(32), 'col_123', 'nothing', id.toUpperCase()]) {
      expect([bad, ...codeOf(await get(bad))]).toEqual([bad, 404, 'collection_not_found']);
      expect([bad, ...codeOf(await remove(bad))]).toEqual([bad, 404, 'collection_not_found']);
    }
  });

  it("another organization's key: 404", async () => {
    const other = await tenants().createOrganization('other org');
    await tenants().createWorkspace(other.id, 'w');
    const { key: k } = await tenants().createSecretKey(other.id);
    expect(codeOf(await get(id, k))).toEqual([404, 'collection_not_found']);
    expect(codeOf(await remove(id, k))).toEqual([404, 'collection_not_found']);
    expect((await list('', k)).body.data).toEqual([]);
  });

  it("an application key needs knowledge (403 capability_not_enabled) and sees only its workspace's collections", async () => {
    const without = await tenants().createApplication(p.credentials.workspace_id, 'no-knowledge', ['ai.chat']);
    const { key: noCap } = await tenants().createSecretKey(org, without.id);
    expect(codeOf(await get(id, noCap))).toEqual([403, 'capability_not_enabled']);
    expect(codeOf(await list('', noCap))).toEqual([403, 'capability_not_enabled']);
    expect(codeOf(await create({ mode: 'download' }, noCap))).toEqual([403, 'capability_not_enabled']);
    expect(codeOf(await remove(id, noCap))).toEqual([403, 'capability_not_enabled']);

    const same = await tenants().createApplication(p.credentials.workspace_id, 'same-workspace', ['knowledge']);
    const { key: sameKey } = await tenants().createSecretKey(org, same.id);
    expect((await get(id, sameKey)).body).toMatchObject({ id, status: 'empty' });

    const { key: elsewhere } = await workspaceKey('elsewhere');
    expect(codeOf(await get(id, elsewhere))).toEqual([404, 'collection_not_found']);
    expect(codeOf(await remove(id, elsewhere))).toEqual([404, 'collection_not_found']);
    expect((await list('', elsewhere)).body.data.map((c: any) => c.id)).not.toContain(id);
  });
});

describe('deleting', () => {
  it('answers {id, deleted: true}, replays it for the same operation id, and the collection is gone', async () => {
    const id = (await create({ mode: 'download' })).body.id;
    const opId = op();
    const d = await remove(id, key, opId);
    expect([d.status, d.body]).toEqual([200, { id, deleted: true }]);
    const again = await remove(id, key, opId);
    expect([again.status, again.headers.get('x-idempotent-replay'), again.body]).toEqual([200, 'true', { id, deleted: true }]);
    expect(codeOf(await get(id))).toEqual([404, 'collection_not_found']);
    expect(codeOf(await remove(id))).toEqual([404, 'collection_not_found']);
    expect((await list('?limit=100')).body.data.map((c: any) => c.id)).not.toContain(id);
    // The id of a create is not one of a delete.
    const createId = op();
    const other = (await create({ mode: 'download' }, key, createId)).body.id;
    expect(codeOf(await remove(other, key, createId))).toEqual([409, 'operation_id_reused']);
  });
});

describe('the organization switch', () => {
  it('`org features --disable collections`: 403 collections_disabled on every collection route; the collections are kept', async () => {
    const id = (await create({ mode: 'download' })).body.id;
    const settings = new AiOrgSettings(p.engine.kv, () => p.engine.clock.now());
    await settings.setFeatures(org, { disable: ['collections'] });
    try {
      await waitFor('the switch', async () => (await get(id)).status === 403, 5_000);
      expect(codeOf(await get(id))).toEqual([403, 'collections_disabled']);
      expect(codeOf(await list())).toEqual([403, 'collections_disabled']);
      expect(codeOf(await create({ mode: 'download' }))).toEqual([403, 'collections_disabled']);
      expect(codeOf(await remove(id))).toEqual([403, 'collections_disabled']);
      // Before the body is looked at, and for ids that do not exist.
      expect(codeOf(await create({ mode: 'nope' }))).toEqual([403, 'collections_disabled']);
      expect(codeOf(await get('nothing'))).toEqual([403, 'collections_disabled']);
    } finally {
      await settings.setFeatures(org, { enable: ['collections'] });
    }
    await waitFor('the switch back', async () => (await get(id)).status === 200, 5_000);
  });
});

describe('expiry', () => {
  it('past expires_at: 410 collection_expired on get and delete, left out of the list, and the sweep removes it', async () => {
    const { workspace, key: k } = await workspaceKey('expiring');
    const a = (await create({ mode: 'local_vectors' }, k)).body;
    const endsAt = Math.floor(Date.parse(a.expires_at) / 1000);
    offsetMs += 30 * DAY_MS + 1000;
    try {
      expect(codeOf(await get(a.id, k))).toEqual([410, 'collection_expired']);
      expect(codeOf(await remove(a.id, k))).toEqual([410, 'collection_expired']);
      expect((await list('', k)).body.data).toEqual([]);
      expect(await p.engine.kv.get(collectionSweepKey(endsAt, org, workspace, a.id))).toBeDefined();
      // The workers' timer sweeps what expired (every collection of the tests before has ended too).
      const entry = collectionSweepKey(endsAt, org, workspace, a.id);
      await waitFor('the sweep', async () => (await p.engine.kv.get(entry)) === undefined, 20_000);
      expect(await p.engine.kv.get(collectionKey(org, workspace, a.id))).toBeUndefined();
      // Still 410 after the sweep, until its end record lapses; then 404.
      expect(codeOf(await get(a.id, k))).toEqual([410, 'collection_expired']);
      offsetMs += 30 * DAY_MS;
      expect(codeOf(await get(a.id, k))).toEqual([404, 'collection_not_found']);
    } finally {
      offsetMs -= 60 * DAY_MS + 1000;
    }
  });

  it('COLLECTION_RETENTION_S shortens the retention', async () => {
    useSettings({ collectionRetentionSeconds: 60 });
    try {
      const a = (await create({ mode: 'download' })).body;
      expect(Date.parse(a.expires_at) - Date.parse(a.created_at)).toBe(60_000);
      expect(a.retention).toBe('standard_30d');
      offsetMs += 61_000;
      expect(codeOf(await get(a.id))).toEqual([410, 'collection_expired']);
    } finally {
      useSettings();
    }
  });
});

describe('COLLECTION_RETENTION_S from outside: `npm start` with a two-second retention', () => {
  const used = useLocalProcess('collections-retention-', { COLLECTION_RETENTION_S: '2', LOCAL_WORKERS: '2' });

  it('makes collections that end two seconds after creation: 200, then 410 collection_expired', async () => {
    const a = await postWithOperation(used.local.urls.ai, used.key, '/v1/collections', op(), { mode: 'download' });
    expect([a.status, Date.parse(a.body.expires_at) - Date.parse(a.body.created_at)]).toEqual([201, 2000]);
    const at = (path: string) => fetch(`${used.local.urls.ai}${path}`, { headers: bearer(used.key) }).then(async (r) => [r.status, ((await r.json()) as any).error?.code]);
    expect(await at(`/v1/collections/${a.body.id}`)).toEqual([200, undefined]);
    await new Promise((resolve) => setTimeout(resolve, Date.parse(a.body.expires_at) - Date.now() + 50));
    for (let i = 0; i < 4; i++) expect(await at(`/v1/collections/${a.body.id}`)).toEqual([410, 'collection_expired']);
  });
});

describe('counts and status as items will move them', () => {
  it('each move keeps total = queued + processing + done + failed, and the status follows: empty, indexing, ready, partial, failed', async () => {
    const { workspace, key: k } = await workspaceKey('counting');
    const id = (await create({ mode: 'download' }, k)).body.id;
    const move = (from: ItemState | null, to: ItemState | null) => p.engine.kv.transact([countsWrite(org, workspace, id, from, to)]);
    const seen = async () => {
      const c = (await get(id, k)).body;
      expect(c.counts.total).toBe(c.counts.queued + c.counts.processing + c.counts.done + c.counts.failed);
      return [c.status, c.counts];
    };
    await move(null, 'queued');
    await move(null, 'queued');
    expect(await seen()).toEqual(['indexing', { total: 2, queued: 2, processing: 0, done: 0, failed: 0 }]);
    await move('queued', 'processing');
    await move('processing', 'done');
    expect((await seen())[0]).toBe('indexing');
    await move('queued', 'processing');
    await move('processing', 'failed');
    expect(await seen()).toEqual(['partial', { total: 2, queued: 0, processing: 0, done: 1, failed: 1 }]);
    await move('done', null);
    expect(await seen()).toEqual(['failed', { total: 1, queued: 0, processing: 0, done: 0, failed: 1 }]);
    await move(null, 'queued');
    await move('queued', 'done');
    await move('failed', null);
    expect(await seen()).toEqual(['ready', { total: 1, queued: 0, processing: 0, done: 1, failed: 0 }]);
    await move('done', null);
    expect(await seen()).toEqual(['empty', { total: 0, queued: 0, processing: 0, done: 0, failed: 0 }]);
    // Twenty moves at once, as concurrent consumers make them: none lost.
    await Promise.all(Array.from({ length: 20 }, () => move(null, 'queued')));
    expect((await seen())[1]).toMatchObject({ total: 20, queued: 20 });
    // A deleted collection is not brought back by a late move.
    expect((await remove(id, k)).status).toBe(200);
    await expect(move('queued', 'done')).rejects.toBeInstanceOf(TransactionCanceledError);
    expect(await p.engine.kv.get(collectionKey(org, workspace, id))).toBeUndefined();
  });

  it('two deletes at once: one 200, the other 404', async () => {
    const id = (await create({ mode: 'download' })).body.id;
    const answers = await Promise.all([remove(id), remove(id)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 404]);
  });
});

describe('codes of later collection routes', () => {
  it('mode_not_supported is 409 (spec 4.10: the collection exists, its mode does not offer the call)', () => {
    expect(ERROR_STATUS.mode_not_supported).toBe(409);
  });
});

describe('the walk-through of docs/ai/collections.md', () => {
  it('runs as written with curl: create, get, list, an item processed, its vectors, a query, delete', async () => {
    const script = docBlocks('docs/ai/collections.md', ['sh'])
      .join('\n')
      .split('\n')
      .filter((line) => !/^(AI_URL|KEY)=/.test(line))
      .join('\n');
    const dir = mkdtempSync(join(tmpdir(), 'collections-doc-'));
    try {
      const { stdout } = await promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { cwd: dir, env: { ...process.env, AI_URL: p.urls.ai, KEY: key }, maxBuffer: 1024 * 1024 });
      const answers = stdout.split(/(?<=})\n?(?=\{)/).map((text) => JSON.parse(text));
      expect(answers.map((a) => a.status ?? a.object ?? a.deleted ?? (a.indexed === true ? 'indexed' : undefined) ?? a.indexing)).toEqual([
        'empty',
        'empty',
        'list',
        'queued',
        'done',
        'indexed',
        { indexed: 1, total: 1, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 },
        true,
      ]);
      expect(answers[6].matches[0].citation.locator).toBe('heading=Install > Linux');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
