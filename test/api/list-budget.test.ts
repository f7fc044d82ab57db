/**
 * A list page stops at a byte budget (LIST_PAGE_BYTES, below Lambda's 6 MB answer)
 * and returns a cursor that resumes at the first record left out, through the local server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi } from '../helpers/data-api.js';
import { LIST_PAGE_BYTES } from '../../lambdas/data/record-reads.js';
import { recordKey } from '../../lambdas/data/keys.js';

let p: TestPlatform;
let server: Record<string, string>;
const DB = 'budget';
const recs = (name: string) => `/v1/databases/${DB}/collections/${name}/records`;
const call = (method: string, path: string, body?: unknown) => callApi(p.urls.data, server, method, path, body);

/** Pages through `path` with raw fetches, returning each page's byte size and the ids in order. */
async function pages(path: string): Promise<{ sizes: number[]; ids: string[] }> {
  const sizes: number[] = [];
  const ids: string[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 100; i++) {
    const res = await fetch(`${p.urls.data}${path}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { headers: server });
    const text = await res.text();
    expect(res.status, text.slice(0, 300)).toBe(200);
    sizes.push(Buffer.byteLength(text));
    const body = JSON.parse(text);
    ids.push(...body.records.map((r: { id: string }) => r.id));
    cursor = body.next_cursor;
    if (!cursor) return { sizes, ids };
  }
  throw new Error('the cursor never ended');
}

beforeAll(async () => {
  p = await startTestPlatform();
  server = bearer(p.credentials.secret_key);
  expect((await call('PUT', `/v1/databases/${DB}`)).status).toBe(201);
  for (const name of ['large', 'inline']) {
    const r = await call('PUT', `/v1/databases/${DB}/collections/${name}`, { fields: [{ name: 'n', type: 'integer', indexed: true }, { name: 'text', type: 'text' }] });
    expect(r.status).toBe(201);
  }
  // 14 records of ~850 KB (bodies in the blob store) and 40 of ~250 KB (inline): 12 MB and 10 MB.
  for (let i = 0; i < 14; i++) expect((await call('POST', recs('large'), { id: `l${String(i).padStart(2, '0')}`, n: 100 - i, text: String(i % 10).repeat(850_000) })).status).toBe(201);
  for (let i = 0; i < 40; i++) expect((await call('POST', recs('inline'), { id: `i${String(i).padStart(2, '0')}`, n: 100 - i, text: 'é'.repeat(125_000) })).status).toBe(201);
}, 120_000);
afterAll(async () => p?.close());

describe('list byte budget', () => {
  for (const [name, count] of [['large', 14], ['inline', 40]] as const) {
    for (const order of ['', '&sort=n', '&sort=-n', '&filter[n][gte]=0']) {
      it(`keeps every page of ${name} records under the budget and pages through each record once (${order || 'id order'})`, async () => {
        const { sizes, ids } = await pages(`${recs(name)}?limit=100${order}`);
        expect(Math.max(...sizes)).toBeLessThanOrEqual(LIST_PAGE_BYTES + 4096);
        expect(sizes.length).toBeGreaterThan(3);
        const expected = Array.from({ length: count }, (_, i) => `${name[0]}${String(i).padStart(2, '0')}`);
        // Sorted by n (100 - i) ascending is the reverse of id order.
        expect(ids).toEqual(order === '&sort=n' || order === '&filter[n][gte]=0' ? [...expected].reverse() : expected);
      });
    }
  }

  it('measures records written before their size was stored', async () => {
    const key = (id: string) => recordKey(p.credentials.organization_id, DB, 'inline', id);
    for (let i = 0; i < 40; i++) {
      const item = await p.engine.kv.update({ key: key(`i${String(i).padStart(2, '0')}`), remove: ['size'] });
      expect([item.version, item.size]).toEqual([1, undefined]);
    }
    const { sizes, ids } = await pages(`${recs('inline')}?limit=100`);
    expect(Math.max(...sizes)).toBeLessThanOrEqual(LIST_PAGE_BYTES + 4096);
    expect(ids).toHaveLength(40);
  });

  it('still answers one record per page when one record alone nears the budget', async () => {
    const r = await call('GET', `${recs('large')}?limit=1`);
    expect(r.body.records).toHaveLength(1);
    expect(r.body.next_cursor).toEqual(expect.any(String));
  });
});
