/**
 * Lists that filter on indexed fields and sort by another one or by created_at / updated_at
 * (docs/data/reference.md, "List records"; docs/decisions/list-queries.md): the sort's index drives,
 * the other filters sift the records read within the read budget, and the cursor resumes the scan
 * where a page stopped. On both engines: SQLite, and the AWS adapters on dynalite and s3rver.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer } from '../helpers/platform.js';
import { callApi, expectError, ok } from '../helpers/data-api.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { MAX_SCANNED } from '../../lambdas/data/record-reads.js';
import { collectionKey, recordKey } from '../../lambdas/data/keys.js';
import { backfillTimeKeys } from '../../lambdas/data/record-times.js';
import { runCommand } from '../../lambdas/admin/cli.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { startPlatform } from '../../lambdas/local/platform.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';

interface Running {
  url: string;
  key: string;
  org: string;
  engine: Engine;
  close(): Promise<void>;
}

const ENGINES: Record<string, () => Promise<Running>> = {
  embedded: async () => {
    const p = await startTestPlatform();
    return { url: p.urls.data, key: p.credentials.secret_key, org: p.credentials.organization_id, engine: p.engine, close: () => p.close() };
  },
  aws: async () => {
    const { engine, emulation } = await startAwsDataEngine('list-queries-aws');
    const tenants = new Tenants(engine.kv, () => engine.clock.now());
    const org = (await tenants.createOrganization('Lists')).id;
    await tenants.createWorkspace(org, 'default');
    const key = (await tenants.createSecretKey(org)).key;
    const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
    registerApiOrigins(platform.urls);
    return {
      url: platform.urls.data,
      key,
      org,
      engine,
      close: async () => {
        await platform.close();
        emulation.restore();
      },
    };
  },
};

for (const [engineName, start] of Object.entries(ENGINES)) describe(`on the ${engineName} engine`, () => {
let p: Running;
let server: Record<string, string>;
const DB = 'lists';
const recs = (name: string) => `/v1/databases/${DB}/collections/${name}/records`;
const call = (method: string, path: string, body?: unknown) => callApi(p.url, server, method, path, body);
const list = (name: string, query: string) => call('GET', `${recs(name)}?${query}`);

/** Follows next_cursor to the end: the ids in order and each page's length. */
async function listAll(name: string, query: string): Promise<{ ids: string[]; pages: number[] }> {
  const ids: string[] = [];
  const pages: number[] = [];
  let cursor: string | null = null;
  for (let i = 0; i < 200; i++) {
    const body = await ok(list(name, `${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`));
    ids.push(...body.records.map((r: { id: string }) => r.id));
    pages.push(body.records.length);
    cursor = body.next_cursor;
    if (!cursor) return { ids, pages };
  }
  throw new Error('the cursor never ended');
}

interface Product {
  id: string;
  price: number;
  in_stock: boolean;
  tag: string;
}
const products: Product[] = Array.from({ length: 30 }, (_, i) => ({
  id: `p${String(i).padStart(2, '0')}`,
  price: (i * 7) % 11,
  in_stock: i % 3 !== 0,
  tag: ['red', 'green', 'blue'][i % 4 === 0 ? 0 : i % 2 ? 1 : 2],
}));
const byPrice = (a: Product, b: Product) => a.price - b.price || (a.id < b.id ? -1 : 1);
const idsOf = (xs: Product[]) => xs.map((x) => x.id);

beforeAll(async () => {
  p = await start();
  server = bearer(p.key);
  await ok(call('PUT', `/v1/databases/${DB}`), 201);
  const fields = [
    { name: 'price', type: 'number', indexed: true },
    { name: 'in_stock', type: 'bool', indexed: true },
    { name: 'tag', type: 'text', indexed: true },
    { name: 'note', type: 'text' },
  ];
  await ok(call('PUT', `/v1/databases/${DB}/collections/products`, { fields }), 201);
  // 4 storage writes a create (the record, three index entries): 15 a batch.
  const ops = products.map(({ id, ...data }) => ({ op: 'create', collection: 'products', id, data: { ...data, note: 'n' } }));
  for (let i = 0; i < ops.length; i += 15) await ok(call('POST', `/v1/databases/${DB}/batch`, { ops: ops.slice(i, i + 15) }));
});
afterAll(async () => p?.close());

describe('filters on indexed fields with a sort on another', () => {
  it('answers "in stock, price 5 or more, dearest first" and pages it to the end at every limit', async () => {
    const expected = idsOf(products.filter((x) => x.price >= 5 && x.in_stock).sort(byPrice).reverse());
    expect(expected.length).toBeGreaterThan(5);
    const query = 'filter[price][gte]=5&filter[in_stock]=true&sort=-price';
    expect((await ok(list('products', `${query}&limit=100`))).records.map((r: Product) => r.id)).toEqual(expected);
    for (const limit of [1, 2, 3, 7]) expect((await listAll('products', `${query}&limit=${limit}`)).ids, `limit ${limit}`).toEqual(expected);
  });

  it('sorts by one field while filtering on two others, with sets and ranges', async () => {
    const expected = idsOf(products.filter((x) => x.in_stock && ['red', 'blue'].includes(x.tag) && x.price < 8).sort(byPrice));
    const query = 'filter[in_stock]=true&filter[tag][in]=red,blue&filter[price][lt]=8&sort=price';
    expect((await listAll('products', `${query}&limit=2`)).ids).toEqual(expected);
    // The sort's own field may be filtered too: it bounds the range the index is read in.
    const ranged = idsOf(products.filter((x) => x.tag === 'green' && x.price > 2 && x.price <= 9).sort(byPrice).reverse());
    expect((await listAll('products', 'filter[tag]=green&filter[price][gt]=2&filter[price][lte]=9&sort=-price&limit=3')).ids).toEqual(ranged);
  });

  it('sorts by id while filtering (the records themselves drive)', async () => {
    const expected = idsOf(products.filter((x) => x.tag === 'green' && !x.in_stock));
    expect((await listAll('products', 'filter[tag]=green&filter[in_stock]=false&sort=id&limit=1')).ids).toEqual(expected);
    expect((await listAll('products', 'filter[tag]=green&sort=-id&limit=4')).ids).toEqual(idsOf(products.filter((x) => x.tag === 'green')).reverse());
  });

  it('without a sort, is driven and ordered by the most selective filter: equality first', async () => {
    const expected = idsOf(products.filter((x) => x.tag === 'red' && x.price >= 3));
    expect((await listAll('products', 'filter[price][gte]=3&filter[tag]=red&limit=2')).ids).toEqual(expected);
  });

  it('refuses a filter or sort on a field that is not indexed: 400 invalid_query naming it', async () => {
    const r = await list('products', 'filter[note]=n&sort=price');
    expectError(r, 400, 'invalid_query');
    expect(r.body.error).toMatchObject({ param: 'filter[note]', message: expect.stringContaining('"note"') });
    expectError(await list('products', 'filter[price]=5&sort=note'), 400, 'invalid_query');
  });
});

describe('the read budget', () => {
  const COUNT = MAX_SCANNED + 200;
  beforeAll(async () => {
    await ok(call('PUT', `/v1/databases/${DB}/collections/many`, { fields: [{ name: 'n', type: 'integer', indexed: true }, { name: 'rare', type: 'bool', indexed: true }] }), 201);
    // 3 storage writes a create: 33 a batch. The two rare records sort last by n.
    const all = Array.from({ length: COUNT }, (_, i) => ({ op: 'create', collection: 'many', id: `m${String(i).padStart(4, '0')}`, data: { n: i, rare: i === 3 || i >= COUNT - 2 } }));
    for (let i = 0; i < all.length; i += 33) await ok(call('POST', `/v1/databases/${DB}/batch`, { ops: all.slice(i, i + 33) }));
  }, 60_000);

  it('stops a page after MAX_SCANNED records read, with a cursor that resumes the scan', async () => {
    const first = await ok(list('many', 'filter[rare]=true&sort=n&limit=5'));
    // The first match is early; the others lie past the budget: a short page and a cursor.
    expect(first.records.map((r: { id: string }) => r.id)).toEqual(['m0003']);
    expect(first.next_cursor).toEqual(expect.any(String));
    const { ids, pages } = await listAll('many', 'filter[rare]=true&sort=n&limit=5');
    expect(ids).toEqual(['m0003', `m${COUNT - 2}`, `m${COUNT - 1}`]);
    expect(pages).toEqual([1, 2]);
    // Descending: the two last records first, then a page that reads past the budget with nothing.
    const desc = await listAll('many', 'filter[rare]=true&sort=-n&limit=2');
    expect(desc.ids).toEqual([`m${COUNT - 1}`, `m${COUNT - 2}`, 'm0003']);
  });
});

describe('sorts by created_at and updated_at', () => {
  type Stamped = { id: string; created_at: string; updated_at: string; in_stock: boolean };
  const byTime = (k: 'created_at' | 'updated_at') => (a: Stamped, b: Stamped) => (a[k] < b[k] ? -1 : a[k] > b[k] ? 1 : a.id < b.id ? -1 : 1);
  let stamped: Stamped[];
  beforeAll(async () => {
    await ok(call('PUT', `/v1/databases/${DB}/collections/timed`, { fields: [{ name: 'in_stock', type: 'bool', indexed: true }, { name: 'n', type: 'integer' }, { name: 'big', type: 'text' }] }), 201);
    // Ids against creation order, so that time order is not id order; a few large records (their bodies in the blob store).
    for (let i = 0; i < 12; i++) await ok(call('POST', recs('timed'), { id: `t${String(20 - i).padStart(2, '0')}`, in_stock: i % 2 === 0, n: i, ...(i % 5 === 0 ? { big: 'x'.repeat(320_000) } : {}) }), 201);
    for (const id of ['t17', 't12', 't19']) await ok(call('PATCH', `${recs('timed')}/${id}`, { n: 99 }));
    stamped = (await ok(list('timed', 'limit=100'))).records.map(({ id, created_at, updated_at, in_stock }: Stamped) => ({ id, created_at, updated_at, in_stock }));
    expect(stamped).toHaveLength(12);
  }, 30_000);

  it('pages through every record once in creation order, both ways', async () => {
    const expected = [...stamped].sort(byTime('created_at')).map((x) => x.id);
    expect(expected).not.toEqual([...expected].sort());
    expect((await listAll('timed', 'sort=created_at&limit=1')).ids).toEqual(expected);
    expect((await listAll('timed', 'sort=-created_at&limit=5')).ids).toEqual([...expected].reverse());
  });

  it('orders by the last write with updated_at, filtered on an indexed field', async () => {
    const latest = [...stamped].sort(byTime('updated_at')).reverse();
    expect(latest.slice(0, 3).map((x) => x.id)).toEqual(['t19', 't12', 't17']);
    expect((await listAll('timed', 'sort=-updated_at&limit=2')).ids).toEqual(latest.map((x) => x.id));
    expect((await listAll('timed', 'filter[in_stock]=true&sort=-updated_at&limit=2')).ids).toEqual(latest.filter((x) => x.in_stock).map((x) => x.id));
  });

  it('leaves a deleted record out', async () => {
    await ok(call('DELETE', `${recs('timed')}/t20`), 204);
    expect((await listAll('timed', 'sort=created_at&limit=3')).ids).toEqual([...stamped].sort(byTime('created_at')).map((x) => x.id).filter((id) => id !== 't20'));
  });

  it('refuses a time sort on a collection whose records predate the time indexes, until they are backfilled', async () => {
    await ok(call('PUT', `/v1/databases/${DB}/collections/older`, { fields: [{ name: 'n', type: 'integer', indexed: true }] }), 201);
    // A collection created before records carried their time keys (a PUT that creates a collection
    // leaves it out of the collection cache: the next read sees the change), and two records written then.
    await p.engine.kv.update({ key: collectionKey(p.org, DB, 'older'), remove: ['time_keys'] });
    const ids = ['o3', 'o1', 'o2'];
    for (const [n, id] of ids.entries()) await ok(call('POST', recs('older'), { id, n }), 201);
    for (const id of ids.slice(0, 2)) await p.engine.kv.update({ key: recordKey(p.org, DB, 'older', id), remove: ['gsi1pk', 'gsi1sk', 'gsi2pk', 'gsi2sk'] });
    const r = await list('older', 'sort=created_at');
    expectError(r, 400, 'invalid_query');
    expect(r.body.error).toMatchObject({ param: 'sort', message: expect.stringContaining('backfill') });
    expect((await ok(list('older', 'sort=id'))).records.map((x: { id: string }) => x.id)).toEqual(['o1', 'o2', 'o3']);
    expectError(await list('timed', 'filter[created_at][gte]=2020-01-01T00:00:00Z'), 400, 'invalid_query');

    // What `admin collection backfill-times` runs; a second run finds nothing left to do.
    expect(await runCommand(p.engine, ['collection', 'backfill-times', '--org', p.org, '--database', DB, '--collection', 'older'])).toEqual({ records: 3, updated: 2 });
    expect(await backfillTimeKeys(p.engine, p.org, DB, 'older')).toEqual({ records: 3, updated: 0 });
    await expect(backfillTimeKeys(p.engine, p.org, DB, 'nope')).rejects.toMatchObject({ code: 'collection_not_found' });
    // Past the collection cache's second, the collection says its records are all indexed.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    expect((await listAll('older', 'sort=created_at&limit=2')).ids).toEqual(ids);
    expect((await listAll('older', 'filter[n][gte]=1&sort=-updated_at&limit=1')).ids).toEqual(['o2', 'o1']);
  });
});
});
