/**
 * Collection items' routes as a hostile or careless client uses them, through the local server
 * (docs/ai/collections.md): malformed, oversized, deep and prototype-named bodies, numbers and strings
 * at and past their limits, crafted item ids, chunk ids and cursors, other workspaces' and
 * organizations' ids, keys without the capability and the organization's switch, a local_vectors
 * client storing wrong vectors, and clients racing each other: adds, deletes, re-processing and
 * vectors at once, and a collection deleted while its items are processed. Every answer is the
 * spec's status and code, never a 5xx or a stack trace, and nothing of a removed item is left.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, fakeVector, FAKE_DIMENSIONS, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { postBytes, sendBytes, type Answer } from '../helpers/ai-calls.js';
import { addItem, call, createCollection, op, post, query, settledCollection, settledItem, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { markdownFile, paragraphs } from '../helpers/knowledge-files.js';
import { waitFor } from '../helpers/wait.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { createVectorDatabase, readDatabase } from '../../lambdas/vector/databases.js';
import { itemsPk, PROCESSING_PARTITION, vectorMarksPk } from '../../lambdas/knowledge/collection-keys.js';
import { TransactionCanceledError } from '../../lambdas/engine/errors.js';
import { collectionScope } from '../../lambdas/knowledge/chunk-index.js';
import { useSettings } from '../../lambdas/shared/settings.js';

let p: TestPlatform;
let embedder: FakeEmbedder;
let c: Client;
let org: string;
let workspace: string;
const tenants = () => new Tenants(p.engine.kv, () => p.engine.clock.now());
const MiB = 1024 * 1024;

/** Any request with the path sent byte for byte and any body bytes (fetch would normalize both). */
function send(method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}, k = c.key): Promise<Answer> {
  const all: Record<string, string> = { authorization: `Bearer ${k}`, ...(method === 'GET' ? {} : { 'x-operation-id': op() }), ...headers };
  if (body !== undefined) all['content-type'] ??= 'application/json';
  return sendBytes(method, c.url, body, all, false, path);
}

/** The spec's error shape and nothing else: no 5xx, no stack trace, no credential echoed. */
function refused(a: { status: number; text: string; body: any }, status: number, code: string, param?: string) {
  expect(a.status, a.text.slice(0, 300)).toBe(status);
  expect(a.body?.error?.code, a.text.slice(0, 300)).toBe(code);
  if (param !== undefined) expect(a.body.error.param).toBe(param);
  expect(a.text).not.toMatch(/\bat .+\.(ts|js|mjs):\d+/);
  expect(a.text).not.toContain(c.key);
}

const itemPath = (col: string, item: string, rest = '') => `/v1/collections/${col}/items/${item}${rest}`;

/** Every blob of the collection in the engine's blob store (the embedded store keeps a file per key). */
function collectionBlobs(col: string): string[] {
  const root = join(p.dataDir, 'blobs', 'objects', 'knowledge.d');
  if (!existsSync(root)) return [];
  return (readdirSync(root, { recursive: true }) as string[]).filter((f) => f.includes(`${col}.d`) && f.endsWith('.blob'));
}

/** The processing sweep's entries of the collection. */
async function leaseEntries(col: string): Promise<string[]> {
  const all = await p.engine.kv.query({ pk: PROCESSING_PARTITION, limit: 1000 });
  return all.items.map((e) => String(e.sk)).filter((sk) => sk.includes(`#${col}#`));
}

/** Entries of the workspace database's index with the collection's scope, whatever the item records say. */
async function indexedEntries(col: string): Promise<string[]> {
  const database = (await readDatabase(p.engine, workspace))!;
  const hits = await p.engine.vectors.query(database.index, { vector: Float32Array.from(fakeVector('anything at all')), topK: 100, filter: { scope: collectionScope(col) } });
  return hits.map((h) => h.key);
}

async function doneItem(col: string, body: object): Promise<any> {
  const added = await addItem(c, col, body);
  expect(added.status, added.text).toBe(202);
  const item = await settledItem(c, col, added.body.item_id);
  expect(item.status, JSON.stringify(item.error)).toBe('done');
  return item;
}

beforeAll(async () => {
  p = await startTestPlatform();
  embedder = await startFakeEmbedder();
  org = p.credentials.organization_id;
  workspace = p.credentials.workspace_id;
  c = { url: p.urls.ai, key: p.credentials.secret_key };
  await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 5_000, default: true });
  await createVectorDatabase(p.engine, workspace, 'emb');
});

afterAll(async () => {
  await embedder?.close();
  await p?.close();
});

describe('bodies', () => {
  let cloud: string;
  let item: any;
  const deep = (levels: number) => '{"a":'.repeat(levels - 1) + '{}' + '}'.repeat(levels - 1);

  beforeAll(async () => {
    cloud = await createCollection(c, 'cloud');
    item = await doneItem(cloud, { text: 'Gannets dive for fish off the northern stacks.', filename: 'gannets.txt' });
  });

  it('malformed JSON, the wrong JSON type or nothing at all is 400 invalid_body on every route with a body', async () => {
    const routes: [string, string][] = [
      ['POST', `/v1/collections/${cloud}/items`],
      ['POST', `/v1/collections/${cloud}/query`],
      ['PUT', itemPath(cloud, item.item_id, '/vectors')],
    ];
    for (const [method, path] of routes) {
      for (const body of ['{', '{"query":', '[]', '"text"', 'null', '7', 'true', '{"a":1,}', '\u00ef\u00bb\u00bf{}', 'NaN']) {
        const a = await send(method, path, body);
        expect([path, body, a.status, a.body?.error?.code]).toEqual([path, body, 400, 'invalid_body']);
      }
    }
    for (const body of ['{', '[]', '7']) refused(await send('POST', itemPath(cloud, item.item_id, '/reprocess'), body), 400, 'invalid_body');
  });

  it('wrong types and shapes name the field', async () => {
    const add = (body: string) => send('POST', `/v1/collections/${cloud}/items`, body);
    refused(await add('{"upload_id":5}'), 400, 'invalid_body', 'upload_id');
    refused(await add('{"upload_id":""}'), 400, 'invalid_body', 'upload_id');
    refused(await add('{"upload_id":null}'), 400, 'invalid_body', 'upload_id');
    refused(await add('{"text":5,"filename":"a.txt"}'), 400, 'invalid_body', 'text');
    refused(await add('{"text":["a"],"filename":"a.txt"}'), 400, 'invalid_body', 'text');
    refused(await add('{"text":"","filename":"a.txt"}'), 400, 'invalid_body', 'text');
    refused(await add('{"text":"a"}'), 400, 'invalid_body', 'filename');
    refused(await add('{"text":"a","filename":{"name":"a"}}'), 400, 'invalid_body', 'filename');
    refused(await add('{"text":"a","filename":"a.txt","content_type":"not a type"}'), 400, 'invalid_body', 'content_type');
    refused(await add('{"upload_id":"u","text":"a","filename":"a.txt"}'), 400, 'invalid_body', 'upload_id');
    refused(await add('{}'), 400, 'invalid_body');
    const q = (body: string) => send('POST', `/v1/collections/${cloud}/query`, body);
    refused(await q('{}'), 400, 'invalid_body', 'query');
    refused(await q('{"query":5}'), 400, 'invalid_body', 'query');
    refused(await q('{"query":["x"]}'), 400, 'invalid_body', 'query');
    refused(await q('{"query":"   \\n\\t "}'), 400, 'invalid_body', 'query');
    const v = (body: string) => send('PUT', itemPath(cloud, item.item_id, '/vectors'), body);
    refused(await v('{}'), 400, 'invalid_body', 'vectors');
    refused(await v('{"vectors":{}}'), 400, 'invalid_body', 'vectors');
    refused(await v('{"vectors":[]}'), 400, 'invalid_body', 'vectors');
    refused(await v('{"vectors":[5]}'), 400, 'invalid_body', 'vectors.0');
    refused(await v('{"vectors":[{"chunk_id":0,"vector":[1]}]}'), 400, 'invalid_body', 'vectors.0.chunk_id');
    refused(await v('{"vectors":[{"chunk_id":"chk_000000","vector":"1,2"}]}'), 400, 'invalid_body', 'vectors.0.vector');
    refused(await v('{"vectors":[{"chunk_id":"chk_000000"}]}'), 400, 'invalid_body', 'vectors.0.vector');
  });

  it('unknown fields, prototype-named ones included, are 400 unsupported_field naming them', async () => {
    const add = (body: string) => send('POST', `/v1/collections/${cloud}/items`, body);
    refused(await add('{"text":"a","filename":"a.txt","tags":["x"]}'), 400, 'unsupported_field', 'tags');
    refused(await add('{"text":"a","filename":"a.txt","__proto__":{"upload_id":"u"}}'), 400, 'unsupported_field', '__proto__');
    refused(await add('{"text":"a","filename":"a.txt","constructor":{"prototype":{}}}'), 400, 'unsupported_field', 'constructor');
    refused(await add('{"upload_id":"u","__proto__":null}'), 400, 'unsupported_field', '__proto__');
    const q = (body: string) => send('POST', `/v1/collections/${cloud}/query`, body);
    refused(await q('{"query":"x","filter":{"kind":"a"}}'), 400, 'unsupported_field', 'filter');
    refused(await q('{"query":"x","__proto__":{"top_k":50}}'), 400, 'unsupported_field', '__proto__');
    refused(await q('{"query":"x","constructor":1}'), 400, 'unsupported_field', 'constructor');
    const v = (body: string) => send('PUT', itemPath(cloud, item.item_id, '/vectors'), body);
    refused(await v('{"vectors":[{"chunk_id":"chk_000000","vector":[1]}],"package_id":"p"}'), 400, 'unsupported_field', 'package_id');
    refused(await v('{"vectors":[{"chunk_id":"chk_000000","vector":[1],"__proto__":{}}]}'), 400, 'unsupported_field', 'vectors.0.__proto__');
    refused(await v('{"__proto__":{"vectors":[]},"vectors":[{"chunk_id":"chk_000000","vector":[1]}]}'), 400, 'unsupported_field', '__proto__');
    const r = (body: string) => send('POST', itemPath(cloud, item.item_id, '/reprocess'), body);
    refused(await r('{"force":true}'), 400, 'unsupported_field', 'force');
    refused(await r('{"__proto__":{}}'), 400, 'unsupported_field', '__proto__');
    // Nothing above added an item or re-processed one.
    expect((await call(c, 'GET', `/v1/collections/${cloud}`)).body.counts).toMatchObject({ total: 1, done: 1 });
    expect((await call(c, 'GET', itemPath(cloud, item.item_id))).body.package_id).toBe(item.package_id);
  });

  it('nesting past the chain\'s depth, even 100,000 levels, is 400 invalid_body', async () => {
    const routes: [string, string][] = [
      ['POST', `/v1/collections/${cloud}/items`],
      ['POST', `/v1/collections/${cloud}/query`],
      ['PUT', itemPath(cloud, item.item_id, '/vectors')],
      ['POST', itemPath(cloud, item.item_id, '/reprocess')],
    ];
    for (const [method, path] of routes) refused(await send(method, path, deep(65)), 400, 'invalid_body');
    for (const [method, path] of routes.slice(0, 3)) refused(await send(method, path, `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}`), 400, 'invalid_body');
    // Deep but within the chain's limit: the route's own refusal.
    refused(await send('POST', `/v1/collections/${cloud}/query`, `{"query":"x","vector":${'['.repeat(60)}${']'.repeat(60)}}`), 400, 'invalid_body', 'vector');
  });

  it("each route's body limit: exactly at it is read, one byte more is 413 request_too_large", async () => {
    const pad = (head: string, total: number) => head.slice(0, -1) + ' '.repeat(total - Buffer.byteLength(head)) + '}';
    const cases: [string, string, string, number][] = [
      ['POST', `/v1/collections/${cloud}/items`, '{"text":"padded add","filename":"pad.txt"}', 4 * MiB],
      ['POST', `/v1/collections/${cloud}/query`, '{"query":"padded query"}', 256 * 1024],
      ['PUT', itemPath(cloud, item.item_id, '/vectors'), '{"vectors":[{"chunk_id":"chk_000000","vector":[1]}]}', 5 * MiB],
      ['POST', itemPath(cloud, item.item_id, '/reprocess'), '{}', 1024],
    ];
    for (const [method, path, head, limit] of cases) {
      const exact = pad(head, limit);
      expect(Buffer.byteLength(exact)).toBe(limit);
      const at = await send(method, path, exact);
      expect([path, at.status]).not.toEqual([path, 413]);
      expect(at.status, at.text).toBeLessThan(500);
      refused(await send(method, path, `${exact} `), 413, 'request_too_large');
    }
    await settledCollection(c, cloud);
  });

  it('inline text: 1 MiB as UTF-8 is taken, one byte more is 400 naming text', async () => {
    const col = await createCollection(c, 'download');
    const text = 'é '.repeat(Math.floor(MiB / 3)) + 'x';
    expect(Buffer.byteLength(text)).toBe(MiB);
    const ok = await addItem(c, col, { text, filename: 'big.txt' });
    expect(ok.status, ok.text).toBe(202);
    refused(await addItem(c, col, { text: `${text}x`, filename: 'big.txt' }), 400, 'invalid_body', 'text');
    expect((await settledItem(c, col, ok.body.item_id, 60_000)).status).toBe('done');
  }, 90_000);
});

describe('numbers and strings at their limits', () => {
  let cloud: string;

  beforeAll(async () => {
    cloud = await createCollection(c, 'cloud');
    await doneItem(cloud, { text: 'Kittiwakes nest on narrow ledges above the sea.', filename: 'kittiwakes.txt' });
  });

  const rawQuery = (col: string, fields: string) => send('POST', `/v1/collections/${col}/query`, `{"query":"kittiwakes nest",${fields}}`);

  it('top_k is a whole number from 1 to 20: 0, 21, 1.5, "5", -0, 1e400, true and "NaN" are 400; null is the default', async () => {
    for (const topK of ['0', '21', '1.5', '"5"', '-0', '-1', '1e400', '-1e400', 'true', '"NaN"', '[5]', '20.000000001']) {
      const a = await rawQuery(cloud, `"top_k":${topK}`);
      expect([topK, a.status, a.body?.error?.code, a.body?.error?.param]).toEqual([topK, 400, 'invalid_body', 'top_k']);
    }
    for (const topK of ['1', '20', '20.0', '2e1', 'null']) {
      const a = await rawQuery(cloud, `"top_k":${topK}`);
      expect([topK, a.status]).toEqual([topK, 200]);
    }
  });

  it('a query of 8,000 code points is answered, 8,001 is 400 (counted in code points, not UTF-16 units)', async () => {
    expect((await query(c, cloud, { query: 'k'.repeat(8000) })).status).toBe(200);
    expect((await query(c, cloud, { query: '🐦'.repeat(8000) })).status).toBe(200);
    refused(await query(c, cloud, { query: 'k'.repeat(8001) }), 400, 'invalid_body', 'query');
    refused(await query(c, cloud, { query: '🐦'.repeat(8001) }), 400, 'invalid_body', 'query');
  });

  it('a lone surrogate in a query is 400; a whole pair is a character', async () => {
    refused(await send('POST', `/v1/collections/${cloud}/query`, '{"query":"kittiwakes \\ud800 nest"}'), 400, 'invalid_body', 'query');
    refused(await send('POST', `/v1/collections/${cloud}/query`, '{"query":"\\udc00"}'), 400, 'invalid_body', 'query');
    expect((await send('POST', `/v1/collections/${cloud}/query`, '{"query":"kittiwakes \\ud83d\\udc26"}')).status).toBe(200);
  });

  it('a `vector` on a cloud collection is 400: a cloud collection embeds the query itself', async () => {
    refused(await query(c, cloud, { query: 'kittiwakes', vector: fakeVector('kittiwakes') }), 400, 'invalid_body', 'vector');
  });

  it('a query vector that is not 1 to 4,096 finite numbers, not all zero, is 400', async () => {
    const col = await createCollection(c, 'local_vectors');
    for (const vector of ['[]', '[0,0,0]', '[-0,0]', '[1e400]', '[1e39]', '["1"]', '["NaN"]', '[null]', '[1,[2]]', '{"0":1}', '"1,2"', `[${new Array(4097).fill(1).join(',')}]`]) {
      const a = await send('POST', `/v1/collections/${col}/query`, `{"query":"x","vector":${vector}}`);
      expect([vector.slice(0, 20), a.status, a.body?.error?.code, a.body?.error?.param]).toEqual([vector.slice(0, 20), 400, 'invalid_body', 'vector']);
    }
    refused(await query(c, col, { query: 'x' }), 400, 'invalid_body', 'vector');
    // Tiny components are directions too; -0 beside them is 0.
    expect((await send('POST', `/v1/collections/${col}/query`, '{"query":"x","vector":[-0,5e-324,1e-30]}')).status).toBe(200);
    expect((await send('POST', `/v1/collections/${col}/query`, `{"query":"x","vector":[${new Array(4096).fill(0.5).join(',')}]}`)).status).toBe(200);
  });
});

describe('filenames and text', () => {
  let col: string;

  beforeAll(async () => {
    col = await createCollection(c, 'download');
  });

  const raw = (body: string) => send('POST', `/v1/collections/${col}/items`, body);

  it('a filename of 1 to 255 characters without control characters or slashes is taken; others are 400 naming filename', async () => {
    for (const name of ['', 'x'.repeat(256), 'a\u0000b', 'line\nbreak', 'tab\t.txt', 'del\u007f.txt', 'a/b.txt', '../../etc/passwd', '/']) {
      refused(await addItem(c, col, { text: 'x', filename: name }), 400, 'invalid_body', 'filename');
    }
    for (const name of ['x'.repeat(255), '..', '.', 'é文🐱.md', 'a\\b.txt', '%2e%2e', ' spaced ', '\u202egnp.exe']) {
      const a = await addItem(c, col, { text: 'taken', filename: name });
      expect([name, a.status, a.body.filename]).toEqual([name, 202, name]);
      expect((await call(c, 'GET', itemPath(col, a.body.item_id))).body.filename).toBe(name);
    }
  });

  it('lone surrogates in text are 400 naming text', async () => {
    refused(await raw('{"text":"half \\ud800 a pair","filename":"a.txt"}'), 400, 'invalid_body', 'text');
    refused(await raw('{"text":"\\udfff","filename":"a.txt"}'), 400, 'invalid_body', 'text');
  });

  // A lone surrogate is not Unicode: DynamoDB and S3 store it as U+FFFD, so the item would name another file on AWS than locally.
  it('lone surrogates in a filename or a content type are 400 naming the field', async () => {
    refused(await raw('{"text":"x","filename":"half\\ud800.txt"}'), 400, 'invalid_body', 'filename');
    refused(await raw('{"text":"x","filename":"\\udc00"}'), 400, 'invalid_body', 'filename');
    refused(await raw('{"text":"x","filename":"a.txt","content_type":"text/plain; name=\\ud800"}'), 400, 'invalid_body', 'content_type');
    // An upload's filename becomes its item's.
    const upload = await postBytes(`${c.url}/v1/uploads`, `{"filename":"half\\ud800.txt","content_type":"text/plain","size":3,"sha256":"${'a'.repeat(64)}"}`, { authorization: `Bearer ${c.key}`, 'content-type': 'application/json', 'x-operation-id': op() });
    refused(upload, 400, 'invalid_body', 'filename');
    const pair = await raw('{"text":"x","filename":"pair\\ud83d\\udc31.txt"}');
    expect([pair.status, pair.body.filename]).toEqual([202, 'pair🐱.txt']);
  });

  it('a text that is one word of 200,000 characters (an inlined blob, CJK without sentence ends) is processed in seconds, not minutes', async () => {
    // Each piece of such a word was counted from 16 characters a token: 200,000 letters of a token each held the processor 25 s (7 s now).
    const started = Date.now();
    const a = await addItem(c, col, { text: 'é'.repeat(200_000), filename: 'one-word.txt' });
    expect(a.status, a.text).toBe(202);
    const item = await settledItem(c, col, a.body.item_id, 60_000);
    expect(item.status).toBe('done');
    expect(Date.now() - started).toBeLessThan(15_000);
  }, 90_000);

  it('a text that claims to be a PDF, a DOCX, audio or video fails with its reason, never stuck', async () => {
    const ids: string[] = [];
    for (const type of ['application/pdf', 'application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'audio/mpeg', 'video/mp4', 'image/png', 'application/zip']) {
      const a = await addItem(c, col, { text: '%PDF-1.7 PK\u0003\u0004 ID3 ftypmp42 not what it says', filename: 'liar.bin', content_type: type });
      expect([type, a.status]).toEqual([type, 202]);
      ids.push(a.body.item_id);
    }
    for (const id of ids) {
      const item = await settledItem(c, col, id);
      expect([item.content_type, item.status]).toEqual([item.content_type, 'failed']);
      expect(['unsupported_type', 'parse_error', 'empty_text']).toContain(item.error.code);
    }
  });

  it('control characters, NULs and odd whitespace in text end in a final state, never a stuck or 5xx item', async () => {
    const texts = ['\u0000'.repeat(100), 'bell\u0007 and \u001b[31m escape', '\r\n\r\n\u000b\u000c', 'a\u2028b\u2029c', '\ufeffbom first', '\u0000 binary-ish \u0001\u0002'];
    const ids: string[] = [];
    for (const text of texts) {
      const a = await addItem(c, col, { text, filename: 'odd.txt' });
      expect(a.status, a.text).toBe(202);
      ids.push(a.body.item_id);
    }
    for (const id of ids) {
      const item = await settledItem(c, col, id);
      expect(['done', 'failed']).toContain(item.status);
      if (item.status === 'failed') expect(['empty_text', 'unsupported_type', 'parse_error']).toContain(item.error.code);
    }
  });
});

describe('crafted ids, other tenants and cursors', () => {
  let col: string;
  let other: string;
  let item: any;
  let otherItem: any;

  beforeAll(async () => {
    col = await createCollection(c, 'local_vectors');
    other = await createCollection(c, 'local_vectors');
    item = await doneItem(col, { text: markdownFile(), filename: 'guide.md' });
    otherItem = await doneItem(other, { text: 'A private note in the other collection.', filename: 'private.txt' });
    for (let i = 0; i < 4; i++) await doneItem(col, { text: `Filler item ${i}.`, filename: `filler-${i}.txt` });
  });

  /** The item routes of `col`/`id`, as method, path and body. */
  const itemRoutes = (colId: string, id: string): [string, string, string | undefined][] => [
    ['GET', itemPath(colId, id), undefined],
    ['DELETE', itemPath(colId, id), undefined],
    ['POST', itemPath(colId, id, '/reprocess'), '{}'],
    ['GET', itemPath(colId, id, '/chunks'), undefined],
    ['GET', itemPath(colId, id, '/package'), undefined],
    ['PUT', itemPath(colId, id, '/vectors'), JSON.stringify({ vectors: [{ chunk_id: 'chk_000000', vector: fakeVector('x') }] })],
  ];

  it('crafted item ids, and another collection\'s item, are 404 item_not_found on every item route', async () => {
    const crafted = ['..', '%2e%2e', '.', '__proto__', 'constructor', 'prototype', 'itm_', `itm_${'0'.repeat(32)}`, item.item_id.toUpperCase(), `${item.item_id}%00`, `${item.item_id}x`, ` ${item.item_id}`.replace(' ', '%20'), 'x'.repeat(2000), '%E0%A4%A', '%FF', otherItem.item_id];
    for (const id of crafted) {
      for (const [method, path, body] of itemRoutes(col, id)) {
        const a = await send(method, path, body);
        expect(a.status, `${method} ${path.slice(0, 120)}: ${a.text.slice(0, 200)}`).toBeLessThan(500);
        expect([method, id.slice(0, 40), a.status, a.body?.error?.code]).toEqual([method, id.slice(0, 40), 404, expect.stringMatching(/^(item_not_found|not_found)$/)]);
        expect(a.text).not.toContain('private note');
      }
    }
    // The other collection's item is still there, whole.
    expect((await call(c, 'GET', itemPath(other, otherItem.item_id))).body).toMatchObject({ status: 'done', package_id: otherItem.package_id });
  });

  it('crafted collection ids are 404 collection_not_found on every item route and the query', async () => {
    for (const id of ['..', '__proto__', 'constructor', `col_${'0'.repeat(32)}`, col.toUpperCase(), `${col}x`, '%00']) {
      for (const [method, path, body] of [...itemRoutes(id, item.item_id), ['GET', `/v1/collections/${id}/items`, undefined], ['POST', `/v1/collections/${id}/items`, '{"text":"x","filename":"x.txt"}'], ['POST', `/v1/collections/${id}/query`, '{"query":"x"}']] as [string, string, string | undefined][]) {
        const a = await send(method, path, body);
        expect([method, path.slice(0, 100), a.status, a.body?.error?.code]).toEqual([method, path.slice(0, 100), 404, expect.stringMatching(/^(collection_not_found|not_found)$/)]);
      }
    }
  });

  it("another workspace's or organization's key gets 404 for this collection's items, and never its data", async () => {
    const ws = await tenants().createWorkspace(org, 'elsewhere');
    const app = await tenants().createApplication(ws.id, 'elsewhere', ['knowledge']);
    const elsewhere = (await tenants().createSecretKey(org, app.id)).key;
    const stranger = (await tenants().createSecretKey((await tenants().createOrganization('stranger')).id)).key;
    for (const k of [elsewhere, stranger]) {
      for (const [method, path, body] of [...itemRoutes(col, item.item_id), ['GET', `/v1/collections/${col}/items`, undefined], ['POST', `/v1/collections/${col}/items`, '{"text":"x","filename":"x.txt"}'], ['POST', `/v1/collections/${col}/query`, `{"query":"x","vector":${JSON.stringify(fakeVector('x'))}}`]] as [string, string, string | undefined][]) {
        const a = await send(method, path, body, {}, k);
        expect([method, path, a.status, a.body?.error?.code]).toEqual([method, path, 404, 'collection_not_found']);
        expect(a.text).not.toContain('Install');
        expect(a.text).not.toContain(k);
      }
    }
    // An upload of another workspace is not this one's to add.
    const foreign = await uploadFile({ url: c.url, key: elsewhere }, Buffer.from('foreign bytes'), 'foreign.txt', 'text/plain');
    refused(await addItem(c, col, { upload_id: foreign }), 404, 'upload_not_found');
    refused(await addItem(c, col, { upload_id: '__proto__' }), 404, 'upload_not_found');
    // An upload of this workspace that is not complete yet.
    const pending = op();
    const started = await post(c, '/v1/uploads', { filename: 'half.txt', content_type: 'text/plain', size: 10, sha256: 'a'.repeat(64) }, pending);
    expect(started.status, started.text).toBe(201);
    refused(await addItem(c, col, { upload_id: pending }), 409, 'upload_incomplete');
    expect((await call(c, 'GET', itemPath(col, item.item_id))).body).toMatchObject({ status: 'done', package_id: item.package_id });
    expect((await call(c, 'GET', `/v1/collections/${col}`)).body.counts.total).toBe(5);
  });

  it('item listing cursors: replayed gives the same page; tampered, truncated, another collection\'s or a chunks cursor is 400 invalid_cursor', async () => {
    const first = await call(c, 'GET', `/v1/collections/${col}/items?limit=2`);
    expect(first.body.data).toHaveLength(2);
    const cursor: string = first.body.next_cursor;
    expect(cursor).toEqual(expect.any(String));
    const page = (cur: string, colId = col) => send('GET', `/v1/collections/${colId}/items?limit=2&cursor=${cur}`);
    const once = await page(cursor);
    expect(once.status).toBe(200);
    expect((await page(cursor)).body.data).toEqual(once.body.data);
    expect(once.body.data.map((i: any) => i.item_id)).not.toContain(first.body.data[0].item_id);
    const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);
    const chunksCursor = (await call(c, 'GET', itemPath(col, item.item_id, '/chunks?limit=1'))).body.next_cursor;
    expect(chunksCursor).toEqual(expect.any(String));
    for (const bad of [flip(cursor, 0), flip(cursor, cursor.length >> 1), flip(cursor, cursor.length - 1), cursor.slice(0, -4), `${cursor}AAAA`, 'A'.repeat(8000), '%FF%FE', encodeURIComponent('{"p":"x"}'), chunksCursor]) {
      refused(await page(bad), 400, 'invalid_cursor');
    }
    refused(await page(cursor, other), 400, 'invalid_cursor');
    for (const limit of ['0', '101', '1.5', '-0', '-1', 'abc', '1e1', '']) refused(await send('GET', `/v1/collections/${col}/items?limit=${limit}`), 400, 'invalid_field', 'limit');
    refused(await send('GET', `/v1/collections/${col}/items?limit=1&__proto__=x`), 400, 'unsupported_field', '__proto__');
    refused(await send('GET', `/v1/collections/${col}/items?status=done`), 400, 'unsupported_field', 'status');
  });

  it("chunk cursors are bound to the item and its package: another item's, or the old package's after a re-processing, is 400 invalid_cursor", async () => {
    const first = await call(c, 'GET', itemPath(col, item.item_id, '/chunks?limit=1'));
    expect(first.body.data).toHaveLength(1);
    const cursor: string = first.body.next_cursor;
    const second = await call(c, 'GET', itemPath(col, item.item_id, `/chunks?limit=1&cursor=${cursor}`));
    expect(second.status).toBe(200);
    expect(second.body.data[0].chunk_id).toBe('chk_000001');
    refused(await send('GET', itemPath(other, otherItem.item_id, `/chunks?limit=1&cursor=${cursor}`)), 400, 'invalid_cursor');
    refused(await send('GET', `/v1/collections/${col}/items?cursor=${cursor}`), 400, 'invalid_cursor');
    for (const limit of ['0', '501', '2.5', 'x']) refused(await send('GET', itemPath(col, item.item_id, `/chunks?limit=${limit}`)), 400, 'invalid_field', 'limit');
    refused(await send('GET', itemPath(col, item.item_id, '/chunks?offset=3')), 400, 'unsupported_field', 'offset');
    const again = await post(c, itemPath(col, item.item_id, '/reprocess'), {});
    expect(again.status, again.text).toBe(202);
    await waitFor('the new package', async () => (await call(c, 'GET', itemPath(col, item.item_id))).body.package_id !== item.package_id, 20_000);
    item = await settledItem(c, col, item.item_id);
    refused(await send('GET', itemPath(col, item.item_id, `/chunks?limit=1&cursor=${cursor}`)), 400, 'invalid_cursor');
  });
});

describe('keys without the capability, and the organization\'s switch', () => {
  let col: string;
  let item: any;

  beforeAll(async () => {
    col = await createCollection(c, 'local_vectors');
    item = await doneItem(col, { text: 'Shags dry their wings on the rocks.', filename: 'shags.txt' });
  });

  const routes = (): [string, string, string | undefined][] => [
    ['POST', `/v1/collections/${col}/items`, '{"text":"x","filename":"x.txt"}'],
    ['GET', `/v1/collections/${col}/items`, undefined],
    ['GET', itemPath(col, item.item_id), undefined],
    ['DELETE', itemPath(col, item.item_id), undefined],
    ['POST', itemPath(col, item.item_id, '/reprocess'), '{}'],
    ['GET', itemPath(col, item.item_id, '/chunks'), undefined],
    ['GET', itemPath(col, item.item_id, '/package'), undefined],
    ['PUT', itemPath(col, item.item_id, '/vectors'), JSON.stringify({ vectors: [{ chunk_id: 'chk_000000', vector: fakeVector('x') }] })],
    ['POST', `/v1/collections/${col}/query`, JSON.stringify({ query: 'shags', vector: fakeVector('shags') })],
  ];

  it('an application key without `knowledge` is 403 capability_not_enabled on every item route and the query', async () => {
    const app = await tenants().createApplication(workspace, 'no-knowledge', ['ai.chat'] as never);
    const k = (await tenants().createSecretKey(org, app.id)).key;
    for (const [method, path, body] of routes()) {
      const a = await send(method, path, body, {}, k);
      expect([method, path, a.status, a.body?.error?.code]).toEqual([method, path, 403, 'capability_not_enabled']);
    }
  });

  it('`org features --disable collections` is 403 collections_disabled on every item route, whatever the ids; the item is kept', async () => {
    const settings = new AiOrgSettings(p.engine.kv, () => p.engine.clock.now());
    await settings.setFeatures(org, { disable: ['collections'] });
    try {
      for (const [method, path, body] of [...routes(), ['GET', itemPath(col, 'nothing'), undefined], ['POST', '/v1/collections/nothing/query', '{"query":"x"}'], ['PUT', itemPath('nothing', 'nothing', '/vectors'), '{"vectors":[]}']] as [string, string, string | undefined][]) {
        const a = await send(method, path, body);
        expect([method, path, a.status, a.body?.error?.code]).toEqual([method, path, 403, 'collections_disabled']);
      }
    } finally {
      await settings.setFeatures(org, { enable: ['collections'] });
    }
    expect((await call(c, 'GET', itemPath(col, item.item_id))).body).toMatchObject({ status: 'done', package_id: item.package_id });
  });
});

describe('local_vectors: vectors a careless client stores', () => {
  let col: string;
  let item: any;
  let chunks: any[];
  const put = (vectors: object[], colId = col, id = item.item_id) => call(c, 'PUT', itemPath(colId, id, '/vectors'), { vectors });
  const putRaw = (body: string, colId = col, id = item.item_id) => send('PUT', itemPath(colId, id, '/vectors'), body);

  beforeAll(async () => {
    col = await createCollection(c, 'local_vectors');
    item = await doneItem(col, { text: markdownFile(), filename: 'guide.md' });
    chunks = (await call(c, 'GET', itemPath(col, item.item_id, '/chunks?limit=500'))).body.data;
    expect(chunks.length).toBeGreaterThan(2);
  });

  it('the first vectors fix the dimensions; other dimensions after that, or mixed in one call, are 400', async () => {
    const first = await put([{ chunk_id: chunks[0].chunk_id, vector: fakeVector(chunks[0].text) }]);
    expect([first.status, first.body.vectors_stored]).toEqual([200, 1]);
    refused(await put([{ chunk_id: chunks[1].chunk_id, vector: fakeVector(chunks[1].text, 16) }]), 400, 'invalid_body', 'vectors.0.vector');
    refused(await put([{ chunk_id: chunks[1].chunk_id, vector: fakeVector(chunks[1].text, FAKE_DIMENSIONS + 1) }]), 400, 'invalid_body', 'vectors.0.vector');
    refused(await put([{ chunk_id: chunks[1].chunk_id, vector: fakeVector(chunks[1].text) }, { chunk_id: chunks[2].chunk_id, vector: fakeVector(chunks[2].text, 16) }]), 400, 'invalid_body', 'vectors.1.vector');
    refused(await query(c, col, { query: 'x', vector: fakeVector('x', 16) }), 400, 'invalid_body', 'vector');
    expect((await call(c, 'GET', itemPath(col, item.item_id))).body.vectors_stored).toBe(1);
  });

  it('all-zero, 4,097 dimensions, non-finite, 501 vectors, duplicated or unknown chunk ids are 400 and store nothing', async () => {
    const zero = new Array(FAKE_DIMENSIONS).fill(0);
    refused(await put([{ chunk_id: chunks[1].chunk_id, vector: zero }]), 400, 'invalid_body', 'vectors.0.vector');
    refused(await putRaw(`{"vectors":[{"chunk_id":"${chunks[1].chunk_id}","vector":[${new Array(FAKE_DIMENSIONS).fill('-0').join(',')}]}]}`), 400, 'invalid_body', 'vectors.0.vector');
    refused(await put([{ chunk_id: chunks[1].chunk_id, vector: new Array(4097).fill(1) }]), 400, 'invalid_body', 'vectors.0.vector');
    for (const bad of ['1e400', '1e39', '"NaN"', 'null', '"Infinity"']) {
      const vector = [bad, ...new Array(FAKE_DIMENSIONS - 1).fill('1')].join(',');
      refused(await putRaw(`{"vectors":[{"chunk_id":"${chunks[1].chunk_id}","vector":[${vector}]}]}`), 400, 'invalid_body', 'vectors.0.vector');
    }
    refused(await put(Array.from({ length: 501 }, (_, i) => ({ chunk_id: `chk_${String(i).padStart(6, '0')}`, vector: fakeVector(`v${i}`) }))), 400, 'invalid_body', 'vectors');
    refused(await put([{ chunk_id: chunks[1].chunk_id, vector: fakeVector('a') }, { chunk_id: chunks[1].chunk_id, vector: fakeVector('b') }]), 400, 'invalid_body', 'vectors.1.chunk_id');
    for (const chunkId of ['__proto__', 'constructor', 'chk_', 'chk_99999', 'CHK_000000', 'chk_000000 ', 'chk_٠٠٠٠٠٠', '']) {
      refused(await put([{ chunk_id: chunkId, vector: fakeVector('a') }]), 400, 'invalid_body', 'vectors.0.chunk_id');
    }
    // Well-formed but not a chunk of the package: the whole call is refused, the good entry with it.
    refused(await put([{ chunk_id: chunks[1].chunk_id, vector: fakeVector(chunks[1].text) }, { chunk_id: 'chk_999999', vector: fakeVector('a') }]), 400, 'invalid_body', 'vectors.1.chunk_id');
    refused(await put([{ chunk_id: `chk_${'0'.repeat(5000)}`, vector: fakeVector('a') }]), 400, 'invalid_body', 'vectors.0.chunk_id');
    expect((await call(c, 'GET', itemPath(col, item.item_id))).body.vectors_stored).toBe(1);
  });

  it('vectors whose count keeps colliding with other calls answer 503 service_unavailable, and sending them again counts them once', async () => {
    const kv = p.engine.kv;
    const transact = kv.transact.bind(kv);
    // As DynamoDB cancels a transaction that meets another on the same items, every time.
    kv.transact = async (writes, ...rest) => {
      if (writes.some((w) => 'put' in w && String(w.put.pk).startsWith('kvec#'))) throw new TransactionCanceledError([0]);
      return transact(writes, ...rest);
    };
    const vectors = chunks.slice(0, 2).map((ch) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) }));
    let busy: Awaited<ReturnType<typeof call>>;
    try {
      busy = await put(vectors);
    } finally {
      kv.transact = transact;
    }
    expect([busy.status, busy.body.error.code, busy.headers.get('retry-after')]).toEqual([503, 'service_unavailable', '1']);
    const again = await put(vectors);
    expect(again.status, again.text).toBe(200);
    // Each chunk counted once: the count is the marks', whatever was sent twice.
    const marks = await p.engine.kv.query({ pk: vectorMarksPk(org, workspace, col, item.item_id, item.package_id), limit: 1000 });
    expect(again.body.vectors_stored).toBe(marks.items.length);
    expect(marks.items.map((m) => m.sk)).toEqual(expect.arrayContaining(vectors.map((v) => v.chunk_id)));
  });

  it('vectors on a cloud or download collection are 409 mode_not_supported', async () => {
    const cloud = await createCollection(c, 'cloud');
    const download = await createCollection(c, 'download');
    for (const other of [cloud, download]) {
      const done = await doneItem(other, { text: 'Razorbills share the ledges with guillemots.', filename: 'r.txt' });
      refused(await put([{ chunk_id: 'chk_000000', vector: fakeVector('razorbills') }], other, done.item_id), 409, 'mode_not_supported');
    }
  });

  it('vectors for a queued or failed item are 409 item_not_ready', async () => {
    const own = await createCollection(c, 'local_vectors');
    const failed = await addItem(c, own, { text: '\u0000\u0001 binary', filename: 'blob.bin', content_type: 'application/octet-stream' });
    expect((await settledItem(c, own, failed.body.item_id)).status).toBe('failed');
    refused(await put([{ chunk_id: 'chk_000000', vector: fakeVector('x') }], own, failed.body.item_id), 409, 'item_not_ready');
    refused(await send('GET', itemPath(own, failed.body.item_id, '/package')), 409, 'item_not_ready');
    refused(await send('GET', itemPath(own, failed.body.item_id, '/chunks')), 409, 'item_not_ready');
    // A megabyte of prose takes a while to chunk: the PUT finds the item still queued or processing.
    const slow = await addItem(c, own, { text: paragraphs(1200, 12).join('\n\n').slice(0, MiB - 10), filename: 'slow.txt' });
    expect(slow.status, slow.text).toBe(202);
    refused(await put([{ chunk_id: 'chk_000000', vector: fakeVector('x') }], own, slow.body.item_id), 409, 'item_not_ready');
    refused(await send('GET', itemPath(own, slow.body.item_id, '/chunks')), 409, 'item_not_ready');
    await settledItem(c, own, slow.body.item_id, 60_000);
  });

  it('many PUTs of the same chunks at once count each chunk once', async () => {
    const all = chunks.map((ch) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) }));
    // Every call its own order of the same chunks, so each call's marks collide with others' in every group.
    const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => put(i % 2 ? [...all].reverse() : all.slice(i % all.length).concat(all.slice(0, i % all.length)))));
    for (const a of answers) expect([a.status, a.text.slice(0, 200)]).toEqual([200, expect.any(String)]);
    const now = (await call(c, 'GET', itemPath(col, item.item_id))).body;
    expect(now.vectors_stored).toBe(chunks.length);
    const r = await query(c, col, { query: 'apt', vector: fakeVector('Use apt.') });
    expect(r.body.indexing).toMatchObject({ skipped_chunks: 0 });
    expect(r.body.matches[0].citation).toMatchObject({ item_id: item.item_id, locator: 'heading=Install > Linux > Debian' });
  });

  it('many PUTs of overlapping chunk sets at once never fail on each other, and count each chunk once', async () => {
    const own = await createCollection(c, 'local_vectors');
    const sections = Array.from({ length: 40 }, (_, i) => `# Section ${i}\n\nLine ${i} about fulmars.`).join('\n\n');
    const many = await doneItem(own, { text: sections, filename: 'sections.md' });
    const list = (await call(c, 'GET', itemPath(own, many.item_id, '/chunks?limit=500'))).body.data;
    expect(list.length).toBe(40);
    // Call i stores chunks i..i+5: each shares five chunks with the call before and the call after.
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => call(c, 'PUT', itemPath(own, many.item_id, '/vectors'), { vectors: list.slice(i, i + 6).map((ch: any) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) })) })),
    );
    for (const a of answers) expect([a.status, a.text.slice(0, 200)]).toEqual([200, expect.any(String)]);
    expect((await call(c, 'GET', itemPath(own, many.item_id))).body).toMatchObject({ vectors_stored: 40 });
    const q = await query(c, own, { query: 'fulmars', vector: fakeVector('Line 7 about fulmars.') });
    expect(q.body.indexing).toEqual({ indexed: 1, total: 1, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 });
  });

  it("after a re-processing the old package's chunk ids name the new package's chunks; counts start again", async () => {
    const before = (await call(c, 'GET', itemPath(col, item.item_id))).body;
    const r = await post(c, itemPath(col, item.item_id, '/reprocess'), {});
    expect(r.status, r.text).toBe(202);
    await waitFor('the new package', async () => (await call(c, 'GET', itemPath(col, item.item_id))).body.package_id !== before.package_id, 20_000);
    const after = await settledItem(c, col, item.item_id);
    expect(after).toMatchObject({ status: 'done', vectors_stored: 0, chunk_count: before.chunk_count });
    // The old package's vectors are gone from queries at once: the item serves the new one, which has none.
    const q = await query(c, col, { query: 'apt', vector: fakeVector('Use apt.') });
    expect(q.body.matches).toEqual([]);
    const stored = await put(chunks.map((ch) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) })));
    expect(stored.body).toMatchObject({ package_id: after.package_id, vectors_stored: chunks.length, indexed: true });
    const found = await query(c, col, { query: 'apt', vector: fakeVector('Use apt.') });
    expect(found.body.matches[0].citation.package_id).toBe(after.package_id);
    expect(new Set(found.body.matches.map((m: any) => m.citation.chunk_id)).size).toBe(found.body.matches.length);
  });
});

describe('clients racing each other', () => {
  it('two adds with the same operation id at once make one item', async () => {
    const col = await createCollection(c, 'download');
    const id = op();
    const answers = await Promise.all([0, 1, 2, 3].map(() => addItem(c, col, { text: 'Fulmars glide low over the waves.', filename: 'fulmars.txt' }, id)));
    for (const a of answers) {
      expect(a.status, a.text).toBeLessThan(500);
      if (a.status !== 202) refused(a, 409, 'operation_in_progress');
    }
    const items = new Set(answers.filter((a) => a.status === 202).map((a) => a.body.item_id));
    expect(items.size).toBe(1);
    const settled = await settledCollection(c, col);
    expect(settled.counts).toEqual({ total: 1, queued: 0, processing: 0, done: 1, failed: 0 });
    expect((await call(c, 'GET', `/v1/collections/${col}/items`)).body.data).toHaveLength(1);
  });

  it('many adds at once keep the counts exact', async () => {
    const col = await createCollection(c, 'cloud');
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => addItem(c, col, { text: `Storm petrel number ${i} returns at night.`, filename: `petrel-${i}.txt` })));
    for (const a of answers) expect(a.status, a.text).toBe(202);
    const during = (await call(c, 'GET', `/v1/collections/${col}`)).body.counts;
    expect(during.queued + during.processing + during.done + during.failed).toBe(30);
    expect(during.total).toBe(30);
    const settled = await settledCollection(c, col);
    expect(settled.counts).toEqual({ total: 30, queued: 0, processing: 0, done: 30, failed: 0 });
    const q = await query(c, col, { query: 'storm petrel returns at night', top_k: 20 });
    expect(q.body.indexing).toEqual({ indexed: 30, total: 30, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 });
    expect(new Set(q.body.matches.map((m: any) => m.citation.item_id)).size).toBe(20);
  });

  it('deleting items while they are processed leaves exact counts, nothing served, no package blob, lease entry or vector', async () => {
    const col = await createCollection(c, 'cloud');
    const keep = await doneItem(col, { text: 'Puffins keep their burrows for years.', filename: 'keep.txt' });
    const started = embedder.calls.length;
    embedder.behavior.stallMs = 1500;
    let ids: string[];
    try {
      const added = await Promise.all(Array.from({ length: 4 }, (_, i) => addItem(c, col, { text: `Manx shearwater ${i} calls from its burrow.`, filename: `shearwater-${i}.txt` })));
      ids = added.map((a) => a.body.item_id);
      // Processors are embedding: their packages are written.
      await waitFor('the processors to embed', () => embedder.calls.length > started, 10_000);
      const deletes = await Promise.all(ids.map((id) => call(c, 'DELETE', itemPath(col, id))));
      for (const d of deletes) expect([d.status, d.body]).toEqual([200, expect.objectContaining({ deleted: true })]);
    } finally {
      embedder.behavior.stallMs = 0;
    }
    const counts = (await call(c, 'GET', `/v1/collections/${col}`)).body.counts;
    expect(counts).toEqual({ total: 1, queued: 0, processing: 0, done: 1, failed: 0 });
    const keepBlob = (b: string) => b.includes(`${keep.item_id}.d`);
    await waitFor('the processors to remove what they made', async () => collectionBlobs(col).filter((b) => !keepBlob(b)).length === 0 && (await indexedEntries(col)).every((k) => k.startsWith(keep.item_id)), 20_000);
    // And they stay gone once every processor is done.
    await new Promise((r) => setTimeout(r, 2000));
    expect(collectionBlobs(col).filter((b) => !keepBlob(b))).toEqual([]);
    expect((await indexedEntries(col)).filter((k) => !k.startsWith(keep.item_id))).toEqual([]);
    expect(await leaseEntries(col)).toEqual([]);
    const q = await query(c, col, { query: 'manx shearwater calls from its burrow puffins', top_k: 20 });
    expect(q.body.matches.map((m: any) => m.citation.item_id)).toEqual([keep.item_id]);
    expect(q.body.indexing).toEqual({ indexed: 1, total: 1, complete: true, searchable: true, skipped_items: 0, skipped_chunks: 0 });
    for (const id of ids!) refused(await send('GET', itemPath(col, id)), 404, 'item_not_found');
    expect((await call(c, 'GET', `/v1/collections/${col}`)).body.counts).toEqual({ total: 1, queued: 0, processing: 0, done: 1, failed: 0 });
  });

  it('an item deleted before its package is written, whose processor then finds out by its lease, leaves no package blob', async () => {
    // A short lease, so the processor's heartbeat (a third of it) finds the item gone while it embeds.
    useSettings({ knowledgeLeaseSeconds: 3 });
    const col = await createCollection(c, 'cloud');
    const blobs = p.engine.blobs;
    const put = blobs.put.bind(blobs);
    let deleted: Promise<unknown> | undefined;
    let itemId = '';
    // The client's DELETE lands between the processor's claim and its package write.
    blobs.put = async (key, body, expect) => {
      if (itemId && key.includes(`/${itemId}/pkg_`)) await (deleted ??= call(c, 'DELETE', itemPath(col, itemId)));
      return put(key, body, expect);
    };
    embedder.behavior.stallMs = 2500;
    try {
      const added = await addItem(c, col, { text: 'Eiders line their nests with down.', filename: 'eiders.txt' });
      itemId = added.body.item_id;
      await waitFor('the deletion', () => deleted !== undefined, 10_000);
      expect(((await deleted) as Answer).status).toBe(200);
      // The heartbeat fails, the processor stops; the embedder answers after that.
      await new Promise((r) => setTimeout(r, 3500));
    } finally {
      blobs.put = put;
      embedder.behavior.stallMs = 0;
      useSettings(undefined);
    }
    expect(collectionBlobs(col)).toEqual([]);
    expect(await indexedEntries(col)).toEqual([]);
    expect(await leaseEntries(col)).toEqual([]);
  });

  it('two re-processings at once: one is taken, the other is 409 item_not_ready; one new package is served', async () => {
    const col = await createCollection(c, 'cloud');
    const item = await doneItem(col, { text: 'Cormorants fish in the harbour mouth.', filename: 'c.txt' });
    const answers = await Promise.all([0, 1, 2].map(() => post(c, itemPath(col, item.item_id, '/reprocess'), {})));
    expect(answers.filter((a) => a.status === 202)).toHaveLength(1);
    for (const a of answers.filter((x) => x.status !== 202)) refused(a, 409, 'item_not_ready');
    await waitFor('the new package', async () => (await call(c, 'GET', itemPath(col, item.item_id))).body.package_id !== item.package_id, 20_000);
    const after = await settledItem(c, col, item.item_id);
    expect(after.status).toBe('done');
    expect((await settledCollection(c, col)).counts).toEqual({ total: 1, queued: 0, processing: 0, done: 1, failed: 0 });
    const q = await query(c, col, { query: 'cormorants fish in the harbour mouth', top_k: 20 });
    expect(q.body.matches.map((m: any) => m.citation.package_id)).toEqual([after.package_id]);
    // The old package's blob goes right after the commit that stops serving it: waited for, not raced.
    const packages = () => collectionBlobs(col).filter((b) => b.includes('/pkg_'));
    await waitFor('the old package removed', () => packages().length === 1, 5_000);
    expect(packages()).toEqual([expect.stringContaining(after.package_id)]);
  });

  it('re-processings and deletes of one item at once: it is gone, counted once, and nothing of either package is left', async () => {
    const col = await createCollection(c, 'cloud');
    const keep = await doneItem(col, { text: 'Kittiwakes stay.', filename: 'k.txt' });
    const item = await doneItem(col, { text: 'Petrels come and go.', filename: 'p.txt' });
    const answers = await Promise.all([
      post(c, itemPath(col, item.item_id, '/reprocess'), {}),
      call(c, 'DELETE', itemPath(col, item.item_id)),
      post(c, itemPath(col, item.item_id, '/reprocess'), {}),
      call(c, 'DELETE', itemPath(col, item.item_id)),
    ]);
    for (const a of answers) {
      expect(a.status, a.text).toBeLessThan(500);
      if (a.status >= 400) expect(['item_not_found', 'item_not_ready']).toContain(a.body.error.code);
    }
    expect(answers.filter((a) => a.status === 200)).toHaveLength(1);
    await settledCollection(c, col);
    await waitFor('what the processor made to be removed', async () => collectionBlobs(col).every((b) => b.includes(keep.item_id)) && (await indexedEntries(col)).every((k) => k.startsWith(keep.item_id)), 20_000);
    await new Promise((r) => setTimeout(r, 1000));
    expect(collectionBlobs(col).filter((b) => !b.includes(keep.item_id))).toEqual([]);
    expect((await indexedEntries(col)).filter((k) => !k.startsWith(keep.item_id))).toEqual([]);
    expect((await call(c, 'GET', `/v1/collections/${col}`)).body.counts).toEqual({ total: 1, queued: 0, processing: 0, done: 1, failed: 0 });
    expect(await leaseEntries(col)).toEqual([]);
  });

  it('two deletes of one item at once: one 200, the other 404 item_not_found; the counts move once', async () => {
    const col = await createCollection(c, 'cloud');
    const a = await doneItem(col, { text: 'Terns dive in the shallows.', filename: 't.txt' });
    await doneItem(col, { text: 'Oystercatchers probe the sand.', filename: 'o.txt' });
    const answers = await Promise.all([0, 1, 2].map(() => call(c, 'DELETE', itemPath(col, a.item_id))));
    expect(answers.filter((x) => x.status === 200)).toHaveLength(1);
    for (const x of answers.filter((y) => y.status !== 200)) refused(x, 404, 'item_not_found');
    expect((await call(c, 'GET', `/v1/collections/${col}`)).body.counts).toEqual({ total: 1, queued: 0, processing: 0, done: 1, failed: 0 });
    expect(collectionBlobs(col).filter((b) => b.includes(a.item_id))).toEqual([]);
  });

  it('a delete replayed with its operation id answers the same; the id on another item is 409 operation_id_reused', async () => {
    const col = await createCollection(c, 'download');
    const a = await doneItem(col, { text: 'Skuas chase other birds.', filename: 's.txt' });
    const b = await doneItem(col, { text: 'Gulls follow the boats.', filename: 'g.txt' });
    const id = op();
    const first = await send('DELETE', itemPath(col, a.item_id), undefined, { 'x-operation-id': id });
    const again = await send('DELETE', itemPath(col, a.item_id), undefined, { 'x-operation-id': id });
    expect([first.status, again.status, again.body]).toEqual([200, 200, first.body]);
    refused(await send('DELETE', itemPath(col, b.item_id), undefined, { 'x-operation-id': id }), 409, 'operation_id_reused');
    const blank = await send('DELETE', itemPath(col, b.item_id), undefined, { 'x-operation-id': '' });
    expect([blank.status, blank.body.error.code]).toEqual([400, expect.stringMatching(/^(missing|invalid)_operation_id$/)]);
    expect((await call(c, 'GET', itemPath(col, b.item_id))).body.status).toBe('done');
  });

  it('a collection deleted while its items are processed leaves nothing: items, lease entries, blobs, vectors', async () => {
    const col = await createCollection(c, 'cloud');
    await doneItem(col, { text: 'Guillemots crowd the ledges.', filename: 'g.txt' });
    const started = embedder.calls.length;
    embedder.behavior.stallMs = 1000;
    try {
      const adds = Array.from({ length: 6 }, (_, i) => addItem(c, col, { text: `Little auk ${i} flies far to feed.`, filename: `auk-${i}.txt` }));
      await Promise.all(adds);
      await waitFor('the processors to embed', () => embedder.calls.length > started, 10_000);
      // More adds race the deletion: each is taken before it, or refused after it, never kept.
      const late = Array.from({ length: 6 }, (_, i) => addItem(c, col, { text: `Late auk ${i}.`, filename: `late-${i}.txt` }));
      const del = await call(c, 'DELETE', `/v1/collections/${col}`);
      expect(del.status, del.text).toBe(200);
      for (const a of await Promise.all(late)) {
        expect(a.status, a.text).toBeLessThan(500);
        if (a.status !== 202) expect(a.body.error.code).toBe('collection_not_found');
      }
    } finally {
      embedder.behavior.stallMs = 0;
    }
    await waitFor('nothing of the collection left', async () => collectionBlobs(col).length === 0 && (await indexedEntries(col)).length === 0, 20_000).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1500));
    expect((await p.engine.kv.query({ pk: itemsPk(org, workspace, col) })).items).toEqual([]);
    expect(await leaseEntries(col)).toEqual([]);
    expect(collectionBlobs(col)).toEqual([]);
    expect(await indexedEntries(col)).toEqual([]);
    refused(await send('GET', `/v1/collections/${col}/items`), 404, 'collection_not_found');
  });

  it('an item added while its collection is being deleted (after its items were removed) is not left behind', async () => {
    const col = await createCollection(c, 'download');
    await doneItem(col, { text: 'Shearwaters raft at dusk.', filename: 'raft.txt' });
    const kv = p.engine.kv;
    const transact = kv.transact.bind(kv);
    let late: Promise<Answer> | undefined;
    // The add lands between the removal of the collection's items and the removal of the collection itself.
    kv.transact = async (writes, ...rest) => {
      if (!late && writes.some((w) => 'delete' in w && w.delete.pk === `kcol#${org}#${workspace}` && w.delete.sk === col)) await (late = addItem(c, col, { text: 'A late arrival.', filename: 'late.txt' }));
      return transact(writes, ...rest);
    };
    let del: Awaited<ReturnType<typeof call>>;
    try {
      del = await call(c, 'DELETE', `/v1/collections/${col}`);
    } finally {
      kv.transact = transact;
    }
    expect(del.status, del.text).toBe(200);
    expect((await late!).status).toBe(202);
    await new Promise((r) => setTimeout(r, 500));
    expect((await p.engine.kv.query({ pk: itemsPk(org, workspace, col) })).items).toEqual([]);
    expect(await leaseEntries(col)).toEqual([]);
    expect(collectionBlobs(col)).toEqual([]);
  });

  it('vectors stored while their item is deleted are not left in the index', async () => {
    const col = await createCollection(c, 'local_vectors');
    const item = await doneItem(col, { text: markdownFile(), filename: 'guide.md' });
    const other = await doneItem(col, { text: 'Another note that stays.', filename: 'stays.txt' });
    expect((await call(c, 'PUT', itemPath(col, other.item_id, '/vectors'), { vectors: [{ chunk_id: 'chk_000000', vector: fakeVector('Another note that stays.') }] })).status).toBe(200);
    const chunks = (await call(c, 'GET', itemPath(col, item.item_id, '/chunks?limit=500'))).body.data;
    const index = `kcv-${col.slice(4)}`;
    const engineVectors = p.engine.vectors;
    const putVectors = engineVectors.put.bind(engineVectors);
    let deleted: Promise<unknown> | undefined;
    // The item's deletion (and its package's removal) runs just before the PUT's vectors are written.
    engineVectors.put = async (name, entries) => {
      if (name === index && entries.some((e) => e.key.startsWith(item.item_id))) await (deleted ??= call(c, 'DELETE', itemPath(col, item.item_id)));
      return putVectors(name, entries);
    };
    let put: Awaited<ReturnType<typeof call>>;
    try {
      put = await call(c, 'PUT', itemPath(col, item.item_id, '/vectors'), { vectors: chunks.map((ch: any) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) })) });
    } finally {
      engineVectors.put = putVectors;
    }
    expect(((await deleted) as Answer).status).toBe(200);
    refused(put, 409, 'item_not_ready');
    const left = await p.engine.vectors.query(index, { vector: Float32Array.from(fakeVector('Use apt.')), topK: 100 });
    expect(left.map((h) => h.key.split('.')[0])).toEqual([other.item_id]);
  });

  it('vectors stored while their local_vectors collection is deleted do not bring its index back', async () => {
    const col = await createCollection(c, 'local_vectors');
    const item = await doneItem(col, { text: markdownFile(), filename: 'guide.md' });
    const chunks = (await call(c, 'GET', itemPath(col, item.item_id, '/chunks?limit=500'))).body.data;
    const vectors = chunks.map((ch: any) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) }));
    expect((await call(c, 'PUT', itemPath(col, item.item_id, '/vectors'), { vectors: vectors.slice(0, 1) })).status).toBe(200);
    const index = `kcv-${col.slice(4)}`;
    const engineVectors = p.engine.vectors;
    const createIndex = engineVectors.createIndex.bind(engineVectors);
    let deleted: Promise<unknown> | undefined;
    // The collection's deletion runs between the PUT's reading of the item and its writing of the vectors.
    engineVectors.createIndex = async (name, dimensions) => {
      if (name === index) await (deleted ??= call(c, 'DELETE', `/v1/collections/${col}`));
      return createIndex(name, dimensions);
    };
    let put: Awaited<ReturnType<typeof call>>;
    try {
      put = await call(c, 'PUT', itemPath(col, item.item_id, '/vectors'), { vectors });
    } finally {
      engineVectors.createIndex = createIndex;
    }
    expect(((await deleted) as Answer).status).toBe(200);
    expect(put.status, put.text).toBeLessThan(500);
    if (put.status !== 200) expect(['collection_not_found', 'item_not_found', 'item_not_ready']).toContain(put.body.error.code);
    const left = await p.engine.vectors.query(index, { vector: Float32Array.from(fakeVector('Use apt.')), topK: 100 }).catch(() => []);
    expect(left).toEqual([]);
  });

  it('a local_vectors collection deleted while vectors are stored leaves no index behind', async () => {
    const col = await createCollection(c, 'local_vectors');
    const item = await doneItem(col, { text: markdownFile(), filename: 'guide.md' });
    const chunks = (await call(c, 'GET', itemPath(col, item.item_id, '/chunks?limit=500'))).body.data;
    const vectors = chunks.map((ch: any) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) }));
    const puts = Array.from({ length: 8 }, () => call(c, 'PUT', itemPath(col, item.item_id, '/vectors'), { vectors }));
    const del = await call(c, 'DELETE', `/v1/collections/${col}`);
    expect(del.status, del.text).toBe(200);
    for (const a of await Promise.all(puts)) {
      expect(a.status, a.text).toBeLessThan(500);
      if (a.status !== 200) expect(['collection_not_found', 'item_not_found', 'item_not_ready']).toContain(a.body.error.code);
    }
    const index = `kcv-${col.slice(4)}`;
    const left = await p.engine.vectors.query(index, { vector: Float32Array.from(fakeVector('Use apt.')), topK: 100 }).catch(() => []);
    expect(left).toEqual([]);
    expect(collectionBlobs(col)).toEqual([]);
  });
});

describe('two workers (npm start, LOCAL_WORKERS=2)', () => {
  const used = useLocalProcess('collection-attack-', { LOCAL_WORKERS: '2' });
  let w: Client;

  beforeAll(() => {
    w = { url: used.local.urls.ai, key: used.key };
  });

  it('adds, the same operation id and vectors of the same chunks through both workers at once keep every count exact', async () => {
    const col = await createCollection(w, 'local_vectors');
    const id = op();
    const same = await Promise.all(Array.from({ length: 6 }, () => addItem(w, col, { text: markdownFile(), filename: 'guide.md' }, id)));
    for (const a of same) {
      expect(a.status, a.text).toBeLessThan(500);
      if (a.status !== 202) refused(a, 409, 'operation_in_progress');
    }
    expect(new Set(same.filter((a) => a.status === 202).map((a) => a.body.item_id)).size).toBe(1);
    const many = await Promise.all(Array.from({ length: 30 }, (_, i) => addItem(w, col, { text: `Note ${i} about gannets and their colonies.`, filename: `note-${i}.txt` })));
    for (const a of many) expect(a.status, a.text).toBe(202);
    expect((await settledCollection(w, col)).counts).toEqual({ total: 31, queued: 0, processing: 0, done: 31, failed: 0 });
    const guide = same.find((a) => a.status === 202)!.body.item_id;
    const chunks = (await call(w, 'GET', itemPath(col, guide, '/chunks?limit=500'))).body.data;
    const all = chunks.map((ch: any) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) }));
    const puts = await Promise.all(Array.from({ length: 16 }, (_, i) => call(w, 'PUT', itemPath(col, guide, '/vectors'), { vectors: i % 2 ? [...all].reverse() : all })));
    for (const a of puts) expect([a.status, a.text.slice(0, 200)]).toEqual([200, expect.any(String)]);
    expect((await call(w, 'GET', itemPath(col, guide))).body).toMatchObject({ vectors_stored: chunks.length });
    const q = await query(w, col, { query: 'apt', vector: fakeVector('Use apt.') });
    expect(q.body.indexing).toEqual({ indexed: 1, total: 31, complete: false, searchable: true, skipped_items: 0, skipped_chunks: 30 });
  }, 90_000);

  it('PUTs of overlapping chunk sets through both workers at once never fail on each other', async () => {
    const col = await createCollection(w, 'local_vectors');
    const added = await addItem(w, col, { text: Array.from({ length: 40 }, (_, i) => `# Section ${i}\n\nLine ${i} about fulmars.`).join('\n\n'), filename: 'sections.md' });
    const item = await settledItem(w, col, added.body.item_id);
    const list = (await call(w, 'GET', itemPath(col, item.item_id, '/chunks?limit=500'))).body.data;
    const answers = await Promise.all(
      Array.from({ length: 60 }, (_, i) => call(w, 'PUT', itemPath(col, item.item_id, '/vectors'), { vectors: list.slice(i % 35, (i % 35) + 6).map((ch: any) => ({ chunk_id: ch.chunk_id, vector: fakeVector(ch.text) })) })),
    );
    for (const a of answers) expect([a.status, a.text.slice(0, 200)]).toEqual([200, expect.any(String)]);
    expect((await call(w, 'GET', itemPath(col, item.item_id))).body).toMatchObject({ vectors_stored: 40, chunk_count: 40 });
  }, 60_000);
});
