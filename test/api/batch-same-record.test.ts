/**
 * What the reference already promises: two ops of a batch on one record are
 * `400 invalid_body`, whatever their kinds; `[create c1, update c1]` answered 404 record_not_found.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError } from '../helpers/data-api.js';

let p: TestPlatform;
const DB = 'pairs';
const call = (method: string, path: string, body?: unknown) => callApi(p.urls.data, bearer(p.credentials.secret_key), method, `/v1/databases/${DB}${path}`, body);

beforeAll(async () => {
  p = await startTestPlatform();
  expect((await callApi(p.urls.data, bearer(p.credentials.secret_key), 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
  expect((await call('POST', '/collections/notes/records', { id: 'old', n: 1 })).status).toBe(201);
});
afterAll(async () => p?.close());

describe('a batch with two ops on one record', () => {
  const pairs: [string, unknown[]][] = [
    ['create then update', [{ op: 'create', collection: 'notes', id: 'c1', data: { n: 1 } }, { op: 'update', collection: 'notes', id: 'c1', data: { n: 2 } }]],
    ['create then delete', [{ op: 'create', collection: 'notes', id: 'c1', data: { n: 1 } }, { op: 'delete', collection: 'notes', id: 'c1' }]],
    ['update then delete', [{ op: 'update', collection: 'notes', id: 'old', data: { n: 2 } }, { op: 'delete', collection: 'notes', id: 'old' }]],
    ['two creates', [{ op: 'create', collection: 'notes', id: 'c2', data: { n: 1 } }, { op: 'create', collection: 'notes', id: 'c2', data: { n: 2 } }]],
  ];
  for (const [name, ops] of pairs) {
    it(`is 400 invalid_body (${name}), and applies nothing`, async () => {
      const r = await call('POST', '/batch', { ops });
      expectError(r, 400, 'invalid_body');
      expect(r.body.error.message).toMatch(/same record/);
      expectError(await call('GET', '/collections/notes/records/c1'), 404, 'record_not_found');
      expect((await call('GET', '/collections/notes/records/old')).body).toMatchObject({ n: 1, version: 1 });
    });
  }

  it('one op on each of two records with one id in two collections is fine', async () => {
    const r = await call('POST', '/batch', { ops: [{ op: 'create', collection: 'notes', id: 'same', data: {} }, { op: 'create', collection: 'other', id: 'same', data: {} }] });
    expect(r.status).toBe(200);
  });
});
