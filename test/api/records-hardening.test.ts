/**
 * Data API hardening through the local server: index entries and unique
 * guards follow encoded keys (`-0` is `0`), user keys named like Object.prototype members survive
 * schema changes, and crafted list and activity cursors are refused with 400, never 500.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { encodeActivityCursor } from '../../lambdas/activity/listing.js';
import { callApi, expectError, ok, type Res } from '../helpers/data-api.js';

let p: TestPlatform;
let server: Record<string, string>;
const DB = 'hard';

const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) => callApi(p.urls.data, server, method, path, body, headers);
const coll = (name: string) => `/v1/databases/${DB}/collections/${name}`;
const recs = (name: string) => `${coll(name)}/records`;
const rec = (name: string, id: string) => `${recs(name)}/${encodeURIComponent(id)}`;
const ids = (r: Res) => r.body.records.map((x: any) => x.id);
const b64 = (s: string) => Buffer.from(s).toString('base64url');


beforeAll(async () => {
  p = await startTestPlatform();
  server = bearer(p.credentials.secret_key);
  await ok(call('PUT', `/v1/databases/${DB}`), 201);
});
afterAll(async () => p?.close());

describe('-0 in unique guards and index entries', () => {
  it('answers 409 unique_violation to -0 when 0 is taken, on create and update', async () => {
    await ok(call('PUT', coll('uniq'), { fields: [{ name: 'u', type: 'integer', unique: true }, { name: 'x', type: 'number', unique: true }] }), 201);
    await ok(call('POST', recs('uniq'), '{"id":"a","u":0,"x":0}'), 201);
    expectError(await call('POST', recs('uniq'), '{"id":"b","u":-0}'), 409, 'unique_violation');
    expectError(await call('POST', recs('uniq'), '{"id":"b","x":-0}'), 409, 'unique_violation');
    await ok(call('POST', recs('uniq'), '{"id":"b","u":1,"x":1}'), 201);
    expectError(await call('PATCH', rec('uniq', 'b'), '{"u":-0}'), 409, 'unique_violation');
    // The holder itself may write -0 over its 0 (the same key).
    expect(await ok(call('PATCH', rec('uniq', 'a'), '{"u":-0,"x":-0}'))).toMatchObject({ u: 0, x: 0, version: 2 });
    await ok(call('DELETE', rec('uniq', 'a')), 204);
    await ok(call('PATCH', rec('uniq', 'b'), '{"u":-0,"x":-0}'));
  });

  for (const mode of ['schema', 'free'] as const) {
    it(`keeps one index entry through 0 -> -0 -> 5 and none after a delete (${mode} collection)`, async () => {
      const name = `idx_${mode}`;
      await ok(call('PUT', coll(name), { mode, fields: [{ name: 'n', type: 'number', indexed: true }] }), 201);
      await ok(call('POST', recs(name), mode === 'free' ? '{"id":"r1","n":0,"free":-0}' : '{"id":"r1","n":0}'), 201);
      await ok(call('POST', recs(name), '{"id":"r2","n":3}'), 201);
      await ok(call('PATCH', rec(name, 'r1'), '{"n":-0}'));
      await ok(call('PATCH', rec(name, 'r1'), '{"n":5}'));
      expect(ids(await call('GET', `${recs(name)}?sort=n`))).toEqual(['r2', 'r1']);
      expect(ids(await call('GET', `${recs(name)}?sort=-n`))).toEqual(['r1', 'r2']);
      expect(ids(await call('GET', `${recs(name)}?filter[n][lte]=0`))).toEqual([]);
      await ok(call('DELETE', rec(name, 'r1')), 204);
      expect(ids(await call('GET', `${recs(name)}?sort=n`))).toEqual(['r2']);
      expect(ids(await call('GET', recs(name)))).toEqual(['r2']);
    });
  }
});

describe('user keys named like Object.prototype members', () => {
  const KEYS = ['constructor', 'valueOf', 'toString', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString'];
  const data = Object.fromEntries(KEYS.map((k, i) => [k, `v${i}`]));

  it('keeps them in a free collection after a field is dropped, and through a PATCH', async () => {
    await ok(call('PUT', coll('protos'), { mode: 'free', fields: [{ name: 'gone', type: 'text' }] }), 201);
    await ok(call('POST', recs('protos'), { id: 'p1', gone: 'x', other: 1, ...data }), 201);
    await ok(call('PUT', coll('protos'), { mode: 'free', fields: [] }));
    const got = await ok(call('GET', rec('protos', 'p1')));
    expect(got).toMatchObject({ other: 1, ...data });
    expect(got.gone).toBeUndefined();
    const patched = await ok(call('PATCH', rec('protos', 'p1'), { other: 2 }));
    expect(patched).toMatchObject({ other: 2, ...data });
    expect(await ok(call('GET', rec('protos', 'p1')))).toMatchObject({ other: 2, ...data });
    expect((await ok(call('GET', recs('protos')))).records[0]).toMatchObject({ other: 2, ...data });
    // __proto__ starts with "_": reserved, never stored.
    expectError(await call('PATCH', rec('protos', 'p1'), '{"__proto__":{"x":1}}'), 400, 'reserved_field');
  });

  it('treats a declared field named like a prototype member as absent when the record lacks it', async () => {
    await ok(call('PUT', coll('protofields'), {
      fields: [
        { name: 'valueOf', type: 'number', indexed: true },
        { name: 'constructor', type: 'text', unique: true },
        { name: 'toString', type: 'text', required: true },
      ],
    }), 201);
    // A required field named toString is still required.
    expectError(await call('POST', recs('protofields'), { id: 'q0' }), 400, 'missing_field');
    await ok(call('POST', recs('protofields'), { id: 'q1', toString: 'a' }), 201);
    await ok(call('POST', recs('protofields'), { id: 'q2', toString: 'b', valueOf: 2, constructor: 'c' }), 201);
    await ok(call('PATCH', rec('protofields', 'q1'), { toString: 'c' }));
    expect(ids(await call('GET', `${recs('protofields')}?sort=valueOf`))).toEqual(['q2']);
    expect(ids(await call('GET', `${recs('protofields')}?filter[valueOf][gte]=0`))).toEqual(['q2']);
    const got = await ok(call('GET', rec('protofields', 'q1')));
    expect(Object.keys(got).sort()).toEqual(['created_at', 'id', 'toString', 'updated_at', 'version']);
  });
});

describe('crafted cursors', () => {
  beforeAll(async () => {
    await ok(call('PUT', coll('paged'), { fields: [{ name: 'n', type: 'integer', indexed: true }] }), 201);
    for (let i = 0; i < 5; i++) await ok(call('POST', recs('paged'), { id: `p${i}`, n: i }), 201);
  });

  it('answers 400 invalid_query (param cursor) to every crafted records cursor, in every order', async () => {
    const inner = (v: unknown) => b64(JSON.stringify(v));
    const bad = [
      b64('{"k":1}'), b64('[]'), b64('null'), b64('1'), b64('"x"'), b64('{}'), 'not base64!', '%%%', 'x'.repeat(8000),
      inner({ r: '0' }), inner({ r: -1 }), inner({ r: 0.5 }), inner({ r: null }), inner({ r: 0, c: 1 }), inner({ r: 0, c: {} }), inner({ r: 0, c: [] }),
      inner({ r: 0, c: 'y'.repeat(5000) }), inner({ r: 0, x: 1 }), inner({ r: 1e300 }),
      // The store's own cursor inside: not an object of strings, or lacking the key.
      inner({ r: 0, c: inner({ k: 1 }) }), inner({ r: 0, c: inner({ sk: 1 }) }), inner({ r: 0, c: inner({ sk: {} }) }), inner({ r: 0, c: inner({ sk: true }) }),
      inner({ r: 0, c: inner({ sk: null }) }), inner({ r: 0, c: inner({ sk: ['a'] }) }), inner({ r: 0, c: inner({ pk: 'a' }) }), inner({ r: 0, c: inner([]) }),
      inner({ r: 0, c: inner(null) }), inner({ r: 0, c: inner({ pk: 1, sk: 'a', gsi1sk: 'b' }) }), inner({ r: 0, c: inner({ sk: 'z'.repeat(4000) }) }),
      inner({ r: 0, c: 'not base64!' }),
    ];
    const wrong: string[] = [];
    for (const query of ['', 'sort=-id', 'sort=n', 'sort=-n', 'filter[n][in]=1,2,3', 'filter[n][gte]=1']) {
      for (const cursor of bad) {
        const r = await call('GET', `${recs('paged')}?limit=2&${query ? `${query}&` : ''}cursor=${encodeURIComponent(cursor)}`);
        if (r.status !== 400 || r.body?.error?.code !== 'invalid_query' || r.body.error.param !== 'cursor') {
          wrong.push(`${query} ${Buffer.from(cursor.slice(0, 120), 'base64url').toString().slice(0, 80)} -> ${r.status} ${r.body?.error?.code}`);
        }
      }
    }
    expect(wrong).toEqual([]);
    // A real cursor still pages.
    const first = await ok(call('GET', `${recs('paged')}?limit=2&sort=n`));
    expect(ids(await call('GET', `${recs('paged')}?limit=2&sort=n&cursor=${encodeURIComponent(first.next_cursor)}`))).toEqual(['p2', 'p3']);
  });

  it('answers 400 invalid_query to activity cursors sealed with the server key but with odd contents', async () => {
    const callerKey = `${p.credentials.organization_id}/`;
    const q = { from: 0, to: Date.now() + 1000, kinds: null, file_sha256: null };
    const AFTER = `${String(Date.now()).padStart(15, '0')}#x`;
    const signed = (state: unknown) => encodeActivityCursor(p.engine.secret, state as never, callerKey);
    const bad = await Promise.all([
      signed({ q: { ...q, kinds: 5 }, after: AFTER }),
      signed({ q: { ...q, kinds: {} }, after: AFTER }),
      signed({ q: { ...q, kinds: { length: 2 } }, after: AFTER }),
      signed({ q: { ...q, kinds: 'record.write' }, after: AFTER }),
      signed({ q: { ...q, kinds: [1, 2] }, after: AFTER }),
      signed({ q: { ...q, kinds: [{}] }, after: AFTER }),
      signed({ q: { ...q, kinds: ['no.such.kind'] }, after: AFTER }),
      signed({ q: { ...q, kinds: [null] }, after: AFTER }),
      signed({ q: { ...q, file_sha256: 5 }, after: AFTER }),
      signed({ q: { ...q, file_sha256: {} }, after: AFTER }),
      signed({ q: { ...q, file_sha256: 'abc' }, after: AFTER }),
      signed({ q: { ...q, from: -5 }, after: AFTER }),
      signed({ q: { ...q, from: 10, to: 5 }, after: AFTER }),
      signed({ q: { ...q, from: '0' }, after: AFTER }),
      signed({ q, after: 5 }),
      signed({ q, after: '9' }),
      signed({ q, after: AFTER, extra: 1 }),
      signed({ q: { ...q, extra: 1 }, after: AFTER }),
      signed({ q, after: 'a'.repeat(2500) }),
      signed({ q: [], after: AFTER }),
      signed({ q: null, after: AFTER }),
      signed(null),
      signed([]),
      `${b64('{"k":1}')}.x`,
      'not-a-cursor',
    ]);
    const wrong: string[] = [];
    for (const cursor of bad) {
      const r = await callApi(p.urls.data, server, 'GET', `/v1/activity?cursor=${encodeURIComponent(cursor)}`);
      if (r.status !== 400 || r.body?.error?.code !== 'invalid_query' || r.body.error.param !== 'cursor') {
        wrong.push(`#${bad.indexOf(cursor)} -> ${r.status} ${r.body?.error?.code}`);
      }
    }
    expect(wrong).toEqual([]);
    // A well-formed one is taken.
    await ok(callApi(p.urls.data, server, 'GET', `/v1/activity?cursor=${encodeURIComponent(await signed({ q: { ...q, kinds: ['record.write'] }, after: AFTER }))}`));
  });
});
