/**
 * Collections (spec 4.14) through the local server with a real HTTP client: create, change, the
 * error codes of the route, dropping fields with their data, and who may change schemas.
 *
 * Not covered: `unique_needs_single_shard` (400). A database lives in exactly one shard on this
 * platform, so every unique field is on a single shard and the platform can never give that answer;
 * a test could only fake it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { callApi, expectError, type Res } from '../helpers/data-api.js';

let p: TestPlatform;
let server: Record<string, string>;
let appServer: Record<string, string>;
let publishable: Record<string, string>;
let endUser: Record<string, string>;
const ORIGIN = 'https://app.example';
const DB = 'coll';
const APP_DB = 'coll-app';

const call = (cred: Record<string, string>, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  callApi(p.urls.data, cred, method, path, body, headers);

const putCollection = (name: string, body: unknown, cred = server, db = DB) => call(cred, 'PUT', `/v1/databases/${db}/collections/${name}`, body);
const getCollection = (name: string, cred = server, db = DB) => call(cred, 'GET', `/v1/databases/${db}/collections/${name}`);
const records = (name: string, db = DB) => `/v1/databases/${db}/collections/${name}/records`;

async function createRecord(collection: string, body: Record<string, unknown>): Promise<any> {
  const r = await call(server, 'POST', records(collection), body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  return r.body;
}

const NULL_RULES = { list: null, view: null, create: null, update: null, delete: null };

beforeAll(async () => {
  p = await startTestPlatform();
  server = bearer(p.credentials.secret_key);
  const t = new Tenants(p.engine.kv, () => Date.now());
  const app = await t.createApplication(p.credentials.workspace_id, 'coll-app', []);
  appServer = bearer((await t.createSecretKey(p.credentials.organization_id, app.id)).key);
  publishable = { ...bearer((await new PublishableKeys(p.engine.kv, () => Date.now()).create(app.id, [ORIGIN])).key), origin: ORIGIN };
  const minted = await call(appServer, 'POST', '/v1/end-user-tokens', { user_id: 'user-1' });
  expect(minted.status).toBe(200);
  endUser = bearer(minted.body.token);
  expect((await call(server, 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
  expect((await call(appServer, 'PUT', `/v1/databases/${APP_DB}`)).status).toBe(201);
});
afterAll(async () => p?.close());

describe('create and change', () => {
  it('answers 201 with the collection on create, and GET returns it', async () => {
    const body = {
      mode: 'schema',
      fields: [
        { name: 'title', type: 'text', required: true, fulltext: true },
        { name: 'price', type: 'number', indexed: true },
        { name: 'sku', type: 'text', unique: true, required: false },
      ],
      rules: { list: 'public', view: 'public', create: 'users', update: 'owner = @auth.id', delete: null },
    };
    const r = await putCollection('products', body);
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      name: 'products',
      mode: 'schema',
      schema_version: 1,
      // Flags that are false are left out: the answer is the canonical form.
      fields: [
        { name: 'title', type: 'text', required: true, fulltext: true },
        { name: 'price', type: 'number', indexed: true },
        { name: 'sku', type: 'text', unique: true },
      ],
      rules: body.rules,
    });
    const got = await getCollection('products');
    expect(got.status).toBe(200);
    expect(got.body).toEqual(r.body);
  });

  it('answers 200 with schema_version + 1 when changed, and 200 with the same version when unchanged', async () => {
    const v1 = { fields: [{ name: 'a', type: 'text' }] };
    expect((await putCollection('versions', v1)).body.schema_version).toBe(1);

    const same = await putCollection('versions', { mode: 'schema', fields: [{ name: 'a', type: 'text', unique: false }] });
    expect(same.status).toBe(200);
    expect(same.body.schema_version).toBe(1);

    const added = await putCollection('versions', { fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'integer' }] });
    expect(added.status).toBe(200);
    expect(added.body.schema_version).toBe(2);
    expect(added.body.fields).toEqual([{ name: 'a', type: 'text' }, { name: 'b', type: 'integer' }]);

    const rules = await putCollection('versions', { fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'integer' }], rules: { list: 'public' } });
    expect([rules.status, rules.body.schema_version]).toEqual([200, 3]);
    expect(rules.body.rules).toEqual({ ...NULL_RULES, list: 'public' });

    const dropped = await putCollection('versions', { fields: [{ name: 'b', type: 'integer' }], rules: { list: 'public' } });
    expect([dropped.status, dropped.body.schema_version]).toEqual([200, 4]);
    expect(dropped.body.fields).toEqual([{ name: 'b', type: 'integer' }]);

    const again = await putCollection('versions', { fields: [{ name: 'b', type: 'integer' }], rules: { list: 'public' } });
    expect([again.status, again.body.schema_version]).toEqual([200, 4]);
    expect((await getCollection('versions')).body.schema_version).toBe(4);
  });

  it('sets every rule to null when the rules object is omitted, also on a change', async () => {
    const r = await putCollection('norules', {});
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ name: 'norules', mode: 'schema', schema_version: 1, fields: [], rules: NULL_RULES });
    const partial = await putCollection('norules', { rules: { view: 'public' } });
    expect(partial.body.rules).toEqual({ ...NULL_RULES, view: 'public' });
    const reset = await putCollection('norules', {});
    expect([reset.status, reset.body.schema_version]).toEqual([200, 3]);
    expect(reset.body.rules).toEqual(NULL_RULES);
  });

  it('creates a free collection', async () => {
    const r = await putCollection('loose', { mode: 'free' });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ name: 'loose', mode: 'free', schema_version: 1, fields: [] });
  });

  it('answers 404 collection_not_found on GET of a collection that does not exist', async () => {
    expectError(await getCollection('nothing_here'), 404, 'collection_not_found');
  });
});

describe('400 invalid_name and invalid_body', () => {
  it('refuses collection names that are not a lowercase letter then up to 62 of [a-z0-9_]', async () => {
    for (const bad of ['Upper', '1abc', '_abc', 'a-b', 'a.b', 'a'.repeat(64), 'caf%C3%A9']) {
      expectError(await putCollection(bad, {}), 400, 'invalid_name');
    }
    expect((await putCollection('a'.repeat(63), {})).status).toBe(201);
    expect((await putCollection('a1_b', {})).status).toBe(201);
  });

  it('refuses a body that is not an object, an unknown top-level key and a bad mode', async () => {
    for (const bad of [[], JSON.stringify('text'), 42, null, [{ fields: [] }]]) {
      expectError(await putCollection('bodies', bad), 400, 'invalid_body');
    }
    expectError(await putCollection('bodies', { fields: [], schema: [] }), 400, 'invalid_body');
    expectError(await putCollection('bodies', { name: 'bodies' }), 400, 'invalid_body');
    for (const mode of ['typed', 'Schema', 1, true]) {
      expectError(await putCollection('bodies', { mode }), 400, 'invalid_body');
    }
    // Nothing was created by the refused calls.
    expectError(await getCollection('bodies'), 404, 'collection_not_found');
  });

  it('refuses a body that is not JSON', async () => {
    const res = await fetch(`${p.urls.data}/v1/databases/${DB}/collections/bodies`, { method: 'PUT', headers: { ...server, 'content-type': 'application/json' }, body: '{"fields": [' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as any).error.code).toBe('invalid_body');
  });
});

describe('400 invalid_schema', () => {
  const field = (extra: Record<string, unknown>) => ({ name: 'f', type: 'text', ...extra });
  const cases: Array<[string, unknown]> = [
    ['fields is not an array', { a: { type: 'text' } }],
    ['a field is not an object', ['title']],
    ['reserved name id', [{ name: 'id', type: 'text' }]],
    ['reserved name version', [{ name: 'version', type: 'integer' }]],
    ['reserved name created_at', [{ name: 'created_at', type: 'datetime' }]],
    ['reserved name updated_at', [{ name: 'updated_at', type: 'datetime' }]],
    ['name with a leading _', [{ name: '_secret', type: 'text' }]],
    ['name missing', [{ type: 'text' }]],
    ['empty name', [{ name: '', type: 'text' }]],
    ['name with a dash', [{ name: 'a-b', type: 'text' }]],
    ['name over 63 characters', [{ name: 'a'.repeat(64), type: 'text' }]],
    ['bad type', [{ name: 'f', type: 'string' }]],
    ['type missing', [{ name: 'f' }]],
    ['duplicate name', [{ name: 'f', type: 'text' }, { name: 'f', type: 'integer' }]],
    ['65 fields', Array.from({ length: 65 }, (_, i) => ({ name: `f${i}`, type: 'text' }))],
    ['unique on json', [field({ type: 'json', unique: true })]],
    ['unique on blob', [field({ type: 'blob', unique: true })]],
    ['indexed on json', [field({ type: 'json', indexed: true })]],
    ['indexed on blob', [field({ type: 'blob', indexed: true })]],
    ['fulltext on integer', [field({ type: 'integer', fulltext: true })]],
    ['fulltext on json', [field({ type: 'json', fulltext: true })]],
    ['relation without target', [field({ type: 'relation' })]],
    ['relation with a malformed target', [field({ type: 'relation', target: 'Bad-Name' })]],
    ['relation to a collection that does not exist', [field({ type: 'relation', target: 'missing_target' })]],
    ['target on a text field', [field({ target: 'products' })]],
    ['unknown property', [field({ default: 'x' })]],
    ['flag that is not a boolean', [field({ required: 'yes' })]],
  ];

  it.each(cases)('refuses %s', async (_what, fields) => {
    expectError(await putCollection('bad_schema', { fields }), 400, 'invalid_schema');
  });

  it('created nothing, and accepts exactly 64 fields, a relation to an existing collection and to itself', async () => {
    expectError(await getCollection('bad_schema'), 404, 'collection_not_found');
    const many = Array.from({ length: 64 }, (_, i) => ({ name: `f${i}`, type: 'text' }));
    expect((await putCollection('sixty_four', { fields: many })).status).toBe(201);
    await putCollection('targets', {});
    const rel = await putCollection('relations', { fields: [{ name: 't', type: 'relation', target: 'targets', indexed: true }, { name: 'parent', type: 'relation', target: 'relations' }] });
    expect(rel.status).toBe(201);
    expect(rel.body.fields[0]).toEqual({ name: 't', type: 'relation', target: 'targets', indexed: true });
  });
});

describe('400 invalid_rule', () => {
  it.each([
    ['syntax error', { update: 'owner = ' }],
    ['unterminated string', { view: 'owner = "abc' }],
    ['== instead of =', { list: 'owner == @auth.id' }],
    ['unknown @ scope', { list: '@user.id = owner' }],
    ['padded special form', { list: ' public' }],
    ['whitespace only', { list: '   ' }],
    ['a non-string rule', { list: 1 }],
    ['an unknown action', { read: 'public' }],
    ['rules not an object', 'public'],
  ])('refuses %s', async (_what, rules) => {
    const r = await putCollection('bad_rules', { fields: [{ name: 'owner', type: 'text' }], rules });
    expectError(r, 400, 'invalid_rule');
  });

  it('names the action and position in the message, and created nothing', async () => {
    const r = await putCollection('bad_rules', { rules: { update: 'owner = "abc' } });
    expect(r.body.error.message).toContain('rules.update');
    expect(r.body.error.message).toContain('position 9');
    expectError(await getCollection('bad_rules'), 404, 'collection_not_found');
  });
});

describe('400 schema_change_unsupported', () => {
  beforeAll(async () => {
    const r = await putCollection('fixed', {
      fields: [
        { name: 'name', type: 'text', indexed: true },
        { name: 'n', type: 'integer' },
        { name: 'ref', type: 'relation', target: 'fixed' },
      ],
    });
    expect(r.status).toBe(201);
    await putCollection('other_target', {});
  });
  const base = [
    { name: 'name', type: 'text', indexed: true },
    { name: 'n', type: 'integer' },
    { name: 'ref', type: 'relation', target: 'fixed' },
  ];
  const with_ = (i: number, f: Record<string, unknown>) => base.map((x, j) => (j === i ? f : x));

  it.each([
    ['a type change', with_(1, { name: 'n', type: 'number' })],
    ['a flag removed', with_(0, { name: 'name', type: 'text' })],
    ['a flag added (unique)', with_(1, { name: 'n', type: 'integer', unique: true })],
    ['a flag added (required)', with_(1, { name: 'n', type: 'integer', required: true })],
    ['a target change', with_(2, { name: 'ref', type: 'relation', target: 'other_target' })],
  ])('refuses %s', async (_what, fields) => {
    expectError(await putCollection('fixed', { fields }), 400, 'schema_change_unsupported');
  });

  it('refuses a mode change both ways (an omitted mode means schema)', async () => {
    expectError(await putCollection('fixed', { mode: 'free', fields: base }), 400, 'schema_change_unsupported');
    await putCollection('was_free', { mode: 'free' });
    expectError(await putCollection('was_free', {}), 400, 'schema_change_unsupported');
    expectError(await putCollection('was_free', { mode: 'schema' }), 400, 'schema_change_unsupported');
  });

  it('left the collection as it was', async () => {
    const got = await getCollection('fixed');
    expect(got.body.schema_version).toBe(1);
    expect(got.body.fields).toEqual(base);
  });
});

describe('409 schema_violation', () => {
  it('refuses a new required field when records exist, allows an optional one', async () => {
    await putCollection('filled', { fields: [{ name: 'a', type: 'text' }] });
    await createRecord('filled', { a: 'x' });
    const r = await putCollection('filled', { fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'text', required: true }] });
    expectError(r, 409, 'schema_violation');
    expect((await getCollection('filled')).body.schema_version).toBe(1);
    const optional = await putCollection('filled', { fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'text' }] });
    expect([optional.status, optional.body.schema_version]).toEqual([200, 2]);
  });

  it('allows a new required field on an empty collection, also one whose records were all deleted', async () => {
    await putCollection('empty', { fields: [{ name: 'a', type: 'text' }] });
    const r = await putCollection('empty', { fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'text', required: true }] });
    expect([r.status, r.body.schema_version]).toEqual([200, 2]);

    await putCollection('emptied', { fields: [{ name: 'a', type: 'text' }] });
    const rec = await createRecord('emptied', { a: 'x' });
    expect((await call(server, 'DELETE', `${records('emptied')}/${rec.id}`)).status).toBe(204);
    const after = await putCollection('emptied', { fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'text', required: true }] });
    expect(after.status).toBe(200);
    expectError(await call(server, 'POST', records('emptied'), { a: 'y' }), 400, 'missing_field');
  });
});

describe('dropping a field drops its data', () => {
  it('hides a dropped value, keeps it hidden after the field is re-added, and frees its unique values', async () => {
    const fields = [
      { name: 'name', type: 'text' },
      { name: 'email', type: 'text', unique: true, indexed: true },
    ];
    await putCollection('people', { fields });
    const rec = await createRecord('people', { name: 'Ann', email: 'ann@example.com' });
    expect(rec.email).toBe('ann@example.com');

    await putCollection('people', { fields: [fields[0]] });
    const dropped = await call(server, 'GET', `${records('people')}/${rec.id}`);
    expect(dropped.status).toBe(200);
    expect(dropped.body).not.toHaveProperty('email');
    expect(dropped.body.name).toBe('Ann');
    // A dropped field is unknown to writes too.
    expectError(await call(server, 'PATCH', `${records('people')}/${rec.id}`, { email: 'x@example.com' }), 400, 'unknown_field');

    await putCollection('people', { fields });
    const readded = await call(server, 'GET', `${records('people')}/${rec.id}`);
    expect(readded.body).not.toHaveProperty('email');
    const listed = await call(server, 'GET', records('people'));
    expect(listed.body.records.map((r: any) => r.email)).toEqual([undefined]);
    const filtered = await call(server, 'GET', `${records('people')}?filter[email]=ann%40example.com`);
    expect(filtered.body.records).toEqual([]);

    // The old unique value is free again under the re-added field.
    const bob = await createRecord('people', { name: 'Bob', email: 'ann@example.com' });
    expect(bob.email).toBe('ann@example.com');
    expectError(await call(server, 'POST', records('people'), { name: 'Cy', email: 'ann@example.com' }), 409, 'unique_violation');
    // An update of the old record that does not touch the field does not bring the value back.
    const patched = await call(server, 'PATCH', `${records('people')}/${rec.id}`, { name: 'Ann B.' });
    expect(patched.status).toBe(200);
    expect(patched.body).not.toHaveProperty('email');
    const found = await call(server, 'GET', `${records('people')}?filter[email]=ann%40example.com`);
    expect(found.body.records.map((r: any) => r.id)).toEqual([bob.id]);
  });

  it('also in a free collection: a dropped declared field does not come back as a free value', async () => {
    await putCollection('loose_typed', { mode: 'free', fields: [{ name: 'score', type: 'integer' }] });
    const rec = await createRecord('loose_typed', { score: 5, note: 'kept' });
    await putCollection('loose_typed', { mode: 'free' });
    const got = await call(server, 'GET', `${records('loose_typed')}/${rec.id}`);
    expect(got.body.note).toBe('kept');
    expect(got.body).not.toHaveProperty('score');
    // Written after the drop, the key is an ordinary free value again.
    const patched = await call(server, 'PATCH', `${records('loose_typed')}/${rec.id}`, { score: 'free text' });
    expect(patched.body.score).toBe('free text');
    expect((await call(server, 'GET', `${records('loose_typed')}/${rec.id}`)).body.score).toBe('free text');
  });
});

describe('404 database_not_found and 403 forbidden', () => {
  it('answers 404 database_not_found for a database that does not exist', async () => {
    expectError(await putCollection('x', {}, server, 'no-such-db'), 404, 'database_not_found');
    expectError(await getCollection('x', server, 'no-such-db'), 404, 'database_not_found');
  });

  it('refuses publishable keys and end-user tokens with 403 forbidden, on PUT and GET', async () => {
    expect((await putCollection('guarded', { rules: { list: 'public', view: 'public', create: 'public', update: 'public', delete: 'public' } }, appServer, APP_DB)).status).toBe(201);
    for (const cred of [publishable, endUser]) {
      expectError(await putCollection('guarded', { fields: [{ name: 'x', type: 'text' }] }, cred, APP_DB), 403, 'forbidden');
      expectError(await putCollection('brand_new', {}, cred, APP_DB), 403, 'forbidden');
      expectError(await getCollection('guarded', cred, APP_DB), 403, 'forbidden');
    }
    const got = await getCollection('guarded', appServer, APP_DB);
    expect([got.body.schema_version, got.body.fields]).toEqual([1, []]);
    expectError(await getCollection('brand_new', appServer, APP_DB), 404, 'collection_not_found');
  });

  it('answers 401 without a credential', async () => {
    const res = await fetch(`${p.urls.data}/v1/databases/${DB}/collections/products`, { method: 'PUT', body: '{}', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(401);
  });
});
