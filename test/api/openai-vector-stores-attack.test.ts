/**
 * Attacks on the vector store routes (docs/plans/issue-38-openai-retrieval.md, section 3, items 4-5):
 * another organization's ids on every route (404 before any write), crafted ids and cursors, attribute
 * maps with prototype-named keys, -0, numbers JSON makes infinite and nesting, concurrent adds of one
 * file, interleaved adds and deletes, and a fast-check model of adds, deletes and batch cancels
 * against `file_counts`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import OpenAI from 'openai';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';
import { call, uploadFile, type Client } from '../helpers/knowledge-calls.js';

let w: OpenAiWorld;
let client: OpenAI;
let c: Client;
let other: { organizationId: string; key: string; client: OpenAI };
let otherC: Client;

beforeAll(async () => {
  w = await startOpenAiWorld();
  client = w.client;
  c = { url: w.p.urls.ai, key: w.p.credentials.secret_key };
  other = await w.otherOrganization();
  otherC = { url: w.p.urls.ai, key: other.key };
});

afterAll(async () => {
  await w?.close();
});

const colOf = (vsId: string) => `col_${vsId.slice(3)}`;
const note = (name: string, text = `${name}: the harbour ferry leaves at dawn.`) => uploadFile(c, Buffer.from(text, 'utf8'), name, 'text/plain');
/** A raw JSON body (numbers and keys JSON.stringify would not write). */
async function raw(cl: Client, method: string, path: string, body?: string) {
  const res = await fetch(`${cl.url}${path}`, { method, headers: { authorization: `Bearer ${cl.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body });
  return { status: res.status, body: (await res.json()) as any };
}
const settledStore = async (vsId: string) => {
  for (let i = 0; i < 200; i++) {
    const s = await client.vectorStores.retrieve(vsId);
    if (s.file_counts.in_progress === 0) return s;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('store not settled');
};

describe('another organization', () => {
  it('gets 404 for my store, files and batch on every route, and writes nothing', async () => {
    const vs = await client.vectorStores.create({ name: 'mine' });
    const file = await note('mine.txt');
    await client.vectorStores.files.createAndPoll(vs.id, { file_id: file, attributes: { a: 1 } }, { pollIntervalMs: 50 });
    const batch = await client.vectorStores.fileBatches.createAndPoll(vs.id, { file_ids: [file] }, { pollIntervalMs: 50 });
    const base = `/v1/vector_stores/${vs.id}`;
    const attempts: Array<[string, string, unknown?]> = [
      ['GET', base],
      ['POST', base, { name: 'stolen' }],
      ['DELETE', base],
      ['GET', `${base}/files`],
      ['POST', `${base}/files`, { file_id: file }],
      ['GET', `${base}/files/${file}`],
      ['POST', `${base}/files/${file}`, { attributes: { a: 2 } }],
      ['GET', `${base}/files/${file}/content`],
      ['DELETE', `${base}/files/${file}`],
      ['POST', `${base}/file_batches`, { file_ids: [file] }],
      ['GET', `${base}/file_batches/${batch.id}`],
      ['POST', `${base}/file_batches/${batch.id}/cancel`],
      ['GET', `${base}/file_batches/${batch.id}/files`],
      // The col_ form of the same id too.
      ['GET', `/v1/vector_stores/${colOf(vs.id)}`],
    ];
    for (const [method, path, body] of attempts) {
      const r = await call(otherC, method, path, body, { 'idempotency-key': `k-${Math.random().toString(36).slice(2, 12)}` });
      expect([r.status, r.body?.error?.code], `${method} ${path}`).toEqual([404, 'collection_not_found']);
    }
    // My file attached to their own store: the file is not theirs.
    const theirs = await other.client.vectorStores.create({ name: 'theirs' });
    await expect(other.client.vectorStores.files.create(theirs.id, { file_id: file })).rejects.toMatchObject({ status: 404, code: 'upload_not_found' });
    await expect(other.client.vectorStores.fileBatches.create(theirs.id, { file_ids: [file] })).rejects.toMatchObject({ status: 404, code: 'upload_not_found' });
    expect((await other.client.vectorStores.retrieve(theirs.id)).file_counts.total).toBe(0);
    // Mine is as it was.
    const mine = await client.vectorStores.retrieve(vs.id);
    expect(mine).toMatchObject({ name: 'mine', file_counts: { completed: 1, total: 1 } });
    expect((await client.vectorStores.files.retrieve(file, { vector_store_id: vs.id })).attributes).toEqual({ a: 1 });
  });
});

describe('crafted ids and cursors', () => {
  it('malformed, overlong and traversal ids are 404; bad cursors and limits 400', async () => {
    const vs = await client.vectorStores.create({ name: 'ids' });
    for (const id of ['vs_' + 'g'.repeat(32), 'vs_' + '0'.repeat(31), 'vs_..%2F..%2Fx', 'col_' + 'f'.repeat(33), 'x'.repeat(2000), '__proto__']) {
      const r = await call(c, 'GET', `/v1/vector_stores/${id}`);
      expect(r.status, id).toBe(404);
    }
    for (const batch of ['vsfb_' + 'z'.repeat(32), '__proto__', 'vsfb_' + '0'.repeat(32)]) {
      expect((await call(c, 'GET', `/v1/vector_stores/${vs.id}/file_batches/${batch}`)).status, batch).toBe(404);
    }
    expect((await call(c, 'GET', `/v1/vector_stores/${vs.id}/files/constructor`)).status).toBe(404);
    for (const q of ['after=vs_zzz', `after=${'a'.repeat(300)}`, 'limit=0', 'limit=101', 'limit=1e2', 'order=sideways', 'cursor=x']) {
      expect((await call(c, 'GET', `/v1/vector_stores?${q}`)).status, q).toBe(400);
    }
    for (const q of ['after=file-unknown0', 'filter=done', 'limit=-1']) {
      expect((await call(c, 'GET', `/v1/vector_stores/${vs.id}/files?${q}`)).status, q).toBe(400);
    }
    // Another organization's store id as a cursor is a position only: it shows nothing of theirs.
    const theirs = await other.client.vectorStores.create({ name: 'theirs' });
    const page = await client.vectorStores.list({ after: theirs.id, order: 'asc' });
    expect(page.data.every((s) => s.id !== theirs.id)).toBe(true);
  });
});

describe('attributes', () => {
  let vs: OpenAI.VectorStores.VectorStore;
  let file: string;
  beforeAll(async () => {
    vs = await client.vectorStores.create({ name: 'attributes' });
    file = await note('attrs.txt');
    await client.vectorStores.files.create(vs.id, { file_id: file });
  });
  const path = () => `/v1/vector_stores/${vs.id}/files/${file}`;

  it('prototype-named keys are data, kept and answered as given', async () => {
    const r = await raw(c, 'POST', path(), '{"attributes":{"__proto__":"p","constructor":1,"toString":true,"hasOwnProperty":"x"}}');
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(Object.keys(r.body.attributes).sort()).toEqual(['__proto__', 'constructor', 'hasOwnProperty', 'toString']);
    expect(r.body.attributes.constructor).toBe(1);
    const again = await raw(c, 'GET', path());
    expect(Object.getOwnPropertyDescriptor(again.body.attributes, '__proto__')?.value).toBe('p');
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    const meta = await raw(c, 'POST', `/v1/vector_stores/${vs.id}`, '{"metadata":{"__proto__":"m"}}');
    expect(meta.status).toBe(200);
    expect(Object.getOwnPropertyDescriptor(meta.body.metadata, '__proto__')?.value).toBe('m');
  });

  it('-0 is 0; numbers JSON parses as infinite, nesting, arrays, null values, too many or too long keys are 400', async () => {
    const zero = await raw(c, 'POST', path(), '{"attributes":{"n":-0,"big":1.7976931348623157e308,"tiny":5e-324}}');
    expect(zero.status).toBe(200);
    expect(zero.body.attributes).toEqual({ n: 0, big: 1.7976931348623157e308, tiny: 5e-324 });
    const bad = [
      '{"attributes":{"n":1e999}}',
      '{"attributes":{"n":-1e400}}',
      '{"attributes":{"a":{"b":{"c":1}}}}',
      '{"attributes":{"a":[1,2]}}',
      '{"attributes":{"a":null}}',
      `{"attributes":{"${'k'.repeat(65)}":1}}`,
      `{"attributes":{"k":"${'v'.repeat(513)}"}}`,
      `{"attributes":{${Array.from({ length: 17 }, (_, i) => `"k${i}":1`).join(',')}}}`,
      '{"attributes":{"":1}}',
      '{"attributes":[]}',
      `{"attributes":${'['.repeat(60)}${']'.repeat(60)}}`,
      '{}',
    ];
    for (const body of bad) {
      const r = await raw(c, 'POST', path(), body);
      expect(r.status, body.slice(0, 80)).toBe(400);
    }
    expect((await client.vectorStores.files.retrieve(file, { vector_store_id: vs.id })).attributes).toEqual({ n: 0, big: 1.7976931348623157e308, tiny: 5e-324 });
  });
});

describe('races', () => {
  it('concurrent adds of one file to one store make one item, and answer it alike', async () => {
    const vs = await client.vectorStores.create({ name: 'race' });
    const file = await note('race.txt');
    const answers = await Promise.all(Array.from({ length: 8 }, () => client.vectorStores.files.create(vs.id, { file_id: file })));
    expect(new Set(answers.map((a) => a.id))).toEqual(new Set([file]));
    expect((await call(c, 'GET', `/v1/collections/${colOf(vs.id)}`)).body.counts.total).toBe(1);
    const settled = await settledStore(vs.id);
    expect(settled.file_counts).toMatchObject({ completed: 1, total: 1 });
    expect(settled.usage_bytes).toBe(answers[0].usage_bytes);
  });

  it('interleaved adds and deletes leave counts, listing and bytes consistent', async () => {
    const vs = await client.vectorStores.create({ name: 'interleaved' });
    const files = [await note('i1.txt'), await note('i2.txt'), await note('i3.txt')];
    await Promise.all(files.map((f) => client.vectorStores.files.create(vs.id, { file_id: f })));
    await Promise.allSettled([
      ...files.map((f) => client.vectorStores.files.delete(f, { vector_store_id: vs.id })),
      ...files.map((f) => client.vectorStores.files.create(vs.id, { file_id: f })),
      ...files.map((f) => client.vectorStores.files.delete(f, { vector_store_id: vs.id })),
    ]);
    const store = await settledStore(vs.id);
    const listed = (await client.vectorStores.files.list(vs.id, { limit: 100 })).data;
    const native = (await call(c, 'GET', `/v1/collections/${colOf(vs.id)}`)).body;
    expect(store.file_counts.total).toBe(listed.length);
    expect(native.counts.total).toBe(listed.length);
    expect(store.usage_bytes).toBe(listed.reduce((n, f) => n + f.usage_bytes, 0));
  }, 30_000);
});

describe('a model of adds, deletes and batch cancels', () => {
  it('file_counts.total is the files the model holds, the listing and the collection agree', async () => {
    const files = await Promise.all(['m0', 'm1', 'm2', 'm3'].map((n) => note(`${n}.txt`)));
    const op = fc.oneof(
      fc.record({ kind: fc.constant('add' as const), file: fc.integer({ min: 0, max: 3 }) }),
      fc.record({ kind: fc.constant('delete' as const), file: fc.integer({ min: 0, max: 3 }) }),
      fc.record({ kind: fc.constant('cancel' as const), files: fc.uniqueArray(fc.integer({ min: 0, max: 3 }), { minLength: 1, maxLength: 4 }) }),
    );
    await fc.assert(
      fc.asyncProperty(fc.array(op, { minLength: 1, maxLength: 6 }), async (ops) => {
        const vs = await client.vectorStores.create({ name: 'model' });
        const held = new Set<number>();
        for (const o of ops) {
          if (o.kind === 'add') {
            await client.vectorStores.files.create(vs.id, { file_id: files[o.file] });
            held.add(o.file);
          } else if (o.kind === 'delete') {
            const r = await call(c, 'DELETE', `/v1/vector_stores/${vs.id}/files/${files[o.file]}`);
            expect(r.status).toBe(held.has(o.file) ? 200 : 404);
            held.delete(o.file);
          } else {
            const batch = await client.vectorStores.fileBatches.create(vs.id, { file_ids: o.files.map((i) => files[i]) });
            await client.vectorStores.fileBatches.cancel(batch.id, { vector_store_id: vs.id });
            for (const i of o.files) held.add(i);
          }
          const store = await client.vectorStores.retrieve(vs.id);
          expect(store.file_counts.total).toBe(held.size);
          const c1 = store.file_counts;
          expect(c1.in_progress + c1.completed + c1.failed + c1.cancelled).toBe(c1.total);
          const native = (await call(c, 'GET', `/v1/collections/${colOf(vs.id)}`)).body.counts;
          expect(native.total + c1.cancelled).toBe(held.size);
          const listed = (await client.vectorStores.files.list(vs.id, { limit: 100 })).data.map((f) => f.id).sort();
          expect(listed).toEqual([...held].map((i) => files[i]).sort());
        }
        await client.vectorStores.delete(vs.id);
      }),
      { numRuns: 8 },
    );
  }, 120_000);
});
