/**
 * PATCH and DELETE without If-Match apply to whatever version is current, so
 * concurrent writers of one record must all succeed (the reference promises a retry on the new
 * version); with If-Match a lost race is still 409 version_conflict.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi } from '../helpers/data-api.js';

let p: TestPlatform;
const DB = 'contended';
const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>) =>
  callApi(p.urls.data, bearer(p.credentials.secret_key), method, `/v1/databases/${DB}${path}`, body, headers);

beforeAll(async () => {
  p = await startTestPlatform();
  expect((await callApi(p.urls.data, bearer(p.credentials.secret_key), 'PUT', `/v1/databases/${DB}`)).status).toBe(201);
  expect((await call('PUT', '/collections/counters', { fields: [{ name: 'n', type: 'integer' }, { name: 'by', type: 'text' }] })).status).toBeLessThan(300);
});
afterAll(async () => p?.close());

describe('concurrent writers of one record', () => {
  it('all succeed without If-Match (20 PATCHes at once, 3 rounds), each applied once', async () => {
    for (let round = 0; round < 3; round++) {
      const id = `c${round}`;
      expect((await call('POST', '/collections/counters/records', { id, n: 0 })).status).toBe(201);
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => call('PATCH', `/collections/counters/records/${id}`, { by: `w${i}` })));
      expect(answers.map((a) => a.status)).toEqual(Array(20).fill(200));
      // Every write landed on its own version: 1 (create) + 20.
      expect(new Set(answers.map((a) => a.body.version)).size).toBe(20);
      expect((await call('GET', `/collections/counters/records/${id}`)).body.version).toBe(21);
    }
  });

  it('DELETE without If-Match wins over concurrent PATCHes without a 409', async () => {
    expect((await call('POST', '/collections/counters/records', { id: 'd1', n: 0 })).status).toBe(201);
    const patches = Array.from({ length: 10 }, (_, i) => call('PATCH', '/collections/counters/records/d1', { by: `w${i}` }));
    const del = call('DELETE', '/collections/counters/records/d1');
    const answers = await Promise.all([...patches, del]);
    expect((await del).status).toBe(204);
    // A PATCH after the delete finds no record; none is a conflict or a 500.
    for (const a of answers.slice(0, 10)) expect([200, 404]).toContain(a.status);
    expect((await call('GET', '/collections/counters/records/d1')).status).toBe(404);
  });

  it('with If-Match, a lost race is still 409 version_conflict', async () => {
    expect((await call('POST', '/collections/counters/records', { id: 'm1', n: 0 })).status).toBe(201);
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => call('PATCH', '/collections/counters/records/m1', { by: `w${i}` }, { 'if-match': '"1"' })));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    expect(answers.filter((a) => a.status === 409 && a.body.error.code === 'version_conflict')).toHaveLength(9);
  });
});
