/**
 * Tenant isolation on every Data route (spec 1, 4.12 and section 5 rule 3) through the local server:
 * another organization's key, and an application-bound key of another application of the same
 * organization, never reach a database that is not theirs. They get 404 database_not_found, or
 * their own empty state — never the owner's data — and the owner's data is unchanged afterwards.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { callApi, expectError, type Res } from '../helpers/data-api.js';

let p: TestPlatform;
/** Organization A's organization-wide key (the bootstrapped one). */
let orgA: Record<string, string>;
/** Organization B's organization-wide key. */
let orgB: Record<string, string>;
/** Keys of applications X and Y, both in organization A. */
let appX: Record<string, string>;
let appY: Record<string, string>;
let userX: Record<string, string>;
let pubX: Record<string, string>;
const ORIGIN = 'https://x.example';

const DB = 'accounts'; // organization A's database (organization-owned)
const Y_DB = 'y-private'; // application Y's database
const COLL = 'secrets';

const call = (cred: Record<string, string>, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  callApi(p.urls.data, cred, method, path, body, headers);

/** The body must not carry anything of the owner's records. */
function expectNoLeak(r: Res) {
  const text = JSON.stringify(r.body ?? '');
  for (const secret of ['top-secret', 'hidden@a.example', 'y-only']) expect(text).not.toContain(secret);
}

const collPath = (db: string, c = COLL) => `/v1/databases/${encodeURIComponent(db)}/collections/${c}`;
const recsPath = (db: string, c = COLL) => `${collPath(db, c)}/records`;

/** Every Data route on a database, each with the answer it gives its owner. */
function everyRoute(db: string, recordId: string) {
  return [
    ['GET collection', 'GET', collPath(db), undefined],
    ['PUT collection (change)', 'PUT', collPath(db), { fields: [{ name: 'text', type: 'text' }] }],
    ['PUT collection (new)', 'PUT', collPath(db, 'fresh'), {}],
    ['list records', 'GET', recsPath(db), undefined],
    ['list records filtered', 'GET', `${recsPath(db)}?filter[email]=hidden%40a.example`, undefined],
    ['create record', 'POST', recsPath(db), { text: 'intruder' }],
    ['create record with a taken id', 'POST', recsPath(db), { id: recordId, text: 'intruder' }],
    ['create record in a new collection', 'POST', recsPath(db, 'newcoll'), { a: 1 }],
    ['get record', 'GET', `${recsPath(db)}/${recordId}`, undefined],
    ['patch record', 'PATCH', `${recsPath(db)}/${recordId}`, { text: 'changed' }],
    ['delete record', 'DELETE', `${recsPath(db)}/${recordId}`, undefined],
    ['batch', 'POST', `/v1/databases/${encodeURIComponent(db)}/batch`, { ops: [{ op: 'update', collection: COLL, id: recordId, data: { text: 'changed' } }, { op: 'delete', collection: COLL, id: recordId }] }],
  ] as const;
}

let ownerRecord: any;
let ownerCollection: any;
let yRecord: any;

async function ownerState() {
  return {
    collection: (await call(orgA, 'GET', collPath(DB))).body,
    records: (await call(orgA, 'GET', `${recsPath(DB)}?limit=100`)).body,
    y: (await call(appY, 'GET', `${recsPath(Y_DB)}?limit=100`)).body,
    yCollection: (await call(appY, 'GET', collPath(Y_DB))).body,
    databases: (await call(orgA, 'GET', '/v1/databases')).body,
  };
}
let before: Awaited<ReturnType<typeof ownerState>>;

beforeAll(async () => {
  p = await startTestPlatform();
  orgA = bearer(p.credentials.secret_key);
  const t = new Tenants(p.engine.kv, () => Date.now());
  const b = await t.createOrganization('org-b');
  await t.createWorkspace(b.id, 'b-main');
  orgB = bearer((await t.createSecretKey(b.id)).key);
  const x = await t.createApplication(p.credentials.workspace_id, 'x', []);
  const y = await t.createApplication(p.credentials.workspace_id, 'y', []);
  appX = bearer((await t.createSecretKey(p.credentials.organization_id, x.id)).key);
  appY = bearer((await t.createSecretKey(p.credentials.organization_id, y.id)).key);
  pubX = { ...bearer((await new PublishableKeys(p.engine.kv, () => Date.now()).create(x.id, [ORIGIN])).key), origin: ORIGIN };
  userX = bearer((await call(appX, 'POST', '/v1/end-user-tokens', { user_id: 'x-user' })).body.token);

  // Organization A: a database with a collection whose rules are wide open, and records.
  expect((await call(orgA, 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
  const open = { list: 'public', view: 'public', create: 'public', update: 'public', delete: 'public' };
  ownerCollection = (
    await call(orgA, 'PUT', collPath(DB), {
      fields: [
        { name: 'text', type: 'text', fulltext: true },
        { name: 'email', type: 'text', unique: true, indexed: true },
      ],
      rules: open,
    })
  ).body;
  ownerRecord = (await call(orgA, 'POST', recsPath(DB), { id: 'rec-a1', text: 'top-secret plans', email: 'hidden@a.example' })).body;
  expect(ownerRecord.version).toBe(1);
  for (let i = 0; i < 5; i++) expect((await call(orgA, 'POST', recsPath(DB), { id: `rec-a-more-${i}`, text: `top-secret ${i}` })).status).toBe(201);

  // Application Y (organization A): its own database.
  expect((await call(appY, 'PUT', `/v1/databases/${Y_DB}`)).status).toBe(201);
  expect((await call(appY, 'PUT', collPath(Y_DB), { fields: [{ name: 'text', type: 'text' }, { name: 'email', type: 'text', indexed: true }], rules: open })).status).toBe(201);
  yRecord = (await call(appY, 'POST', recsPath(Y_DB), { id: 'rec-y1', text: 'y-only data' })).body;

  before = await ownerState();
});
afterAll(async () => p?.close());

describe("another organization's key", () => {
  it('does not list the other organization\'s databases', async () => {
    const r = await call(orgB, 'GET', '/v1/databases');
    expect(r.status).toBe(200);
    expect(r.body.databases).toEqual([]);
  });

  it('gets 404 database_not_found on every route of a database it does not have', async () => {
    for (const [what, method, path, body] of everyRoute(DB, ownerRecord.id)) {
      const r = await call(orgB, method, path, body);
      expectError(r, 404, 'database_not_found', what);
      expectNoLeak(r);
    }
  });

  it('ignores headers that name the other organization', async () => {
    const r = await call({ ...orgB, 'x-organization-id': p.credentials.organization_id, 'x-workspace-id': p.credentials.workspace_id }, 'GET', `${recsPath(DB)}/${ownerRecord.id}`);
    expectError(r, 404, 'database_not_found');
  });

  it('creates its OWN database under the same name, and sees only its own empty state there', async () => {
    const put = await call(orgB, 'PUT', `/v1/databases/${DB}`);
    expect(put.status).toBe(201);
    expect(put.body.key).toBe(DB);
    expect((await call(orgB, 'GET', '/v1/databases')).body.databases.map((d: any) => d.key)).toEqual([DB]);

    expectError(await call(orgB, 'GET', collPath(DB)), 404, 'collection_not_found');
    expectError(await call(orgB, 'GET', recsPath(DB)), 404, 'collection_not_found');
    expectError(await call(orgB, 'GET', `${recsPath(DB)}/${ownerRecord.id}`), 404, 'collection_not_found');
    expectError(await call(orgB, 'PATCH', `${recsPath(DB)}/${ownerRecord.id}`, { text: 'x' }), 404, 'collection_not_found');
    expectError(await call(orgB, 'DELETE', `${recsPath(DB)}/${ownerRecord.id}`), 404, 'collection_not_found');

    // Its own collection of the same name starts at version 1, empty.
    const coll = await call(orgB, 'PUT', collPath(DB), { fields: [{ name: 'text', type: 'text', fulltext: true }, { name: 'email', type: 'text', unique: true, indexed: true }] });
    expect([coll.status, coll.body.schema_version]).toEqual([201, 1]);
    const empty = await call(orgB, 'GET', recsPath(DB));
    expect(empty.body).toEqual({ records: [], next_cursor: null });
    for (const query of ['q=secret', 'filter[email]=hidden%40a.example', 'sort=-id', 'sort=email']) {
      const r = await call(orgB, 'GET', `${recsPath(DB)}?${query}`);
      expect(r.body, query).toEqual({ records: [], next_cursor: null });
    }
    expectError(await call(orgB, 'GET', `${recsPath(DB)}/${ownerRecord.id}`), 404, 'record_not_found');
    expectError(await call(orgB, 'PATCH', `${recsPath(DB)}/${ownerRecord.id}`, { text: 'x' }), 404, 'record_not_found');
    expectError(await call(orgB, 'DELETE', `${recsPath(DB)}/${ownerRecord.id}`), 404, 'record_not_found');
    expectError(await call(orgB, 'POST', `/v1/databases/${DB}/batch`, { ops: [{ op: 'update', collection: COLL, id: ownerRecord.id, data: { text: 'x' } }] }), 404, 'record_not_found');

    // The owner's id and unique value are free in its own database.
    const mine = await call(orgB, 'POST', recsPath(DB), { id: ownerRecord.id, text: 'b text', email: 'hidden@a.example' });
    expect([mine.status, mine.body.version, mine.body.text]).toEqual([201, 1, 'b text']);
    const listed = await call(orgB, 'GET', `${recsPath(DB)}?limit=100`);
    expect(listed.body.records).toEqual([mine.body]);
  });

  it("cannot read the owner's records with the owner's cursor", async () => {
    const page = await call(orgA, 'GET', `${recsPath(DB)}?limit=1`);
    expect(page.body.next_cursor).toEqual(expect.any(String));
    const r = await call(orgB, 'GET', `${recsPath(DB)}?limit=100&cursor=${encodeURIComponent(page.body.next_cursor)}`);
    // Its own record (it has the owner's id and email, see above) and nothing of the owner's.
    expect(JSON.stringify(r.body)).not.toContain('top-secret');
    if (r.status === 200) for (const rec of r.body.records) expect(rec.text).toBe('b text');
    else expectError(r, 400, 'invalid_query');
  });
});

describe('an application-bound key of another application of the same organization', () => {
  it("does not list the organization's or another application's databases", async () => {
    const r = await call(appX, 'GET', '/v1/databases');
    expect(r.status).toBe(200);
    expect(r.body.databases).toEqual([]);
    const y = await call(appY, 'GET', '/v1/databases');
    expect(y.body.databases.map((d: any) => d.key)).toEqual([Y_DB]);
  });

  it("gets 404 database_not_found on every route of an organization database and of application Y's database", async () => {
    for (const [db, id] of [
      [DB, ownerRecord.id],
      [Y_DB, yRecord.id],
    ] as const) {
      for (const [what, method, path, body] of everyRoute(db, id)) {
        const r = await call(appX, method, path, body);
        expectError(r, 404, 'database_not_found', `${db}: ${what}`);
        expectNoLeak(r);
      }
    }
  });

  it("answers PUT of a name taken in its organization with 403 forbidden (one namespace per organization), leaving the owner's database as it was", async () => {
    expectError(await call(appX, 'PUT', `/v1/databases/${DB}`), 403, 'forbidden');
    expectError(await call(appX, 'PUT', `/v1/databases/${Y_DB}`), 403, 'forbidden');
    const mine = await call(appX, 'PUT', '/v1/databases/x-own');
    expect([mine.status, mine.body.application_id]).toEqual([201, expect.stringMatching(/^app_/)]);
    expect((await call(appX, 'GET', '/v1/databases')).body.databases.map((d: any) => d.key)).toEqual(['x-own']);
  });

  it("keeps application X's browser credentials out too (publishable key, end-user token)", async () => {
    for (const cred of [pubX, userX]) {
      for (const [db, id] of [
        [DB, ownerRecord.id],
        [Y_DB, yRecord.id],
      ] as const) {
        for (const [what, method, path, body] of everyRoute(db, id)) {
          const r = await call(cred, method, path, body);
          if (what.includes('collection') && !what.includes('record')) {
            // Schemas are for server credentials: refused with 403 (GET checks that first) or 404 (PUT looks up the database first).
            expect([`${r.status} ${r.body?.error?.code}`], `${db}: ${what}`).toSatisfy(([x]: string[]) => ['403 forbidden', '404 database_not_found'].includes(x));
          } else expectError(r, 404, 'database_not_found', `${db}: ${what}`);
          expectNoLeak(r);
        }
      }
    }
  });

  it('while the organization-wide key of the same organization reaches application Y\'s database', async () => {
    const r = await call(orgA, 'GET', `${recsPath(Y_DB)}/${yRecord.id}`);
    expect(r.body).toEqual(yRecord);
  });
});

describe("the owner's data afterwards", () => {
  it('is exactly as it was', async () => {
    const after = await ownerState();
    expect(after.collection).toEqual(before.collection);
    expect(after.collection).toEqual(ownerCollection);
    expect(after.records).toEqual(before.records);
    expect(after.records.records.find((r: any) => r.id === ownerRecord.id)).toEqual(ownerRecord);
    expect(after.y).toEqual(before.y);
    expect(after.yCollection).toEqual(before.yCollection);
    expect(after.databases.databases.filter((d: any) => d.key !== 'x-own')).toEqual(before.databases.databases);
    expect((await call(orgA, 'GET', collPath(DB, 'fresh'))).status).toBe(404);
    expect((await call(orgA, 'GET', collPath(DB, 'newcoll'))).status).toBe(404);
  });
});
