/**
 * Records (spec 4.15 and the record routes: GET, PATCH, DELETE, list) through the local server with a
 * real HTTP client: every error code of the create route, versions in ETag / If-Match, lists with
 * filters, sorts, cursors and `q`, and collection rules with real non-server credentials
 * (docs/data/rules.md).
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { recordKey } from '../../lambdas/data/keys.js';
import { callApi, expectError, type Res } from '../helpers/data-api.js';

let p: TestPlatform;
let server: Record<string, string>;
const DB = 'recs';
const ORIGIN = 'https://notes.example';

const call = (cred: Record<string, string>, method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  callApi(p.urls.data, cred, method, path, body, headers);

const coll = (name: string, db = DB) => `/v1/databases/${db}/collections/${name}`;
const recs = (name: string, db = DB) => `${coll(name, db)}/records`;
const rec = (name: string, id: string, db = DB) => `${recs(name, db)}/${encodeURIComponent(id)}`;

async function putCollection(name: string, body: unknown, cred = server, db = DB) {
  const r = await call(cred, 'PUT', coll(name, db), body);
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  return r.body;
}

async function create(name: string, body: Record<string, unknown>, cred = server, db = DB): Promise<any> {
  const r = await call(cred, 'POST', recs(name, db), body);
  expect(r.status, JSON.stringify(r.body)?.slice(0, 500)).toBe(201);
  return r.body;
}

const list = (name: string, query = '', cred = server, db = DB) => call(cred, 'GET', `${recs(name, db)}${query ? `?${query}` : ''}`);

/** Follows next_cursor to the end; returns every record in order and the page sizes. */
async function listAll(name: string, query: string, cred = server, db = DB): Promise<{ records: any[]; pages: number[] }> {
  const records: any[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const r = await list(name, `${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, cred, db);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    records.push(...r.body.records);
    pages.push(r.body.records.length);
    cursor = r.body.next_cursor;
    if (!cursor) return { records, pages };
  }
  throw new Error('the cursor never ended');
}

const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const ids = (r: Res) => r.body.records.map((x: any) => x.id);

beforeAll(async () => {
  p = await startTestPlatform();
  server = bearer(p.credentials.secret_key);
  expect((await call(server, 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
});
afterAll(async () => p?.close());

describe('create', () => {
  beforeAll(async () => {
    await putCollection('items', { fields: [{ name: 'name', type: 'text' }, { name: 'qty', type: 'integer' }] });
  });

  it('answers 201 with a generated sortable rec_ id, version 1 and ETag "1"', async () => {
    const r = await call(server, 'POST', recs('items'), { name: 'first' });
    expect(r.status).toBe(201);
    expect(r.headers.get('etag')).toBe('"1"');
    expect(r.body).toEqual({ id: expect.stringMatching(/^rec_[0-9a-hjkmnp-tv-z]{26}$/), version: 1, created_at: expect.stringMatching(ISO_MS), updated_at: r.body.created_at, name: 'first' });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const second = await create('items', { name: 'second' });
    expect(second.id > r.body.id).toBe(true);
    const got = await call(server, 'GET', rec('items', r.body.id));
    expect([got.status, got.headers.get('etag')]).toEqual([200, '"1"']);
    expect(got.body).toEqual(r.body);
  });

  it('takes an own id, and refuses a malformed one with 400 invalid_value', async () => {
    const own = await create('items', { id: 'Own_id-1', name: 'mine' });
    expect(own.id).toBe('Own_id-1');
    expect((await call(server, 'GET', rec('items', 'Own_id-1'))).body.name).toBe('mine');
    expect((await create('items', { id: 'x'.repeat(64) })).id).toHaveLength(64);
    for (const id of ['has space', 'a/b', 'é', '', 'x'.repeat(65), 42, null, ['a']]) {
      expectError(await call(server, 'POST', recs('items'), { id, name: 'bad' }), 400, 'invalid_value');
    }
  });

  it('answers 409 already_exists for an id in use, with or without If-None-Match: *', async () => {
    await create('items', { id: 'taken', name: 'one' });
    expectError(await call(server, 'POST', recs('items'), { id: 'taken', name: 'two' }), 409, 'already_exists');
    expectError(await call(server, 'POST', recs('items'), { id: 'taken', name: 'two' }, { 'if-none-match': '*' }), 409, 'already_exists');
    expect((await call(server, 'GET', rec('items', 'taken'))).body).toMatchObject({ name: 'one', version: 1 });
    const fresh = await call(server, 'POST', recs('items'), { id: 'fresh', name: 'x' }, { 'if-none-match': '*' });
    expect(fresh.status).toBe(201);
    expectError(await call(server, 'POST', recs('items'), { id: 'other', name: 'x' }, { 'if-none-match': '"1"' }), 400, 'invalid_body');
  });

  it('answers 400 invalid_body for a body that is not an object', async () => {
    for (const body of ['[]', '[{"name":"a"}]', '"name"', '7', 'null', '{"name":']) {
      expectError(await call(server, 'POST', recs('items'), body), 400, 'invalid_body');
    }
    const noBody = await fetch(`${p.urls.data}${recs('items')}`, { method: 'POST', headers: server });
    expect(noBody.status).toBe(400);
    expect(((await noBody.json()) as any).error.code).toBe('invalid_body');
    const text = await fetch(`${p.urls.data}${recs('items')}`, { method: 'POST', headers: { ...server, 'content-type': 'text/plain' }, body: '{"name":"a"}' });
    expect(text.status).toBe(400);
  });

  it('answers 400 unknown_field for a key a schema collection does not declare', async () => {
    expectError(await call(server, 'POST', recs('items'), { name: 'a', colour: 'red' }), 400, 'unknown_field');
    expectError(await call(server, 'POST', recs('items'), { Name: 'a' }), 400, 'unknown_field');
  });

  it('answers 400 missing_field when a required field is absent or null, on create and on update', async () => {
    await putCollection('required', { fields: [{ name: 'title', type: 'text', required: true }, { name: 'note', type: 'text' }] });
    expectError(await call(server, 'POST', recs('required'), { note: 'x' }), 400, 'missing_field');
    expectError(await call(server, 'POST', recs('required'), { title: null }), 400, 'missing_field');
    const r = await create('required', { title: 't' });
    expectError(await call(server, 'PATCH', rec('required', r.id), { title: null }), 400, 'missing_field');
    expect((await call(server, 'PATCH', rec('required', r.id), { note: 'n' })).status).toBe(200);
  });

  it('answers 400 reserved_field for id-like and _-prefixed keys, in schema and free collections', async () => {
    await putCollection('loose', { mode: 'free' });
    for (const name of ['items', 'loose']) {
      for (const key of ['version', 'created_at', 'updated_at', '_x', '_']) {
        expectError(await call(server, 'POST', recs(name), { [key]: 1 }), 400, 'reserved_field');
      }
    }
    const r = await create('loose', { a: 1 });
    for (const key of ['id', 'version', 'created_at', '_x']) {
      expectError(await call(server, 'PATCH', rec('loose', r.id), { [key]: 'x' }), 400, 'reserved_field');
    }
  });

  it('accepts any top-level keys in a free collection', async () => {
    const data = { a: 1, nested: { deep: [1, 'two', { three: null }] }, flag: false, text: 'é😀', list: [] };
    const r = await create('loose', data);
    expect(r).toMatchObject(data);
    expect((await call(server, 'GET', rec('loose', r.id))).body).toEqual(r);
  });
});

describe('400 invalid_value per type, and normalized values', () => {
  let blobSha: string;
  beforeAll(async () => {
    await putCollection('targets', {});
    await create('targets', { id: 'target-1' });
    await putCollection('typed', {
      fields: [
        { name: 't', type: 'text' },
        { name: 'i', type: 'integer' },
        { name: 'n', type: 'number' },
        { name: 'b', type: 'bool' },
        { name: 'd', type: 'datetime' },
        { name: 'j', type: 'json' },
        { name: 'r', type: 'relation', target: 'targets' },
        { name: 'bl', type: 'blob' },
      ],
    });
    const bytes = Buffer.from('file bytes for a blob field');
    blobSha = createHash('sha256').update(bytes).digest('hex');
    const stored = await fetch(`${p.urls.data}/v1/databases/${DB}/blobs/${blobSha}`, { method: 'PUT', headers: { ...server, 'content-type': 'application/octet-stream' }, body: bytes });
    expect(stored.status).toBe(201);
  });

  const bad: Array<[string, unknown]> = [
    ['t', 5],
    ['t', true],
    ['t', { a: 1 }],
    ['t', ['a']],
    ['i', 1.5],
    ['i', 2 ** 53],
    ['i', -(2 ** 53)],
    ['i', '1'],
    ['i', true],
    ['n', 'NaN'],
    ['n', '1.5'],
    ['n', 'Infinity'],
    ['n', '-Infinity'],
    ['n', '1e400'],
    ['n', false],
    ['b', 'true'],
    ['b', 1],
    ['b', 0],
    ['d', '2026-01-31T12:00:00+01:00'],
    ['d', '2026-01-31T12:00:00'],
    ['d', '2026-01-31 12:00:00Z'],
    ['d', '2026-01-31'],
    ['d', '2026-02-30T00:00:00Z'],
    ['d', '2026-01-31T24:00:00Z'],
    ['d', '2026-13-01T00:00:00Z'],
    ['d', '2026-01-31T12:00:00.1234Z'],
    ['d', 'yesterday'],
    ['d', 1769860800000],
    ['r', 'no-such-record'],
    ['r', 'bad id!'],
    ['r', 7],
    ['bl', 'a'.repeat(64)],
    ['bl', 'A'.repeat(64)],
    ['bl', 'abc'],
    ['bl', 1],
  ];
  it.each(bad)('refuses %s = %j', async (field, value) => {
    expectError(await call(server, 'POST', recs('typed'), { [field]: value }), 400, 'invalid_value');
  });

  it('refuses numbers JSON cannot hold as finite (1e400 parses to Infinity)', async () => {
    expectError(await call(server, 'POST', recs('typed'), '{"n": 1e400}'), 400, 'invalid_value');
    expectError(await call(server, 'POST', recs('typed'), '{"i": 9007199254740993}'), 400, 'invalid_value');
  });

  it('accepts valid values of every type and normalizes datetimes to milliseconds', async () => {
    const r = await create('typed', {
      t: '',
      i: 2 ** 53 - 1,
      n: -1.25e300,
      b: false,
      d: '2026-01-31T12:00:00Z',
      j: { any: ['thing', 1, null, { x: true }] },
      r: 'target-1',
      bl: blobSha,
    });
    expect(r).toMatchObject({ t: '', i: 2 ** 53 - 1, n: -1.25e300, b: false, d: '2026-01-31T12:00:00.000Z', j: { any: ['thing', 1, null, { x: true }] }, r: 'target-1', bl: blobSha });
    expect((await call(server, 'GET', rec('typed', r.id))).body).toEqual(r);
    const frac = await create('typed', { d: '2026-01-31T12:00:00.5Z', i: -(2 ** 53 - 1) });
    expect(frac.d).toBe('2026-01-31T12:00:00.500Z');
    const leap = await create('typed', { d: '2028-02-29T23:59:59.999Z' });
    expect(leap.d).toBe('2028-02-29T23:59:59.999Z');
  });

  it('json accepts anything', async () => {
    for (const j of [1, 'text', true, [], {}, [[1], { a: [] }], 1.5]) {
      const r = await create('typed', { j });
      expect(r.j).toEqual(j);
    }
  });

  it('checks relations and blobs on update too, and stores nothing on failure', async () => {
    const r = await create('typed', { t: 'keep' });
    expectError(await call(server, 'PATCH', rec('typed', r.id), { t: 'changed', r: 'nope' }), 400, 'invalid_value');
    expectError(await call(server, 'PATCH', rec('typed', r.id), { t: 'changed', bl: 'b'.repeat(64) }), 400, 'invalid_value');
    expect((await call(server, 'GET', rec('typed', r.id))).body).toEqual(r);
  });
});

describe('sizes', () => {
  beforeAll(async () => {
    await putCollection('sized', {
      mode: 'free',
      fields: [
        { name: 'u', type: 'text', unique: true },
        { name: 'x', type: 'text', indexed: true },
        { name: 'plain', type: 'text' },
      ],
    });
  });

  it('answers 400 field_too_large for a unique or indexed value over 900 bytes', async () => {
    expectError(await call(server, 'POST', recs('sized'), { u: 'a'.repeat(901) }), 400, 'field_too_large');
    expectError(await call(server, 'POST', recs('sized'), { x: 'a'.repeat(901) }), 400, 'field_too_large');
    // Bytes, not characters: 451 two-byte characters are 902 bytes.
    expectError(await call(server, 'POST', recs('sized'), { x: 'é'.repeat(451) }), 400, 'field_too_large');
    const ok = await create('sized', { u: 'a'.repeat(900), x: 'é'.repeat(450), plain: 'p'.repeat(20_000) });
    expectError(await call(server, 'PATCH', rec('sized', ok.id), { x: 'b'.repeat(901) }), 400, 'field_too_large');
    expect((await call(server, 'GET', rec('sized', ok.id))).body.x).toBe('é'.repeat(450));
  });

  it('answers 400 record_too_large over 900 KiB and 413 payload_too_large over the 1 MiB body limit', async () => {
    expectError(await call(server, 'POST', recs('sized'), { big: 'x'.repeat(901 * 1024) }), 400, 'record_too_large');
    expectError(await call(server, 'POST', recs('sized'), { big: 'x'.repeat(1024 * 1024 + 1) }), 413, 'payload_too_large');
    const r = await create('sized', { small: 1 });
    expectError(await call(server, 'PATCH', rec('sized', r.id), { big: 'x'.repeat(901 * 1024) }), 400, 'record_too_large');
    expectError(await call(server, 'PATCH', rec('sized', r.id), { big: 'x'.repeat(1024 * 1024 + 1) }), 413, 'payload_too_large');
    expect((await call(server, 'GET', rec('sized', r.id))).body.version).toBe(1);
  });

  it('keeps a ~500 KiB record intact on GET, list and update (its body is stored outside the item)', async () => {
    const big = 'abcdefghij'.repeat(50 * 1024) + 'é😀';
    const made = await create('sized', { id: 'large', big, u: 'large-u', x: 'large-x' });
    expect(made.big).toBe(big);
    const item = await p.engine.kv.get(recordKey(p.credentials.organization_id, DB, 'sized', 'large'));
    expect(typeof item?.body).toBe('string');
    expect(item?.values).toBeUndefined();

    const got = await call(server, 'GET', rec('sized', 'large'));
    expect(got.body).toEqual(made);
    const listed = await list('sized', 'filter[x]=large-x');
    expect(listed.body.records).toEqual([made]);
    const all = await listAll('sized', 'limit=100');
    expect(all.records.find((r) => r.id === 'large')).toEqual(made);

    const patched = await call(server, 'PATCH', rec('sized', 'large'), { plain: 'changed' });
    expect(patched.status).toBe(200);
    expect(patched.body.big).toBe(big);
    expect((await call(server, 'GET', rec('sized', 'large'))).body).toEqual(patched.body);
    // A list through the index shows the new version too (index entries carry the record).
    expect((await list('sized', 'filter[x]=large-x')).body.records).toEqual([patched.body]);
    // Shrinking it brings the values back into the item.
    const small = await call(server, 'PATCH', rec('sized', 'large'), { big: null });
    expect(small.body).not.toHaveProperty('big');
    expect((await p.engine.kv.get(recordKey(p.credentials.organization_id, DB, 'sized', 'large')))?.body).toBeUndefined();
    expect((await call(server, 'GET', rec('sized', 'large'))).body).toEqual(small.body);
    expect((await list('sized', 'filter[x]=large-x')).body.records).toEqual([small.body]);
    expect((await call(server, 'DELETE', rec('sized', 'large'))).status).toBe(204);
    expect((await list('sized', 'filter[x]=large-x')).body.records).toEqual([]);
  });
});

describe('409 unique_violation', () => {
  it('refuses a taken value, and frees it when the holder changes it, unsets it or is deleted', async () => {
    await putCollection('users', { fields: [{ name: 'email', type: 'text', unique: true }, { name: 'n', type: 'integer', unique: true }] });
    const ann = await create('users', { email: 'a@x', n: 1 });
    expectError(await call(server, 'POST', recs('users'), { email: 'a@x' }), 409, 'unique_violation');
    expectError(await call(server, 'POST', recs('users'), { n: 1 }), 409, 'unique_violation');
    const bob = await create('users', { email: 'b@x', n: 2 });
    expectError(await call(server, 'PATCH', rec('users', bob.id), { email: 'a@x' }), 409, 'unique_violation');
    expect((await call(server, 'GET', rec('users', bob.id))).body.email).toBe('b@x');

    // Case matters: values are compared exactly.
    await create('users', { email: 'A@x' });

    expect((await call(server, 'PATCH', rec('users', ann.id), { email: 'ann@x' })).status).toBe(200);
    const cy = await create('users', { email: 'a@x' });
    expectError(await call(server, 'POST', recs('users'), { email: 'ann@x' }), 409, 'unique_violation');

    expect((await call(server, 'PATCH', rec('users', ann.id), { n: null })).status).toBe(200);
    await create('users', { n: 1 });

    expect((await call(server, 'DELETE', rec('users', ann.id))).status).toBe(204);
    await create('users', { email: 'ann@x' });
    // A record may keep its own value.
    expect((await call(server, 'PATCH', rec('users', cy.id), { email: 'a@x', n: 3 })).status).toBe(200);
  });
});

describe('missing collections', () => {
  it('creates a free collection when a server credential writes to a missing one', async () => {
    expectError(await call(server, 'GET', `/v1/databases/${DB}/collections/implicit`), 404, 'collection_not_found');
    const r = await create('implicit', { anything: { goes: true } });
    expect(r.anything).toEqual({ goes: true });
    const c = await call(server, 'GET', `/v1/databases/${DB}/collections/implicit`);
    expect(c.body).toEqual({ name: 'implicit', mode: 'free', schema_version: 1, fields: [], rules: { list: null, view: null, create: null, update: null, delete: null } });
    expectError(await call(server, 'POST', recs('Bad-Name'), { a: 1 }), 400, 'invalid_name');
  });

  it('answers 404 collection_not_found for reads and non-create writes of a missing collection', async () => {
    expectError(await list('never'), 404, 'collection_not_found');
    expectError(await call(server, 'GET', rec('never', 'x')), 404, 'collection_not_found');
    expectError(await call(server, 'PATCH', rec('never', 'x'), { a: 1 }), 404, 'collection_not_found');
    expectError(await call(server, 'DELETE', rec('never', 'x')), 404, 'collection_not_found');
    expectError(await call(server, 'GET', `/v1/databases/${DB}/collections/never`), 404, 'collection_not_found');
  });

  it('answers 404 database_not_found on every record route of a missing database', async () => {
    expectError(await call(server, 'POST', recs('items', 'nodb'), { a: 1 }), 404, 'database_not_found');
    expectError(await list('items', '', server, 'nodb'), 404, 'database_not_found');
    expectError(await call(server, 'GET', rec('items', 'x', 'nodb')), 404, 'database_not_found');
    expectError(await call(server, 'PATCH', rec('items', 'x', 'nodb'), { a: 1 }), 404, 'database_not_found');
    expectError(await call(server, 'DELETE', rec('items', 'x', 'nodb')), 404, 'database_not_found');
  });
});

describe('get, update, delete', () => {
  beforeAll(async () => {
    await putCollection('docs', { fields: [{ name: 'a', type: 'text' }, { name: 'b', type: 'integer' }, { name: 'c', type: 'bool' }] });
  });

  it('answers 404 record_not_found for an unknown or malformed id, and 304 for a matching If-None-Match', async () => {
    expectError(await call(server, 'GET', rec('docs', 'missing')), 404, 'record_not_found');
    expectError(await call(server, 'GET', rec('docs', 'bad id!')), 404, 'record_not_found');
    const r = await create('docs', { a: 'x' });
    const res = await fetch(`${p.urls.data}${rec('docs', r.id)}`, { headers: { ...server, 'if-none-match': '"1"' } });
    expect([res.status, res.headers.get('etag')]).toEqual([304, '"1"']);
    const changed = await fetch(`${p.urls.data}${rec('docs', r.id)}`, { headers: { ...server, 'if-none-match': '"7"' } });
    expect(changed.status).toBe(200);
  });

  it('PATCH sets the fields sent, unsets null ones, and moves the version and ETag', async () => {
    const r = await create('docs', { a: 'x', b: 1, c: true });
    await new Promise((resolve) => setTimeout(resolve, 3));
    const u = await call(server, 'PATCH', rec('docs', r.id), { b: 2, c: null });
    expect(u.status).toBe(200);
    expect(u.headers.get('etag')).toBe('"2"');
    expect(u.body).toEqual({ id: r.id, version: 2, created_at: r.created_at, updated_at: expect.stringMatching(ISO_MS), a: 'x', b: 2 });
    expect(u.body.updated_at > r.updated_at).toBe(true);
    expect((await call(server, 'GET', rec('docs', r.id))).body).toEqual(u.body);
    const empty = await call(server, 'PATCH', rec('docs', r.id), {});
    expect([empty.status, empty.body.version]).toEqual([200, 3]);
    expectError(await call(server, 'PATCH', rec('docs', r.id), { nope: 1 }), 400, 'unknown_field');
    expectError(await call(server, 'PATCH', rec('docs', r.id), { b: 'two' }), 400, 'invalid_value');
    expectError(await call(server, 'PATCH', rec('docs', r.id), '[]'), 400, 'invalid_body');
    expectError(await call(server, 'PATCH', rec('docs', 'missing'), { a: 'y' }), 404, 'record_not_found');
  });

  it('PATCH with If-Match applies at that version and answers 409 version_conflict when stale', async () => {
    const r = await create('docs', { a: 'v1' });
    const ok = await call(server, 'PATCH', rec('docs', r.id), { a: 'v2' }, { 'if-match': '"1"' });
    expect([ok.status, ok.headers.get('etag'), ok.body.a]).toEqual([200, '"2"', 'v2']);
    expectError(await call(server, 'PATCH', rec('docs', r.id), { a: 'stale' }, { 'if-match': '"1"' }), 409, 'version_conflict');
    expectError(await call(server, 'PATCH', rec('docs', r.id), { a: 'future' }, { 'if-match': '"9"' }), 409, 'version_conflict');
    expect((await call(server, 'GET', rec('docs', r.id))).body).toMatchObject({ a: 'v2', version: 2 });
    // Weak and unquoted forms of the version are read too.
    expect((await call(server, 'PATCH', rec('docs', r.id), { a: 'v3' }, { 'if-match': 'W/"2"' })).status).toBe(200);
    expect((await call(server, 'PATCH', rec('docs', r.id), { a: 'v4' }, { 'if-match': '3' })).status).toBe(200);
    expectError(await call(server, 'PATCH', rec('docs', r.id), { a: 'x' }, { 'if-match': 'abc' }), 400, 'invalid_body');
    expectError(await call(server, 'PATCH', rec('docs', 'missing'), { a: 'x' }, { 'if-match': '"1"' }), 404, 'record_not_found');
  });

  it('DELETE answers 204, 409 version_conflict with a stale If-Match, then 404', async () => {
    const r = await create('docs', { a: 'x' });
    await call(server, 'PATCH', rec('docs', r.id), { a: 'y' });
    expectError(await call(server, 'DELETE', rec('docs', r.id), undefined, { 'if-match': '"1"' }), 409, 'version_conflict');
    expect((await call(server, 'GET', rec('docs', r.id))).status).toBe(200);
    const del = await fetch(`${p.urls.data}${rec('docs', r.id)}`, { method: 'DELETE', headers: { ...server, 'if-match': '"2"' } });
    expect(del.status).toBe(204);
    expect(await del.text()).toBe('');
    expectError(await call(server, 'GET', rec('docs', r.id)), 404, 'record_not_found');
    expectError(await call(server, 'DELETE', rec('docs', r.id)), 404, 'record_not_found');
    expectError(await call(server, 'PATCH', rec('docs', r.id), { a: 'z' }), 404, 'record_not_found');
    // The id is free again.
    expect((await call(server, 'POST', recs('docs'), { id: r.id, a: 'again' })).body.version).toBe(1);
  });
});

describe('list', () => {
  const N = 25;
  const tags = ['red', 'green', 'blue'];
  const words = ['hello world', 'Hello there', 'wonderful day', 'help wanted', 'world peace'];
  let all: any[];
  beforeAll(async () => {
    await putCollection('listing', {
      fields: [
        { name: 'n', type: 'integer', indexed: true },
        { name: 'score', type: 'number', indexed: true },
        { name: 'tag', type: 'text', indexed: true },
        { name: 'title', type: 'text', fulltext: true },
        { name: 'body', type: 'text', fulltext: true },
        { name: 'plain', type: 'text' },
      ],
    });
    // Own ids, created out of order, so the default order is the ids', not creation order.
    const order = Array.from({ length: N }, (_, i) => (i * 7) % N);
    all = [];
    for (const i of order) {
      all.push(
        await create('listing', {
          id: `r${String(i).padStart(2, '0')}`,
          n: i % 10,
          score: (i - 12) / 4,
          tag: tags[i % 3],
          title: words[i % 5],
          body: i % 2 ? 'odd Ünïcode text' : 'even text',
          plain: `p${i}`,
        }),
      );
    }
    all.sort((a, b) => (a.id < b.id ? -1 : 1));
    await putCollection('nofulltext', { fields: [{ name: 'a', type: 'text' }] });
  });
  const byN = (a: any, b: any) => a.n - b.n || (a.id < b.id ? -1 : 1);

  it('pages by id by default (limit 20), takes limit 1 to 100 and refuses others with invalid_query', async () => {
    const r = await list('listing');
    expect(r.status).toBe(200);
    expect(r.body.records).toHaveLength(20);
    expect(ids(r)).toEqual(all.slice(0, 20).map((x) => x.id));
    expect(typeof r.body.next_cursor).toBe('string');
    expect(r.body.records[0]).toEqual(all[0]);
    expect(ids(await list('listing', 'limit=1'))).toEqual([all[0].id]);
    const max = await list('listing', 'limit=100');
    expect([max.body.records.length, max.body.next_cursor]).toEqual([N, null]);
    for (const bad of ['0', '101', '-1', 'abc', '1.5', '', '1e1']) {
      expectError(await list('listing', `limit=${bad}`), 400, 'invalid_query');
    }
  });

  it('sorts by -id', async () => {
    expect(ids(await list('listing', 'sort=-id&limit=100'))).toEqual([...all].reverse().map((x) => x.id));
    expect(ids(await list('listing', 'sort=id&limit=100'))).toEqual(all.map((x) => x.id));
  });

  it('filters by equality on an indexed field', async () => {
    expect(ids(await list('listing', 'filter[tag]=green&limit=100'))).toEqual(all.filter((x) => x.tag === 'green').map((x) => x.id));
    expect(ids(await list('listing', 'filter[n]=3&limit=100'))).toEqual(all.filter((x) => x.n === 3).map((x) => x.id));
    expect(ids(await list('listing', 'filter[n][eq]=3&limit=100'))).toEqual(all.filter((x) => x.n === 3).map((x) => x.id));
    expect((await list('listing', 'filter[tag]=purple')).body).toEqual({ records: [], next_cursor: null });
  });

  it('filters by combined ranges, sorted by the field ascending, or descending with sort=-field', async () => {
    const expected = all.filter((x) => x.n > 3 && x.n <= 7).sort(byN);
    expect(ids(await list('listing', 'filter[n][gt]=3&filter[n][lte]=7&limit=100'))).toEqual(expected.map((x) => x.id));
    expect(ids(await list('listing', 'filter[n][gt]=3&filter[n][lte]=7&sort=n&limit=100'))).toEqual(expected.map((x) => x.id));
    expect(ids(await list('listing', 'filter[n][gt]=3&filter[n][lte]=7&sort=-n&limit=100'))).toEqual([...expected].reverse().map((x) => x.id));
    const gteLt = all.filter((x) => x.n >= 3 && x.n < 7).sort(byN);
    expect(ids(await list('listing', 'filter[n][gte]=3&filter[n][lt]=7&limit=100'))).toEqual(gteLt.map((x) => x.id));
    // Negative and fractional numbers order numerically.
    const scores = all.filter((x) => x.score >= -1.5 && x.score < 2).sort((a, b) => a.score - b.score);
    expect(ids(await list('listing', 'filter[score][gte]=-1.5&filter[score][lt]=2&limit=100'))).toEqual(scores.map((x) => x.id));
    expect(ids(await list('listing', 'filter[score][lt]=0&limit=100'))).toEqual(all.filter((x) => x.score < 0).sort((a, b) => a.score - b.score).map((x) => x.id));
    // Two conditions that exclude each other.
    expect((await list('listing', 'filter[n][gt]=7&filter[n][lt]=3')).body.records).toEqual([]);
  });

  it('filters by a set with in, sorted by the field', async () => {
    const expected = all.filter((x) => [1, 5, 9].includes(x.n)).sort(byN);
    expect(ids(await list('listing', 'filter[n][in]=9,1,5&limit=100'))).toEqual(expected.map((x) => x.id));
    expect(ids(await list('listing', 'filter[n][in]=9,1,5&sort=-n&limit=100'))).toEqual([...expected].reverse().map((x) => x.id));
    expect(ids(await list('listing', 'filter[tag][in]=red,blue&limit=100'))).toEqual(
      all.filter((x) => x.tag !== 'green').sort((a, b) => (a.tag < b.tag ? -1 : a.tag > b.tag ? 1 : a.id < b.id ? -1 : 1)).map((x) => x.id),
    );
    expectError(await list('listing', `filter[n][in]=${Array.from({ length: 21 }, (_, i) => i).join(',')}`), 400, 'invalid_query');
  });

  it('sorts by an indexed field without a filter', async () => {
    expect(ids(await list('listing', 'sort=n&limit=100'))).toEqual([...all].sort(byN).map((x) => x.id));
    expect(ids(await list('listing', 'sort=-n&limit=100'))).toEqual([...all].sort(byN).reverse().map((x) => x.id));
  });

  it('finds text values of every script in open-ended ranges (UTF-8 order)', async () => {
    await putCollection('words', { fields: [{ name: 'w', type: 'text', indexed: true }] });
    for (const w of ['apple', 'zebra', 'ärger', '中文', 'ｚ', '😀 smile']) await create('words', { id: `w${Buffer.from(w).toString('hex').slice(0, 12)}`, w });
    const gte = await list('words', 'filter[w][gte]=b');
    expect(gte.body.records.map((r: any) => r.w)).toEqual(['zebra', 'ärger', '中文', 'ｚ', '😀 smile']);
    const gt = await list('words', `filter[w][gt]=${encodeURIComponent('中文')}`);
    expect(gt.body.records.map((r: any) => r.w)).toEqual(['ｚ', '😀 smile']);
    const desc = await list('words', 'filter[w][gte]=b&sort=-w');
    expect(desc.body.records.map((r: any) => r.w)).toEqual(['😀 smile', 'ｚ', '中文', 'ärger', 'zebra']);
    const lt = await list('words', `filter[w][lt]=${encodeURIComponent('😀')}`);
    expect(lt.body.records.map((r: any) => r.w)).toEqual(['apple', 'zebra', 'ärger', '中文', 'ｚ']);
    const set = await list('words', `filter[w][in]=${encodeURIComponent('😀 smile,ｚ,apple')}`);
    expect(set.body.records.map((r: any) => r.w)).toEqual(['apple', 'ｚ', '😀 smile']);
  });

  it('refuses filters and sorts on non-indexed fields, unknown parameters and bad values with invalid_query', async () => {
    for (const q of [
      'filter[plain]=p1',
      'filter[title]=hello',
      'filter[nope]=1',
      'filter[id]=r01',
      'sort=plain',
      'sort=-nope',
      'sort=',
      'unknown=1',
      'filter=1',
      'filter[n][ne]=1',
      'filter[n][gt][x]=1',
      'filter[n]=abc',
      'filter[n]=1.5',
      'filter[score]=',
      'filter[plain]=p1&sort=n',
      'filter[tag]=red&sort=plain',
      'offset=10',
    ]) {
      expectError(await list('listing', q), 400, 'invalid_query');
    }
  });

  it('refuses a tampered cursor with invalid_query', async () => {
    const first = await list('listing', 'limit=5');
    const cursor: string = first.body.next_cursor;
    // Cursors are sealed (test/api/cursors.test.ts tries every altered byte); these are forgeries.
    const tampered = [
      'garbage!!',
      'x',
      Buffer.from('not json').toString('base64url'),
      Buffer.from(JSON.stringify({ r: -1 })).toString('base64url'),
      Buffer.from(JSON.stringify({ r: 0, c: 'not-a-store-cursor!' })).toString('base64url'),
      cursor.slice(0, -2),
      `${cursor}AA`,
    ];
    for (const c of tampered) {
      expectError(await list('listing', `limit=5&cursor=${encodeURIComponent(c)}`), 400, 'invalid_query');
    }
    expect((await list('listing', `limit=5&cursor=${encodeURIComponent(cursor)}`)).status).toBe(200);
  });

  it('pages through every record exactly once with the cursor, in every order', async () => {
    for (const [query, expected] of [
      ['limit=7', all],
      ['limit=4&sort=-id', [...all].reverse()],
      ['limit=3&sort=n', [...all].sort(byN)],
      ['limit=6&sort=-n', [...all].sort(byN).reverse()],
      ['limit=2&filter[n][in]=0,4,8', all.filter((x) => [0, 4, 8].includes(x.n)).sort(byN)],
      ['limit=3&filter[n][in]=0,4,8&sort=-n', all.filter((x) => [0, 4, 8].includes(x.n)).sort(byN).reverse()],
      ['limit=2&filter[tag]=blue', all.filter((x) => x.tag === 'blue')],
      ['limit=3&filter[n][gte]=2&filter[n][lt]=6', all.filter((x) => x.n >= 2 && x.n < 6).sort(byN)],
      ['limit=4&q=text', all],
    ] as const) {
      const got = await listAll('listing', query);
      expect(got.records.map((x) => x.id), query).toEqual(expected.map((x: any) => x.id));
      expect(new Set(got.records.map((x) => x.id)).size, query).toBe(expected.length);
    }
  });

  it('searches fulltext fields with q: word prefixes, every term, any case', async () => {
    const search = async (q: string) => ids(await list('listing', `q=${encodeURIComponent(q)}&limit=100`));
    const expect_ = (pred: (x: any) => boolean) => all.filter(pred).map((x) => x.id);
    expect(await search('hello')).toEqual(expect_((x) => /hello/i.test(x.title)));
    expect(await search('hel')).toEqual(expect_((x) => /\bhel/i.test(x.title)));
    expect(await search('HEL wor')).toEqual(expect_((x) => /\bhel/i.test(x.title) && /\bwor/i.test(x.title)));
    expect(await search('wor')).toEqual(expect_((x) => /\bwor/i.test(x.title)));
    // A prefix of a word, not any substring: "orld" is inside "world" but starts no word.
    expect(await search('orld')).toEqual([]);
    // Terms may match in different fulltext fields.
    expect(await search('help odd')).toEqual(expect_((x) => x.title === 'help wanted' && x.body.startsWith('odd')));
    expect(await search('ünï')).toEqual(expect_((x) => x.body.startsWith('odd')));
    // Not a fulltext field.
    expect(await search('p1')).toEqual([]);
    // q combines with a filter.
    expect(ids(await list('listing', 'q=hello&filter[tag]=red&limit=100'))).toEqual(all.filter((x) => /hello/i.test(x.title) && x.tag === 'red').map((x) => x.id));
  });

  it('refuses q on a collection without fulltext fields', async () => {
    expectError(await list('nofulltext', 'q=hello'), 400, 'invalid_query');
  });
});

describe('rules with non-server credentials', () => {
  const RULES_DB = 'rules-db';
  let appServer: Record<string, string>;
  let pub: Record<string, string>;
  let pubKey: string;
  let alice: Record<string, string>;
  let bob: Record<string, string>;
  let aliceNote: any;
  let bobNote: any;
  let orphan: any;

  beforeAll(async () => {
    const t = new Tenants(p.engine.kv, () => Date.now());
    const app = await t.createApplication(p.credentials.workspace_id, 'notes', []);
    appServer = bearer((await t.createSecretKey(p.credentials.organization_id, app.id)).key);
    pubKey = (await new PublishableKeys(p.engine.kv, () => Date.now()).create(app.id, [ORIGIN])).key;
    pub = { ...bearer(pubKey), origin: ORIGIN };
    const mint = async (user_id: string) => {
      const r = await call(appServer, 'POST', '/v1/end-user-tokens', { user_id });
      expect(r.status).toBe(200);
      return bearer(r.body.token);
    };
    alice = await mint('alice');
    bob = await mint('bob');
    expect((await call(appServer, 'PUT', `/v1/databases/${RULES_DB}`)).status).toBe(201);
    await putCollection(
      'notes',
      {
        fields: [
          { name: 'owner', type: 'text', indexed: true },
          { name: 'text', type: 'text' },
        ],
        rules: { list: 'owner = @auth.id', view: 'owner = @auth.id', create: '@request.owner = @auth.id', update: 'owner = @auth.id', delete: null },
      },
      appServer,
      RULES_DB,
    );
    await putCollection('board', { mode: 'free', rules: { list: 'public', view: 'public', create: 'users', update: null, delete: '' } }, appServer, RULES_DB);
    await putCollection('members', { mode: 'free', rules: { list: 'users', view: 'users', create: 'public', update: 'users', delete: 'users' } }, appServer, RULES_DB);
    await putCollection('closed', { mode: 'free' }, appServer, RULES_DB);
    await create('closed', { id: 'c1', secret: true }, appServer, RULES_DB);
  });

  it('lets a user create as themselves (201) and refuses creating as someone else (403 forbidden)', async () => {
    aliceNote = await create('notes', { owner: 'alice', text: 'a1' }, alice, RULES_DB);
    expect(aliceNote.owner).toBe('alice');
    bobNote = await create('notes', { owner: 'bob', text: 'b1' }, bob, RULES_DB);
    expectError(await call(alice, 'POST', recs('notes', RULES_DB), { owner: 'bob', text: 'forged' }), 403, 'forbidden');
    expectError(await call(alice, 'POST', recs('notes', RULES_DB), { text: 'no owner' }), 403, 'forbidden');
    expectError(await call(pub, 'POST', recs('notes', RULES_DB), { owner: null, text: 'anon' }), 403, 'forbidden');
    orphan = await create('notes', { text: 'made by the server, no owner' }, appServer, RULES_DB);
    await create('notes', { owner: 'alice', text: 'a2' }, alice, RULES_DB);
  });

  it('filters lists by the list rule instead of refusing', async () => {
    const mine = await list('notes', 'limit=100', alice, RULES_DB);
    expect(mine.status).toBe(200);
    expect(mine.body.records.map((r: any) => r.owner)).toEqual(['alice', 'alice']);
    expect((await list('notes', 'limit=100', bob, RULES_DB)).body.records.map((r: any) => r.id)).toEqual([bobNote.id]);
    // Filtering on someone else's value gives an empty page, not 403.
    const theirs = await list('notes', 'filter[owner]=bob', alice, RULES_DB);
    expect(theirs.body).toEqual({ records: [], next_cursor: null });
    // A page can hold fewer records than asked for while the cursor goes on.
    const paged = await listAll('notes', 'limit=1', alice, RULES_DB);
    expect(paged.records.map((r) => r.owner)).toEqual(['alice', 'alice']);
    // A publishable key has no @auth.id: the rule matches nothing, not even records without an owner.
    expect((await list('notes', 'limit=100', pub, RULES_DB)).body.records).toEqual([]);
    expectError(await call(pub, 'GET', rec('notes', orphan.id, RULES_DB)), 404, 'record_not_found');
  });

  it("answers 404 record_not_found for a record the view rule hides, exactly like a missing one", async () => {
    expect((await call(alice, 'GET', rec('notes', aliceNote.id, RULES_DB))).body).toEqual(aliceNote);
    const hidden = await call(alice, 'GET', rec('notes', bobNote.id, RULES_DB));
    const missing = await call(alice, 'GET', rec('notes', 'no-such-note', RULES_DB));
    expectError(hidden, 404, 'record_not_found');
    expectError(missing, 404, 'record_not_found');
  });

  it("answers 403 forbidden to an update of someone else's record (found, rule false), 404 for a missing one", async () => {
    expectError(await call(alice, 'PATCH', rec('notes', bobNote.id, RULES_DB), { text: 'hacked' }), 403, 'forbidden');
    expect((await call(bob, 'GET', rec('notes', bobNote.id, RULES_DB))).body.text).toBe('b1');
    expectError(await call(alice, 'PATCH', rec('notes', 'no-such-note', RULES_DB), { text: 'x' }), 404, 'record_not_found');
    const own = await call(alice, 'PATCH', rec('notes', aliceNote.id, RULES_DB), { text: 'a1 edited' }, { 'if-match': '"1"' });
    expect([own.status, own.body.version, own.body.text]).toEqual([200, 2, 'a1 edited']);
    expectError(await call(pub, 'PATCH', rec('notes', orphan.id, RULES_DB), { text: 'x' }), 403, 'forbidden');
  });

  it('answers 403 forbidden to every delete when the delete rule is null, whether or not the record exists', async () => {
    expectError(await call(alice, 'DELETE', rec('notes', aliceNote.id, RULES_DB)), 403, 'forbidden');
    expectError(await call(alice, 'DELETE', rec('notes', bobNote.id, RULES_DB)), 403, 'forbidden');
    // docs/data/rules.md: a credential that can never pass is refused before any record is looked at.
    expectError(await call(alice, 'DELETE', rec('notes', 'no-such-note', RULES_DB)), 403, 'forbidden');
    expect((await call(alice, 'GET', rec('notes', aliceNote.id, RULES_DB))).status).toBe(200);
  });

  it('answers 403 forbidden for every action a closed (null) collection refuses, revealing no record', async () => {
    for (const cred of [alice, pub]) {
      expectError(await list('closed', '', cred, RULES_DB), 403, 'forbidden');
      expectError(await call(cred, 'GET', rec('closed', 'c1', RULES_DB)), 403, 'forbidden');
      expectError(await call(cred, 'GET', rec('closed', 'nothing', RULES_DB)), 403, 'forbidden');
      expectError(await call(cred, 'POST', recs('closed', RULES_DB), { a: 1 }), 403, 'forbidden');
      expectError(await call(cred, 'PATCH', rec('closed', 'c1', RULES_DB), { a: 1 }), 403, 'forbidden');
      expectError(await call(cred, 'PATCH', rec('closed', 'nothing', RULES_DB), { a: 1 }), 403, 'forbidden');
      expectError(await call(cred, 'DELETE', rec('closed', 'c1', RULES_DB)), 403, 'forbidden');
      expectError(await call(cred, 'DELETE', rec('closed', 'nothing', RULES_DB)), 403, 'forbidden');
    }
  });

  it('lets a publishable key list and view a public collection, but not create where the rule says users', async () => {
    const posted = await create('board', { msg: 'hi' }, alice, RULES_DB);
    const listed = await list('board', '', pub, RULES_DB);
    expect([listed.status, ids(listed)]).toEqual([200, [posted.id]]);
    expect((await call(pub, 'GET', rec('board', posted.id, RULES_DB))).body).toEqual(posted);
    expectError(await call(pub, 'POST', recs('board', RULES_DB), { msg: 'anon' }), 403, 'forbidden');
    expectError(await call(alice, 'PATCH', rec('board', posted.id, RULES_DB), { msg: 'edit' }), 403, 'forbidden');
    expectError(await call(alice, 'DELETE', rec('board', posted.id, RULES_DB)), 403, 'forbidden');
  });

  it('refuses the publishable key with 403 where the rule is users, and lets end users through', async () => {
    const made = await create('members', { who: 'anyone' }, pub, RULES_DB);
    expectError(await list('members', '', pub, RULES_DB), 403, 'forbidden');
    expectError(await call(pub, 'GET', rec('members', made.id, RULES_DB)), 403, 'forbidden');
    expectError(await call(pub, 'PATCH', rec('members', made.id, RULES_DB), { who: 'x' }), 403, 'forbidden');
    expectError(await call(pub, 'DELETE', rec('members', made.id, RULES_DB)), 403, 'forbidden');
    expect(ids(await list('members', '', bob, RULES_DB))).toEqual([made.id]);
    expect((await call(bob, 'PATCH', rec('members', made.id, RULES_DB), { who: 'bob' })).status).toBe(200);
    expect((await call(bob, 'DELETE', rec('members', made.id, RULES_DB))).status).toBe(204);
  });

  it('answers 404 collection_not_found to a non-server credential writing to a missing collection', async () => {
    expectError(await call(alice, 'POST', recs('ghost', RULES_DB), { a: 1 }), 404, 'collection_not_found');
    expectError(await call(pub, 'POST', recs('ghost', RULES_DB), { a: 1 }), 404, 'collection_not_found');
    expectError(await call(appServer, 'GET', coll('ghost', RULES_DB)), 404, 'collection_not_found');
  });

  it('refuses a publishable key without an allowed Origin and a secret key from a browser', async () => {
    expectError(await call(bearer(pubKey), 'GET', recs('board', RULES_DB)), 403, 'origin_not_allowed');
    expectError(await call({ ...bearer(pubKey), origin: 'https://evil.example' }, 'POST', recs('board', RULES_DB), { a: 1 }), 403, 'origin_not_allowed');
    expectError(await call({ ...appServer, origin: ORIGIN }, 'POST', recs('board', RULES_DB), { a: 1 }), 403, 'secret_key_in_browser');
  });

  it('lets server credentials bypass every rule', async () => {
    const forged = await create('notes', { owner: 'bob', text: 'by the server' }, appServer, RULES_DB);
    const all = await list('notes', 'limit=100', appServer, RULES_DB);
    expect(all.body.records.map((r: any) => r.id).sort()).toEqual([aliceNote.id, bobNote.id, orphan.id, forged.id, ...all.body.records.filter((r: any) => r.text === 'a2').map((r: any) => r.id)].sort());
    expect((await call(appServer, 'GET', rec('notes', bobNote.id, RULES_DB))).status).toBe(200);
    expect((await call(appServer, 'PATCH', rec('notes', bobNote.id, RULES_DB), { owner: 'carol' })).status).toBe(200);
    expect((await call(appServer, 'DELETE', rec('notes', bobNote.id, RULES_DB))).status).toBe(204);
    expect(ids(await list('closed', '', appServer, RULES_DB))).toEqual(['c1']);
    // The organization-wide key too (it sees the application's database).
    expect((await call(server, 'DELETE', rec('closed', 'c1', RULES_DB))).status).toBe(204);
  });
});
