/**
 * Atomic batches (spec 4.16 and section 3 "Batch") through the local server with a real HTTP client:
 * results in order, all-or-nothing with the first failure as the answer, the size limits, the body
 * checks, rules for non-server credentials, and relations to records created earlier in the batch.
 *
 * Not covered: `cross_shard_batch` (400). A database lives in exactly one shard on this platform, so
 * every batch (which names one database) is within one shard and the platform can never give that
 * answer; a test could only fake it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { callApi, expectError, type Res } from '../helpers/data-api.js';

let p: TestPlatform;
let server: Record<string, string>;
const DB = 'batchdb';
const ORIGIN = 'https://batch.example';

const call = (cred: Record<string, string>, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  callApi(p.urls.data, cred, method, path, body, headers);

const batch = (body: unknown, cred = server, db = DB) => call(cred, 'POST', `/v1/databases/${db}/batch`, body);
const recs = (name: string, db = DB) => `/v1/databases/${db}/collections/${name}/records`;
const get = (name: string, id: string, cred = server, db = DB) => call(cred, 'GET', `${recs(name, db)}/${id}`);
const listIds = async (name: string, cred = server, db = DB) => ((await call(cred, 'GET', `${recs(name, db)}?limit=100`)).body.records as any[]).map((r) => r.id);

async function putCollection(name: string, body: unknown, cred = server, db = DB) {
  const r = await call(cred, 'PUT', `/v1/databases/${db}/collections/${name}`, body);
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
}

async function create(name: string, body: Record<string, unknown>, cred = server, db = DB): Promise<any> {
  const r = await call(cred, 'POST', recs(name, db), body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

beforeAll(async () => {
  p = await startTestPlatform();
  server = bearer(p.credentials.secret_key);
  expect((await call(server, 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
  await putCollection('accounts', {
    fields: [
      { name: 'email', type: 'text', unique: true },
      { name: 'name', type: 'text' },
      { name: 'balance', type: 'integer', indexed: true },
    ],
  });
  await putCollection('orders', { fields: [{ name: 'account', type: 'relation', target: 'accounts', indexed: true }, { name: 'total', type: 'number' }] });
  await putCollection('pairs', { fields: [{ name: 'a', type: 'text', unique: true }, { name: 'b', type: 'text', unique: true }] });
  await putCollection('plain', { mode: 'free' });
});
afterAll(async () => p?.close());

describe('results', () => {
  it('answers 200 with the results in order: the Record for create and update, {id, deleted: true} for delete', async () => {
    const keep = await create('accounts', { id: 'keep', email: 'keep@x', name: 'Keep', balance: 1 });
    const gone = await create('accounts', { id: 'gone', email: 'gone@x' });
    const r = await batch({
      ops: [
        { op: 'create', collection: 'accounts', id: 'new-1', data: { email: 'new1@x', balance: 5 } },
        { op: 'create', collection: 'accounts', data: { email: 'new2@x' } },
        { op: 'update', collection: 'accounts', id: 'keep', version: 1, data: { balance: 2, name: null } },
        { op: 'delete', collection: 'accounts', id: 'gone' },
        { op: 'create', collection: 'orders', data: { account: 'keep', total: 9.5 } },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    const [created, generated, updated, deleted, order] = r.body.results;
    expect(r.body.results).toHaveLength(5);
    expect(created).toEqual({ id: 'new-1', version: 1, created_at: expect.stringMatching(ISO_MS), updated_at: created.created_at, email: 'new1@x', balance: 5 });
    expect(generated).toMatchObject({ id: expect.stringMatching(/^rec_/), version: 1, email: 'new2@x' });
    expect(updated).toEqual({ id: 'keep', version: 2, created_at: keep.created_at, updated_at: expect.stringMatching(ISO_MS), email: 'keep@x', balance: 2 });
    expect(deleted).toEqual({ id: gone.id, deleted: true });
    expect(order).toMatchObject({ account: 'keep', total: 9.5, version: 1 });

    expect((await get('accounts', 'new-1')).body).toEqual(created);
    expect((await get('accounts', generated.id)).body).toEqual(generated);
    expect((await get('accounts', 'keep')).body).toEqual(updated);
    expectError(await get('accounts', 'gone'), 404, 'record_not_found');
    expect((await get('orders', order.id)).body).toEqual(order);
  });

  it('accepts a relation to a record created earlier in the same batch', async () => {
    const r = await batch({
      ops: [
        { op: 'create', collection: 'accounts', id: 'fresh-acc', data: { email: 'fresh@x' } },
        { op: 'create', collection: 'orders', id: 'fresh-order', data: { account: 'fresh-acc', total: 1 } },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect((await get('orders', 'fresh-order')).body.account).toBe('fresh-acc');
    // A relation to a record the same batch deletes would point at nothing: refused, in either order.
    await create('accounts', { id: 'doomed', email: 'doomed@x' });
    for (const ops of [
      [
        { op: 'delete', collection: 'accounts', id: 'doomed' },
        { op: 'create', collection: 'orders', id: 'dangling', data: { account: 'doomed', total: 1 } },
      ],
      [
        { op: 'create', collection: 'orders', id: 'dangling', data: { account: 'doomed', total: 1 } },
        { op: 'delete', collection: 'accounts', id: 'doomed' },
      ],
    ]) {
      expectError(await batch({ ops }), 400, 'invalid_value');
      expect((await get('accounts', 'doomed')).status).toBe(200);
      expectError(await get('orders', 'dangling'), 404, 'record_not_found');
    }
  });

  it('creates a free collection for a create into a missing collection, like the record route', async () => {
    const r = await batch({ ops: [{ op: 'create', collection: 'made_by_batch', id: 'm1', data: { any: [1] } }] });
    expect(r.status).toBe(200);
    expect((await call(server, 'GET', `/v1/databases/${DB}/collections/made_by_batch`)).body.mode).toBe('free');
    expectError(await batch({ ops: [{ op: 'update', collection: 'never_made', id: 'x', data: {} }] }), 404, 'collection_not_found');
  });
});

describe('all or nothing', () => {
  let base: Record<string, any>;
  beforeAll(async () => {
    await putCollection('atomic', { fields: [{ name: 'email', type: 'text', unique: true }, { name: 'n', type: 'integer' }] });
    base = {
      holder: await create('atomic', { id: 'holder', email: 'held@x', n: 1 }),
      edit: await create('atomic', { id: 'edit', email: 'edit@x', n: 1 }),
      victim: await create('atomic', { id: 'victim', email: 'victim@x', n: 1 }),
    };
  });

  /** Three ops that would succeed: a create, an update and a delete. */
  const goodOps = () => [
    { op: 'create', collection: 'atomic', id: 'would-be', data: { email: 'would-be@x', n: 1 } },
    { op: 'update', collection: 'atomic', id: 'edit', version: 1, data: { n: 2, email: 'edited@x' } },
    { op: 'delete', collection: 'atomic', id: 'victim' },
  ];

  async function expectUnchanged() {
    expectError(await get('atomic', 'would-be'), 404, 'record_not_found');
    expect((await get('atomic', 'edit')).body).toEqual(base.edit);
    expect((await get('atomic', 'victim')).body).toEqual(base.victim);
    expect((await get('atomic', 'holder')).body).toEqual(base.holder);
    expect((await listIds('atomic')).sort()).toEqual(['edit', 'holder', 'victim']);
    // The guards of the unapplied ops were not written or removed either.
    expectError(await call(server, 'POST', recs('atomic'), { email: 'edit@x' }), 409, 'unique_violation');
    const probe = await create('atomic', { id: 'probe', email: 'would-be@x' });
    expect((await call(server, 'DELETE', `${recs('atomic')}/${probe.id}`)).status).toBe(204);
  }

  it.each([
    ['unique_violation', 409, { op: 'create', collection: 'atomic', data: { email: 'held@x' } }],
    // Ops apply in order: victim@x, released by the delete above, could be taken; edited@x, claimed by the update, cannot.
    ['unique_violation (update)', 409, { op: 'update', collection: 'atomic', id: 'holder', data: { email: 'edited@x' } }],
    ['already_exists', 409, { op: 'create', collection: 'atomic', id: 'holder', data: { email: 'other@x' } }],
    ['version_conflict (update)', 409, { op: 'update', collection: 'atomic', id: 'holder', version: 7, data: { n: 5 } }],
    ['version_conflict (delete)', 409, { op: 'delete', collection: 'atomic', id: 'holder', version: 2 }],
    ['record_not_found (update)', 404, { op: 'update', collection: 'atomic', id: 'nobody', data: { n: 5 } }],
    ['record_not_found (delete)', 404, { op: 'delete', collection: 'atomic', id: 'nobody' }],
    ['unknown_field', 400, { op: 'create', collection: 'atomic', data: { nope: 1 } }],
    ['invalid_value', 400, { op: 'create', collection: 'atomic', data: { n: 'one' } }],
  ] as const)('a failing last op (%s) leaves the earlier ops unapplied', async (label, status, last) => {
    const r = await batch({ ops: [...goodOps(), last] });
    expectError(r, status, label.split(' ')[0]);
    await expectUnchanged();
  });

  it('answers the first failure when several ops fail', async () => {
    // Both fail only when the transaction runs: the earlier op is the answer.
    expectError(
      await batch({
        ops: [
          ...goodOps(),
          { op: 'create', collection: 'atomic', id: 'holder', data: {} },
          { op: 'create', collection: 'atomic', data: { email: 'held@x' } },
        ],
      }),
      409,
      'already_exists',
    );
    expectError(
      await batch({
        ops: [
          { op: 'create', collection: 'atomic', data: { email: 'held@x' } },
          { op: 'create', collection: 'atomic', id: 'holder', data: {} },
        ],
      }),
      409,
      'unique_violation',
    );
    // The earlier op fails in the transaction, the later one already while it is being prepared.
    expectError(
      await batch({
        ops: [
          ...goodOps(),
          { op: 'create', collection: 'atomic', id: 'holder', data: {} },
          { op: 'update', collection: 'atomic', id: 'nobody', data: { n: 1 } },
        ],
      }),
      409,
      'already_exists',
    );
    expectError(
      await batch({
        ops: [
          { op: 'create', collection: 'atomic', data: { email: 'held@x' } },
          { op: 'update', collection: 'atomic', id: 'edit', version: 9, data: { n: 1 } },
        ],
      }),
      409,
      'unique_violation',
    );
    expectError(
      await batch({
        ops: [
          { op: 'update', collection: 'atomic', id: 'edit', version: 9, data: { n: 1 } },
          { op: 'create', collection: 'atomic', id: 'holder', data: {} },
        ],
      }),
      409,
      'version_conflict',
    );
    await expectUnchanged();
  });

  it('answers 409 unique_violation when two ops of the batch give a unique field the same value', async () => {
    expectError(
      await batch({
        ops: [
          { op: 'create', collection: 'atomic', id: 'twin-1', data: { email: 'twin@x' } },
          { op: 'create', collection: 'atomic', id: 'twin-2', data: { email: 'twin@x' } },
        ],
      }),
      409,
      'unique_violation',
    );
    expectError(await get('atomic', 'twin-1'), 404, 'record_not_found');
  });
});

describe('400 batch_too_large', () => {
  it('refuses 101 operations', async () => {
    const ops = Array.from({ length: 101 }, (_, i) => ({ op: 'create', collection: 'plain', id: `over-${i}`, data: { i } }));
    expectError(await batch({ ops }), 400, 'batch_too_large');
    expect(await listIds('plain')).not.toContain('over-0');
  });

  it('refuses a batch whose storage writes exceed one transaction, storing nothing', async () => {
    // 100 creates with two unique fields each: 100 records + 200 guards, over the 100 writes of one transaction.
    const ops = Array.from({ length: 100 }, (_, i) => ({ op: 'create', collection: 'pairs', id: `pair-${i}`, data: { a: `a${i}`, b: `b${i}` } }));
    expectError(await batch({ ops }), 400, 'batch_too_large');
    expect(await listIds('pairs')).toEqual([]);
    expect((await batch({ ops: ops.slice(0, 30) })).status).toBe(200);
    expect(await listIds('pairs')).toHaveLength(30);
  });

  it('takes 100 plain creates and then 100 deletes in one batch each (the spec maximum)', async () => {
    const ids = Array.from({ length: 100 }, (_, i) => `many-${String(i).padStart(3, '0')}`);
    const made = await batch({ ops: ids.map((id) => ({ op: 'create', collection: 'plain', id, data: { id_copy: id } })) });
    expect(made.status, JSON.stringify(made.body).slice(0, 300)).toBe(200);
    expect(made.body.results.map((r: any) => r.id)).toEqual(ids);
    const removed = await batch({ ops: ids.map((id) => ({ op: 'delete', collection: 'plain', id, version: 1 })) });
    expect(removed.status).toBe(200);
    expect(removed.body.results).toEqual(ids.map((id) => ({ id, deleted: true })));
    expect((await listIds('plain')).filter((id) => id.startsWith('many-'))).toEqual([]);
  });
});

describe('400 invalid_body', () => {
  beforeAll(async () => {
    await create('accounts', { id: 'twice', email: 'twice@x' });
  });
  const create1 = { op: 'create', collection: 'accounts', data: { email: 'ok@x' } };

  it.each([
    ['a body that is not an object', '[]'],
    ['no ops', {}],
    ['empty ops', { ops: [] }],
    ['ops not an array', { ops: create1 }],
    ['an unknown top-level key', { ops: [create1], atomic: true }],
    ['an op that is not an object', { ops: ['create'] }],
    ['an unknown op', { ops: [{ op: 'upsert', collection: 'accounts', data: {} }] }],
    ['a missing op', { ops: [{ collection: 'accounts', data: {} }] }],
    ['a missing collection', { ops: [{ op: 'create', data: { email: 'x' } }] }],
    ['an empty collection', { ops: [{ op: 'create', collection: '', data: {} }] }],
    ['an update without id', { ops: [{ op: 'update', collection: 'accounts', data: { name: 'x' } }] }],
    ['a delete without id', { ops: [{ op: 'delete', collection: 'accounts' }] }],
    ['an unknown key in an op', { ops: [{ ...create1, upsert: true }] }],
    ['a version that is not a positive integer', { ops: [{ op: 'delete', collection: 'accounts', id: 'twice', version: '1' }] }],
    ['version 0', { ops: [{ op: 'delete', collection: 'accounts', id: 'twice', version: 0 }] }],
    ['data that is not an object', { ops: [{ op: 'create', collection: 'accounts', data: ['x'] }] }],
    ['an id that is not a string', { ops: [{ op: 'delete', collection: 'accounts', id: 5 }] }],
    ['two ops on the same record (update, update)', { ops: [{ op: 'update', collection: 'accounts', id: 'twice', data: { name: 'a' } }, { op: 'update', collection: 'accounts', id: 'twice', data: { name: 'b' } }] }],
    ['two ops on the same record (update, delete)', { ops: [{ op: 'update', collection: 'accounts', id: 'twice', data: { name: 'a' } }, { op: 'delete', collection: 'accounts', id: 'twice' }] }],
    ['two creates with the same id', { ops: [{ op: 'create', collection: 'plain', id: 'dup', data: {} }, { op: 'create', collection: 'plain', id: 'dup', data: {} }] }],
  ])('refuses %s', async (_what, body) => {
    expectError(await batch(body), 400, 'invalid_body');
    expect((await get('accounts', 'twice')).body).toMatchObject({ version: 1 });
    expectError(await get('plain', 'dup'), 404, 'record_not_found');
  });
});

describe('credentials', () => {
  const APP_DB = 'batch-app';
  let appServer: Record<string, string>;
  let alice: Record<string, string>;
  let pub: Record<string, string>;

  beforeAll(async () => {
    const t = new Tenants(p.engine.kv, () => Date.now());
    const app = await t.createApplication(p.credentials.workspace_id, 'batch-app', []);
    appServer = bearer((await t.createSecretKey(p.credentials.organization_id, app.id)).key);
    pub = { ...bearer((await new PublishableKeys(p.engine.kv, () => Date.now()).create(app.id, [ORIGIN])).key), origin: ORIGIN };
    const minted = await call(appServer, 'POST', '/v1/end-user-tokens', { user_id: 'alice' });
    alice = bearer(minted.body.token);
    expect((await call(appServer, 'PUT', `/v1/databases/${APP_DB}`)).status).toBe(201);
    await putCollection(
      'posts',
      {
        fields: [{ name: 'owner', type: 'text' }, { name: 'text', type: 'text' }],
        rules: { list: 'public', view: 'public', create: '@request.owner = @auth.id', update: 'owner = @auth.id', delete: null },
      },
      appServer,
      APP_DB,
    );
    await create('posts', { id: 'bobs', owner: 'bob', text: 'b' }, appServer, APP_DB);
    await create('posts', { id: 'alices', owner: 'alice', text: 'a' }, appServer, APP_DB);
  });

  it("checks each op against the collection's rule for it: 403 forbidden, and nothing applied", async () => {
    const own = { op: 'create', collection: 'posts', id: 'alice-2', data: { owner: 'alice', text: 'mine' } };
    for (const bad of [
      { op: 'create', collection: 'posts', data: { owner: 'bob', text: 'forged' } },
      { op: 'update', collection: 'posts', id: 'bobs', data: { text: 'edited' } },
      { op: 'delete', collection: 'posts', id: 'alices' },
      { op: 'delete', collection: 'posts', id: 'no-such-post' },
    ]) {
      expectError(await batch({ ops: [own, bad] }, alice, APP_DB), 403, 'forbidden');
      expectError(await get('posts', 'alice-2', appServer, APP_DB), 404, 'record_not_found');
    }
    expectError(await batch({ ops: [own] }, pub, APP_DB), 403, 'forbidden');
    expect((await get('posts', 'bobs', appServer, APP_DB)).body).toMatchObject({ text: 'b', version: 1 });

    const ok = await batch({ ops: [own, { op: 'update', collection: 'posts', id: 'alices', data: { text: 'a2' } }] }, alice, APP_DB);
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.results.map((r: any) => [r.id, r.version])).toEqual([['alice-2', 1], ['alices', 2]]);
    // A non-server credential does not create collections.
    expectError(await batch({ ops: [{ op: 'create', collection: 'nope', data: {} }] }, alice, APP_DB), 404, 'collection_not_found');
  });

  it('lets a server credential bypass the rules', async () => {
    const r = await batch({ ops: [{ op: 'delete', collection: 'posts', id: 'bobs' }, { op: 'create', collection: 'posts', data: { owner: 'carol' } }] }, appServer, APP_DB);
    expect(r.status).toBe(200);
  });

  it('answers 404 database_not_found for a database that does not exist', async () => {
    expectError(await batch({ ops: [{ op: 'create', collection: 'plain', data: {} }] }, server, 'no-such-db'), 404, 'database_not_found');
    expectError(await batch({ ops: [{ op: 'create', collection: 'plain', data: {} }] }, alice, 'no-such-db'), 404, 'database_not_found');
  });

  it('answers 401 without a credential', async () => {
    const res = await fetch(`${p.urls.data}/v1/databases/${DB}/batch`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"ops":[]}' });
    expect(res.status).toBe(401);
  });
});
