/**
 * A write to a missing collection creates it (free, server credentials) in the same
 * transaction as its records: all or none, so a create or batch that fails leaves no collection.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError } from '../helpers/data-api.js';

let p: TestPlatform;
const DB = 'implicit';
const call = (method: string, path: string, body?: unknown) => callApi(p.urls.data, bearer(p.credentials.secret_key), method, `/v1/databases/${DB}${path}`, body);

beforeAll(async () => {
  p = await startTestPlatform();
  expect((await callApi(p.urls.data, bearer(p.credentials.secret_key), 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
  expect((await call('POST', '/collections/known/records', { id: 'k1' })).status).toBe(201);
});
afterAll(async () => p?.close());

describe('implicit free collections', () => {
  it('are not left behind by a failed single create', async () => {
    expectError(await call('POST', '/collections/ghost1/records', '{"id":"a","n":1e400}'), 400, 'invalid_value');
    expectError(await call('GET', '/collections/ghost1'), 404, 'collection_not_found');
  });

  it('are not left behind by a failed batch', async () => {
    const r = await call('POST', '/batch', {
      ops: [
        { op: 'create', collection: 'ghost2', id: 'a', data: { n: 1 } },
        { op: 'update', collection: 'known', id: 'missing', data: { n: 2 } },
      ],
    });
    expectError(r, 404, 'record_not_found');
    expectError(await call('GET', '/collections/ghost2'), 404, 'collection_not_found');
  });

  it('are created with their first records, once, by concurrent writers', async () => {
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => call('POST', '/collections/fresh/records', { id: `r${i}`, i })));
    expect(answers.map((a) => a.status)).toEqual(Array(10).fill(201));
    const c = await call('GET', '/collections/fresh');
    expect(c.status).toBe(200);
    expect(c.body).toMatchObject({ name: 'fresh', mode: 'free', schema_version: 1 });
    const list = await call('GET', '/collections/fresh/records?limit=100');
    expect(list.body.records).toHaveLength(10);
  });

  it('still take a batch of 100 creates into a new collection', async () => {
    const ops = Array.from({ length: 100 }, (_, i) => ({ op: 'create', collection: 'hundred', id: `h${i}`, data: { i } }));
    const r = await call('POST', '/batch', { ops });
    expect(r.status, JSON.stringify(r.body).slice(0, 200)).toBe(200);
    expect((await call('GET', '/collections/hundred/records?limit=100')).body.records).toHaveLength(100);
  });
});
