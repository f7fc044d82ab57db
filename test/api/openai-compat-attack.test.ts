/**
 * A second attacker's pass over the OpenAI compatibility routes (issue 38), for what the parts' own
 * attack tests leave out: ids of one route or store used under another, another workspace's uploads
 * and another application's responses in the same organization, interleaved deletes, cancels and
 * keyed creates, numbers and query strings at their edges, prototype-named keys, multipart edges, and
 * a streamed response whose client hangs up. Every refusal is the spec's 4xx in OpenAI's error shape.
 */
import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { vectorStoreFileByFileKey, vectorStoreFilesPartition, fileBatchKey, vectorStoreKey } from '../../lambdas/ai/openai-compat/keys.js';
import { addItem, createCollection, settledCollection, uploadFile, type Client } from '../helpers/knowledge-calls.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';

let w: OpenAiWorld;
let client: OpenAI;
let c: Client;

beforeAll(async () => {
  w = await startOpenAiWorld();
  client = w.client;
  c = { url: w.p.urls.ai, key: w.p.credentials.secret_key };
}, 60_000);
afterAll(() => w?.close());

type Answer = { status: number; body: any; headers: Headers };
async function raw(method: string, path: string, body?: string | Buffer, headers: Record<string, string> = {}, key = w.p.credentials.secret_key): Promise<Answer> {
  const res = await fetch(`${w.p.urls.ai}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(typeof body === 'string' ? { 'content-type': 'application/json' } : {}), ...headers },
    body,
  });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // not JSON: kept as text, which the shape check below refuses for an error
  }
  return { status: res.status, body: parsed, headers: res.headers };
}
const json = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}, key?: string) =>
  raw(method, path, body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body), headers, key);

/** OpenAI's error shape with the code (and param when given); never a 5xx, never a stack. */
function expectError(r: Answer, status: number, code: string, param?: string | null) {
  expect([r.status, r.body?.error?.code], JSON.stringify(r.body).slice(0, 400)).toEqual([status, code]);
  expect(Object.keys(r.body.error).sort()).toEqual(['code', 'message', 'param', 'type']);
  expect(JSON.stringify(r.body)).not.toMatch(/\bat .*\.(ts|js):\d+/);
  if (param !== undefined) expect(r.body.error.param).toBe(param);
}

const note = (name: string, text = `${name}: the harbour ferry leaves at dawn.`) => uploadFile(c, Buffer.from(text, 'utf8'), name, 'text/plain');
const settled = async (vsId: string) => {
  for (let i = 0; i < 400; i++) {
    const s = await client.vectorStores.retrieve(vsId);
    if (s.file_counts.in_progress === 0) return s;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('store not settled');
};
const partition = async (pk: string) => (await w.p.engine.kv.query({ pk, limit: 1000 })).items;

describe('ids of one route or store used under another', () => {
  it("a batch of store A under store B's path is 404 on get, files and cancel, and A's batch is untouched", async () => {
    const a = await client.vectorStores.create({ name: 'A' });
    const b = await client.vectorStores.create({ name: 'B' });
    const f = await note('batch-a.txt');
    const batch = await client.vectorStores.fileBatches.create(a.id, { file_ids: [f] });
    for (const [m, p] of [
      ['GET', `/v1/vector_stores/${b.id}/file_batches/${batch.id}`],
      ['GET', `/v1/vector_stores/${b.id}/file_batches/${batch.id}/files`],
      ['POST', `/v1/vector_stores/${b.id}/file_batches/${batch.id}/cancel`],
    ] as const) expectError(await json(m, p), 404, 'item_not_found', 'batch_id');
    const again = await client.vectorStores.fileBatches.retrieve(batch.id, { vector_store_id: a.id });
    expect(again.status === 'cancelled').toBe(false);
  });

  it('a file attached to store A is unknown under store B on get, update, content and delete; A keeps it', async () => {
    const a = await client.vectorStores.create({ name: 'A2' });
    const b = await client.vectorStores.create({ name: 'B2' });
    const f = await note('member-a.txt');
    await client.vectorStores.files.create(a.id, { file_id: f, attributes: { k: 'v' } });
    for (const [m, p, body] of [
      ['GET', `/v1/vector_stores/${b.id}/files/${f}`, undefined],
      ['POST', `/v1/vector_stores/${b.id}/files/${f}`, { attributes: { k: 'w' } }],
      ['GET', `/v1/vector_stores/${b.id}/files/${f}/content`, undefined],
      ['DELETE', `/v1/vector_stores/${b.id}/files/${f}`, undefined],
    ] as const) expectError(await json(m, p, body), 404, 'item_not_found', 'file_id');
    // `after` naming A's file on B's listing is a cursor of no file of B.
    expectError(await json('GET', `/v1/vector_stores/${b.id}/files?after=${f}`), 400, 'invalid_body', 'after');
    const kept = await client.vectorStores.files.retrieve(f, { vector_store_id: a.id });
    expect(kept.attributes).toEqual({ k: 'v' });
    expect((await client.vectorStores.retrieve(b.id)).file_counts.total).toBe(0);
  });

  it('a download or local_vectors collection is no vector store on any route (col_ and vs_ alike)', async () => {
    const f = await note('not-a-store.txt');
    for (const mode of ['download', 'local_vectors'] as const) {
      const col = await createCollection(c, mode, `not a store ${mode}`);
      for (const id of [col, `vs_${col.slice(4)}`]) {
        for (const [m, p, body] of [
          ['GET', `/v1/vector_stores/${id}`, undefined],
          ['POST', `/v1/vector_stores/${id}`, { name: 'x' }],
          ['GET', `/v1/vector_stores/${id}/files`, undefined],
          ['POST', `/v1/vector_stores/${id}/files`, { file_id: f }],
          ['POST', `/v1/vector_stores/${id}/file_batches`, { file_ids: [f] }],
          ['POST', `/v1/vector_stores/${id}/search`, { query: 'ferry' }],
          ['DELETE', `/v1/vector_stores/${id}`, undefined],
        ] as const) expectError(await json(m, p, body), 404, 'collection_not_found');
      }
      const listed = (await client.vectorStores.list({ limit: 100 })).data.map((s) => s.id);
      expect(listed).not.toContain(`vs_${col.slice(4)}`);
    }
  });
});

describe('another workspace and another application of the same organization', () => {
  let wsKey = '';
  let wsClient: OpenAI;
  beforeAll(async () => {
    const org = w.p.credentials.organization_id;
    const ws = await w.tenants.createWorkspace(org, 'second workspace');
    await createVectorDatabase(w.p.engine, ws.id, 'emb');
    const app = await w.tenants.createApplication(ws.id, 'second ws app', ['knowledge', 'ai.chat']);
    wsKey = (await w.tenants.createSecretKey(org, app.id)).key;
    wsClient = w.clientFor(wsKey);
  });

  it("another workspace's file cannot be attached, batched, put in a new store, read or deleted: 404 before any write", async () => {
    const theirs = await wsClient.files.create({ file: await toFile(Buffer.from('second workspace secret: the vault code is 4711'), 'theirs.txt'), purpose: 'assistants' });
    const mine = await client.vectorStores.create({ name: 'mine' });
    const before = await client.vectorStores.list({ limit: 100 });
    expectError(await json('POST', `/v1/vector_stores/${mine.id}/files`, { file_id: theirs.id }), 404, 'upload_not_found', 'file_id');
    expectError(await json('POST', `/v1/vector_stores/${mine.id}/file_batches`, { file_ids: [theirs.id] }), 404, 'upload_not_found', 'file_id');
    expectError(await json('POST', `/v1/vector_stores/${mine.id}/file_batches`, { files: [{ file_id: theirs.id }] }), 404, 'upload_not_found', 'file_id');
    expectError(await json('POST', '/v1/vector_stores', { name: 'grab', file_ids: [theirs.id] }), 404, 'upload_not_found', 'file_id');
    for (const [m, p] of [
      ['GET', `/v1/files/${theirs.id}`],
      ['GET', `/v1/files/${theirs.id}/content`],
      ['DELETE', `/v1/files/${theirs.id}`],
    ] as const) expectError(await json(m, p), 404, 'upload_not_found');
    expectError(await json('GET', `/v1/files?after=${theirs.id}`), 400, 'invalid_body', 'after');
    expect((await client.vectorStores.list({ limit: 100 })).data.length).toBe(before.data.length);
    expect((await client.vectorStores.retrieve(mine.id)).file_counts.total).toBe(0);
    expect(await partition(vectorStoreFilesPartition(w.p.credentials.organization_id, w.p.credentials.workspace_id, `col_${mine.id.slice(3)}`))).toEqual([]);
    // And theirs is still theirs, whole.
    expect(Buffer.from(await (await wsClient.files.content(theirs.id)).arrayBuffer()).toString()).toMatch(/4711/);
  });

  it("my store is 404 to the other workspace's application, on search too", async () => {
    const mine = await client.vectorStores.create({ name: 'mine too' });
    expectError(await json('GET', `/v1/vector_stores/${mine.id}`, undefined, {}, wsKey), 404, 'collection_not_found');
    expectError(await json('POST', `/v1/vector_stores/${mine.id}/search`, { query: 'x' }, {}, wsKey), 404, 'collection_not_found');
    expectError(await json('POST', '/v1/responses', { input: 'x', tools: [{ type: 'file_search', vector_store_ids: [mine.id] }] }, {}, wsKey), 404, 'collection_not_found');
  });

  it("another application's response: GET and DELETE 404, previous_response_id 400, and the owner still reads it", async () => {
    const appKey = async (name: string) => {
      const app = await w.tenants.createApplication(w.p.credentials.workspace_id, name, ['ai.chat', 'knowledge']);
      return (await w.tenants.createSecretKey(w.p.credentials.organization_id, app.id)).key;
    };
    const k1 = await appKey('responder one');
    const k2 = await appKey('responder two');
    const made = await json('POST', '/v1/responses', { input: 'hello' }, {}, k1);
    expect(made.status).toBe(200);
    const id = made.body.id as string;
    for (const key of [k2, w.p.credentials.secret_key, wsKey]) {
      expectError(await json('GET', `/v1/responses/${id}`, undefined, {}, key), 404, 'response_not_found');
      expectError(await json('DELETE', `/v1/responses/${id}`, undefined, {}, key), 404, 'response_not_found');
      expectError(await json('POST', '/v1/responses', { input: 'again', previous_response_id: id }, {}, key), 400, 'invalid_body', 'previous_response_id');
    }
    expect((await json('GET', `/v1/responses/${id}`, undefined, {}, k1)).status).toBe(200);
  });
});

describe('interleavings', () => {
  it('a store deleted while a batch admits: every answer 200 or 404/410, nothing of the store left behind', async () => {
    const files = await Promise.all(Array.from({ length: 12 }, (_, i) => note(`race-del-${i}.txt`)));
    const vs = await client.vectorStores.create({ name: 'doomed' });
    const col = `col_${vs.id.slice(3)}`;
    const [made, gone] = await Promise.all([json('POST', `/v1/vector_stores/${vs.id}/file_batches`, { file_ids: files }), (async () => {
      await new Promise((r) => setTimeout(r, 15));
      return json('DELETE', `/v1/vector_stores/${vs.id}`);
    })()]);
    expect(gone.status, JSON.stringify(gone.body)).toBe(200);
    if (made.status !== 200) expect([404, 410], JSON.stringify(made.body)).toContain(made.status);
    if (made.status === 200) {
      const r = await json('GET', `/v1/vector_stores/${vs.id}/file_batches/${made.body.id}`);
      expect([404, 410], JSON.stringify(r.body)).toContain(r.status);
    }
    expectError(await json('GET', `/v1/vector_stores/${vs.id}`), 404, 'collection_not_found');
    const org = w.p.credentials.organization_id;
    const ws = w.p.credentials.workspace_id;
    // Give a late attach its moment, then nothing of the store may be left.
    await new Promise((r) => setTimeout(r, 300));
    expect(await partition(vectorStoreFilesPartition(org, ws, col))).toEqual([]);
    expect(await partition(vectorStoreFileByFileKey(org, ws, col, '').pk)).toEqual([]);
    expect(await partition(fileBatchKey(org, ws, col, '').pk)).toEqual([]);
    expect(await w.p.engine.kv.get(vectorStoreKey(org, ws, col))).toBeUndefined();
  });

  it('a store deleted twice at once, and while its file is deleted: 200 and 404, never a 500', async () => {
    const vs = await client.vectorStores.create({ name: 'twice' });
    const f = await note('twice.txt');
    await client.vectorStores.files.create(vs.id, { file_id: f });
    const answers = await Promise.all([json('DELETE', `/v1/vector_stores/${vs.id}`), json('DELETE', `/v1/vector_stores/${vs.id}`), json('DELETE', `/v1/vector_stores/${vs.id}/files/${f}`)]);
    expect(answers.filter((r) => r.status === 200 && r.body.object === 'vector_store.deleted').length, JSON.stringify(answers.map((r) => r.body))).toBeGreaterThanOrEqual(1);
    for (const r of answers) if (r.status !== 200) expect([404, 409], JSON.stringify(r.body)).toContain(r.status);
    expectError(await json('GET', `/v1/vector_stores/${vs.id}`), 404, 'collection_not_found');
  });

  it('a store made with file_ids while one of them is deleted: the store with its files, or an error and no store left half made', async () => {
    const files = await Promise.all(Array.from({ length: 8 }, (_, i) => note(`made-with-${i}.txt`)));
    const names = async () => (await client.vectorStores.list({ limit: 100 })).data.map((s) => s.id);
    for (let round = 0; round < 4; round++) {
      const target = files[files.length - 1 - round];
      const before = await names();
      const [made, del] = await Promise.all([
        json('POST', '/v1/vector_stores', { name: `made-with-${round}`, file_ids: files.slice(0, files.length - round) }),
        (async () => {
          await new Promise((r) => setTimeout(r, 5 + round * 10));
          return json('DELETE', `/v1/files/${target}`);
        })(),
      ]);
      expect(del.status).toBe(200);
      const after = await names();
      if (made.status === 200) {
        expect(after).toContain(made.body.id);
        expect(made.body.file_counts.total).toBe(files.length - round);
      } else {
        expectError(made, 404, 'upload_not_found');
        // The caller got no store id: no store of this call may be left behind.
        expect(after.filter((id) => !before.includes(id)), `round ${round}`).toEqual([]);
      }
    }
  });

  it('a file deleted while it is being attached: attached whole or refused 404, never half', async () => {
    const vs = await client.vectorStores.create({ name: 'attach vs delete' });
    const f = await note('attach-race.txt');
    const [attach, del] = await Promise.all([json('POST', `/v1/vector_stores/${vs.id}/files`, { file_id: f }), json('DELETE', `/v1/files/${f}`)]);
    expect(del.status, JSON.stringify(del.body)).toBe(200);
    if (attach.status !== 200) expectError(attach, 404, 'upload_not_found');
    const s = await settled(vs.id);
    expect(s.file_counts.total).toBe(attach.status === 200 ? 1 : 0);
    expect(s.file_counts.failed + s.file_counts.completed).toBe(s.file_counts.total);
  });

  it('a batch cancelled twice at once: both 200 cancelled, each file counted cancelled once', async () => {
    const vs = await client.vectorStores.create({ name: 'double cancel' });
    const files = await Promise.all(Array.from({ length: 6 }, (_, i) => note(`cancel-${i}.txt`)));
    const batch = await client.vectorStores.fileBatches.create(vs.id, { file_ids: files });
    const [x, y] = await Promise.all([0, 1].map(() => json('POST', `/v1/vector_stores/${vs.id}/file_batches/${batch.id}/cancel`)));
    for (const r of [x, y]) expect(r.status, JSON.stringify(r.body)).toBe(200);
    const s = await settled(vs.id);
    const listed: any[] = [];
    for await (const f of client.vectorStores.files.list(vs.id, { limit: 100 })) listed.push(f);
    expect(s.file_counts.total).toBe(files.length);
    expect(s.file_counts.cancelled).toBe(listed.filter((f) => f.status === 'cancelled').length);
    expect(s.file_counts.completed + s.file_counts.failed + s.file_counts.cancelled).toBe(files.length);
    const b = await client.vectorStores.fileBatches.retrieve(batch.id, { vector_store_id: vs.id });
    expect(b.file_counts.total).toBe(files.length);
    expect(s.usage_bytes).toBe(listed.filter((f) => f.status !== 'cancelled').reduce((n, f) => n + f.usage_bytes, 0));
  });

  it('one Idempotency-Key on 10 concurrent files.create: one body makes one file; different bodies one file and 409s', async () => {
    const key = `same-body-${Date.now()}`;
    const bytes = Buffer.from(`ten at once ${key}`);
    const same = await Promise.all(
      Array.from({ length: 10 }, async () => {
        const fd = new FormData();
        fd.append('purpose', 'assistants');
        fd.append('file', new Blob([bytes]), 'ten.txt');
        return raw('POST', '/v1/files', fd as any, { 'idempotency-key': key });
      }),
    );
    // At most 4 forms are spooled at once per process: the rest are 429 with Retry-After, never a 500.
    for (const r of same) expect([200, 409, 429], JSON.stringify(r.body)).toContain(r.status);
    for (const r of same.filter((r) => r.status === 429)) {
      expectError(r, 429, 'rate_limited');
      expect(r.headers.get('retry-after')).toBe('5');
    }
    const ok = same.filter((r) => r.status === 200);
    expect(ok.length).toBeGreaterThan(0);
    expect(new Set(ok.map((r) => r.body.id)).size).toBe(1);
    // The refused ones, sent again one by one, are that same file.
    for (const _ of same.filter((r) => r.status !== 200)) {
      const fd = new FormData();
      fd.append('purpose', 'assistants');
      fd.append('file', new Blob([bytes]), 'ten.txt');
      const again = await raw('POST', '/v1/files', fd as any, { 'idempotency-key': key });
      expect([again.status, again.body.id]).toEqual([200, ok[0].body.id]);
    }

    const key2 = `diff-body-${Date.now()}`;
    const diff = await Promise.all(
      Array.from({ length: 10 }, async (_, i) => {
        const fd = new FormData();
        fd.append('purpose', 'assistants');
        fd.append('file', new Blob([Buffer.from(`body number ${i}`)]), `diff-${i}.txt`);
        return raw('POST', '/v1/files', fd as any, { 'idempotency-key': key2 });
      }),
    );
    const made = diff.filter((r) => r.status === 200);
    for (const r of diff.filter((r) => r.status !== 200)) expect(['operation_id_reused', 'rate_limited'], JSON.stringify(r.body)).toContain(r.body?.error?.code);
    expect(made.length).toBe(1);
    const file = await client.files.retrieve(made[0].body.id);
    expect(file.filename).toBe(made[0].body.filename);
    const content = Buffer.from(await (await client.files.content(file.id)).arrayBuffer()).toString();
    expect(content).toBe(`body number ${file.filename.match(/\d+/)![0]}`);
  });
});

describe('numbers and query strings at their edges', () => {
  let vsId = '';
  beforeAll(async () => {
    vsId = (await client.vectorStores.create({ name: 'numbers' })).id;
  });

  it('list limits: 01 is 1; 1e2, -0, 0, 101, a repeated limit, an empty or huge one are 400 naming limit', async () => {
    for (const p of ['/v1/files', '/v1/vector_stores', `/v1/vector_stores/${vsId}/files`]) {
      expect((await json('GET', `${p}?limit=01`)).status).toBe(200);
      for (const bad of ['1e2', '-0', '0', '1.0', '+1', '', '99999999999999999999', '1&limit=2', '%31%00']) expectError(await json('GET', `${p}?limit=${bad}`), 400, 'invalid_body', 'limit');
      expectError(await json('GET', `${p}?order=asc&order=desc`), 400, 'invalid_body', 'order');
      expectError(await json('GET', `${p}?__proto__=1`), 400, 'unsupported_field', '__proto__');
      expectError(await json('GET', `${p}?constructor=1`), 400, 'unsupported_field', 'constructor');
      expectError(await json('GET', `${p}?after=a&after=b`), 400, 'invalid_body', 'after');
    }
    expectError(await json('GET', '/v1/responses/resp_00000000000000000000000000000000?__proto__=1'), 400, 'unsupported_field');
  });

  it('JSON numbers: -0, 1e309, 1.5 and 2^53+1 in max_num_results, expires_after, chunking and max_output_tokens are 400 naming the field', async () => {
    for (const n of ['-0', '1e309', '-1e309', '1.5', '9007199254740993', '51']) {
      expectError(await json('POST', `/v1/vector_stores/${vsId}/search`, `{"query":"x","max_num_results":${n}}`), 400, 'invalid_body', 'max_num_results');
      expectError(await json('POST', '/v1/vector_stores', `{"expires_after":{"anchor":"last_active_at","days":${n}}}`), 400, 'invalid_body', 'expires_after');
      expectError(await json('POST', `/v1/vector_stores/${vsId}`, `{"expires_after":{"anchor":"last_active_at","days":${n}}}`), 400, 'invalid_body', 'expires_after');
    }
    for (const n of ['1e309', '-0', '99.5', '4097']) {
      const r = await json('POST', `/v1/vector_stores/${vsId}/files`, `{"file_id":"file-x","chunking_strategy":{"type":"static","static":{"max_chunk_size_tokens":${n},"chunk_overlap_tokens":0}}}`);
      expectError(r, 400, 'invalid_body', 'chunking_strategy');
    }
    for (const n of ['1e309', '-1', '1.5']) {
      expectError(await json('POST', `/v1/vector_stores/${vsId}/search`, `{"query":"x","ranking_options":{"score_threshold":${n}}}`), 400, 'invalid_body', 'ranking_options.score_threshold');
      expectError(await json('POST', '/v1/responses', `{"input":"x","max_output_tokens":${n}}`), 400, 'invalid_body');
    }
    // A store with no file and days written 2.0 is 2 days (JSON says the same number).
    const two = await json('POST', '/v1/vector_stores', '{"expires_after":{"anchor":"last_active_at","days":2.0}}');
    expect([two.status, two.body.expires_after]).toEqual([200, { anchor: 'last_active_at', days: 2 }]);
  });

  it('files.create: expires_after[seconds] of 3600.0, -0, 1e4, an empty value and 10 digits are 400; 0003600 is an hour', async () => {
    const send = (seconds: string) => {
      const fd = new FormData();
      fd.append('purpose', 'assistants');
      fd.append('expires_after[anchor]', 'created_at');
      fd.append('expires_after[seconds]', seconds);
      fd.append('file', new Blob([Buffer.from(`expiry ${seconds}`)]), 'exp.txt');
      return raw('POST', '/v1/files', fd as any);
    };
    for (const s of ['3600.0', '-0', '1e4', '', '1000000000', ' 3600']) expectError(await send(s), 400, 'invalid_body', 'expires_after[seconds]');
    const ok = await send('0003600');
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.expires_at - ok.body.created_at).toBe(3600);
  });
});

describe('prototype-named keys and deep nesting', () => {
  it('vector store metadata keeps __proto__ and constructor as data, on create and update', async () => {
    const made = await json('POST', '/v1/vector_stores', '{"name":"proto","metadata":{"__proto__":"p","constructor":"c","toString":"t"}}');
    expect(made.status, JSON.stringify(made.body)).toBe(200);
    expect(made.body.metadata).toEqual(JSON.parse('{"__proto__":"p","constructor":"c","toString":"t"}'));
    const updated = await json('POST', `/v1/vector_stores/${made.body.id}`, '{"metadata":{"__proto__":"q"}}');
    expect(updated.body.metadata).toEqual(JSON.parse('{"__proto__":"q"}'));
    // An object as __proto__'s value is refused as any non-string value, never merged.
    expectError(await json('POST', '/v1/vector_stores', '{"metadata":{"__proto__":{"polluted":"yes"}}}'), 400, 'invalid_body', 'metadata');
    expect(({} as any).polluted).toBeUndefined();
  });

  it('a response keeps metadata named __proto__ as sent (or refuses it), never drops it silently', async () => {
    const r = await json('POST', '/v1/responses', '{"input":"hi","metadata":{"__proto__":"p","constructor":"c"}}');
    if (r.status === 200) expect(r.body.metadata).toEqual(JSON.parse('{"__proto__":"p","constructor":"c"}'));
    else expectError(r, 400, 'invalid_body', 'metadata');
    expectError(await json('POST', '/v1/responses', '{"input":"hi","metadata":{"__proto__":{"polluted":"yes"}}}'), 400, 'invalid_body');
    expect(({} as any).polluted).toBeUndefined();
  });

  it('a batch whose file is named __proto__ keeps that file’s attributes (batch specs are keyed by file id)', async () => {
    const id = '__proto__';
    await uploadFile(c, Buffer.from('a file named like the prototype'), 'proto.txt', 'text/plain', id);
    const vs = await client.vectorStores.create({ name: 'proto batch' });
    const batch = await json('POST', `/v1/vector_stores/${vs.id}/file_batches`, JSON.parse(`{"files":[{"file_id":"${id}","attributes":{"kind":"proto"}}]}`));
    expect(batch.status, JSON.stringify(batch.body)).toBe(200);
    const f = await json('GET', `/v1/vector_stores/${vs.id}/files/${id}`);
    expect([f.status, f.body.attributes]).toEqual([200, { kind: 'proto' }]);
    const listed = await json('GET', `/v1/vector_stores/${vs.id}/file_batches/${batch.body.id}/files`);
    expect(listed.body.data.map((x: any) => x.attributes)).toEqual([{ kind: 'proto' }]);
  });

  it('a JSON schema, hybrid_search or input nested 100,000 deep: 400 or answered, never a 500 or a crash', async () => {
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const bodies = [
      `{"input":"hi","text":{"format":{"type":"json_schema","name":"s","schema":{"type":"object","x":${deep(100_000)}}}}}`,
      `{"input":[{"role":"user","content":${deep(100_000)}}]}`,
      `{"input":"hi","metadata":{"a":${deep(100_000)}}}`,
    ];
    for (const body of bodies) {
      for (const headers of [{}, { 'idempotency-key': `deep-${Math.random().toString(36).slice(2)}` }] as Record<string, string>[]) {
        const r = await json('POST', '/v1/responses', body, headers);
        expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBeLessThan(500);
        if (r.status !== 200) expect(r.body.error.code).toMatch(/invalid_body|unsupported_field|input_too_large|invalid_messages/);
      }
    }
    expectError(await json('POST', '/v1/vector_stores', `{"name":"deep","metadata":{"a":${deep(100_000)}}}`), 400, 'invalid_body');
    expectError(await json('POST', '/v1/vector_stores/vs_00000000000000000000000000000000/search', `{"query":${deep(100_000)}}`), 400, 'invalid_body');
  });
});

describe('multipart edges', () => {
  const B70 = 'b'.repeat(60) + '0123456789';
  const formOf = (boundary: string, filePartHead: string, content = 'edge bytes', eol = '\r\n', extra = '') =>
    Buffer.from(
      `--${boundary}${eol}Content-Disposition: form-data; name="purpose"${eol}${eol}assistants${eol}` +
        `--${boundary}${eol}${filePartHead}${eol}Content-Type: text/plain${eol}${eol}${content}${eol}` +
        extra +
        `--${boundary}--${eol}`,
    );
  const post = (body: Buffer, boundary: string) => raw('POST', '/v1/files', body, { 'content-type': `multipart/form-data; boundary=${boundary}` });
  const spools = async () => {
    const { readdirSync } = await import('node:fs');
    const { SPOOL_DIR } = await import('../../lambdas/ai/openai-compat/multipart.js');
    try {
      return readdirSync(SPOOL_DIR).filter((n) => n.startsWith(`${process.pid}-`));
    } catch {
      return [];
    }
  };

  it('a boundary of exactly 70 characters is a form; quoted too', async () => {
    expect(B70.length).toBe(70);
    const r = await post(formOf(B70, 'Content-Disposition: form-data; name="file"; filename="seventy.txt"'), B70);
    expect([r.status, r.body.filename], JSON.stringify(r.body)).toEqual([200, 'seventy.txt']);
    const q = await raw('POST', '/v1/files', formOf(B70, 'Content-Disposition: form-data; name="file"; filename="quoted.txt"', 'quoted'), { 'content-type': `multipart/form-data; boundary="${B70}"` });
    expect([q.status, q.body.filename]).toEqual([200, 'quoted.txt']);
  });

  it('a body of bare LF line ends, or none at all, is 400 and leaves no spool', async () => {
    expectError(await post(formOf('lfonly', 'Content-Disposition: form-data; name="file"; filename="lf.txt"', 'lf', '\n'), 'lfonly'), 400, 'invalid_body');
    expectError(await post(Buffer.from('--flat Content-Disposition: form-data; name="file"; filename="x" hello --flat--'), 'flat'), 400, 'invalid_body');
    expect(await spools()).toEqual([]);
  });

  it('filename* with broken percent-encoding, another charset or a bad charset: a file or 400 naming file, never a 500', async () => {
    const heads = [
      `Content-Disposition: form-data; name="file"; filename*=UTF-8''%E0%A4%A`,
      `Content-Disposition: form-data; name="file"; filename*=UTF-8''%ZZbad.txt`,
      `Content-Disposition: form-data; name="file"; filename*=UTF-8''%FF%FE.txt`,
      `Content-Disposition: form-data; name="file"; filename*=UTF-8''%00.txt`,
      `Content-Disposition: form-data; name="file"; filename*=ISO-8859-1''caf%E9.txt`,
      `Content-Disposition: form-data; name="file"; filename*=x-no-such-charset''abc.txt`,
      `Content-Disposition: form-data; name="file"; filename*=UTF-8''${'%41'.repeat(5000)}`,
      `Content-Disposition: form-data; name="file"; filename="plain.txt"; filename*=UTF-8''%E2%80%AEtxt.exe`,
    ];
    for (const head of heads) {
      const r = await post(formOf('pct', head), 'pct');
      if (r.status === 200) {
        expect(r.body.filename.length).toBeGreaterThan(0);
        expect(r.body.filename).not.toMatch(/[\u0000-\u001f]/);
        expect((await client.files.retrieve(r.body.id)).filename).toBe(r.body.filename);
      } else expectError(r, 400, 'invalid_body', 'file');
    }
    expect(await spools()).toEqual([]);
  });

  it('a good file part then an unknown field, a second file or a field twice: 400, no spool and no file left', async () => {
    const before = (await client.files.list({ limit: 100 })).data.length;
    const head = 'Content-Disposition: form-data; name="file"; filename="then-bad.txt"';
    for (const extra of [
      '--tb\r\nContent-Disposition: form-data; name="zzz"\r\n\r\nv\r\n',
      '--tb\r\nContent-Disposition: form-data; name="file"; filename="two.txt"\r\n\r\nv\r\n',
      '--tb\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nuser_data\r\n',
    ]) {
      const r = await post(formOf('tb', head, 'x'.repeat(300_000), '\r\n', extra), 'tb');
      expect(r.status, JSON.stringify(r.body)).toBe(400);
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(await spools()).toEqual([]);
    expect((await client.files.list({ limit: 100 })).data.length).toBe(before);
  });
});

describe('a streamed response whose client hangs up', () => {
  it('closes the upstream stream (aborted counted), answers the next call, and keeps no half response', async () => {
    const before = w.upstream.aborted;
    const goneKey = `gone-${Date.now()}`;
    let release!: () => void;
    w.upstream.behavior = { ...w.upstream.behavior, chunks: Array.from({ length: 40 }, (_, i) => `w${i} `), chunkDelayMs: 30, holdLast: new Promise<void>((r) => (release = r)) };
    try {
      const ac = new AbortController();
      const res = await fetch(`${w.p.urls.ai}/v1/responses`, {
        method: 'POST',
        headers: { authorization: `Bearer ${w.p.credentials.secret_key}`, 'content-type': 'application/json', 'idempotency-key': goneKey },
        body: JSON.stringify({ input: 'tell me a long story', stream: true }),
        signal: ac.signal,
      });
      expect(res.status).toBe(200);
      const reader = res.body!.getReader();
      let seen = '';
      while (!seen.includes('response.output_text.delta')) seen += new TextDecoder().decode((await reader.read()).value);
      const id = /"id":"(resp_[0-9a-f]{32})"/.exec(seen)?.[1];
      ac.abort();
      await reader.cancel().catch(() => {});
      for (let i = 0; i < 100 && w.upstream.aborted === before; i++) await new Promise((r) => setTimeout(r, 50));
      expect(w.upstream.aborted).toBe(before + 1);
      // The broken answer is not a stored response.
      if (id) expectError(await json('GET', `/v1/responses/${id}`), 404, 'response_not_found');
    } finally {
      release();
      w.upstream.behavior = { ...w.upstream.behavior, chunks: ['Hel', 'lo', '!'], chunkDelayMs: 0, holdLast: undefined };
    }
    const next = await json('POST', '/v1/responses', { input: 'and now briefly' });
    expect([next.status, next.body.status]).toEqual([200, 'completed']);
    // The key the broken stream held is let go: the call sent again with it is answered, not 409 for its hold.
    const retried = await json('POST', '/v1/responses', { input: 'tell me a long story' }, { 'idempotency-key': goneKey });
    expect([retried.status, retried.body.status], JSON.stringify(retried.body)).toEqual([200, 'completed']);
    const streamed = await raw('POST', '/v1/responses', JSON.stringify({ input: 'streamed again', stream: true }));
    expect(streamed.status).toBe(200);
    expect(String(streamed.body)).toMatch(/event: response\.completed/);
  });
});

describe('npm start killed with SIGKILL mid files.create', () => {
  it('leaves no spool behind once it serves again, no half file, and the keyed retry makes the file once', async () => {
    const { mkdtempSync, readFileSync, readdirSync, rmSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { request } = await import('node:http');
    const { crashLocalProcess, startLocalProcess } = await import('../helpers/local-process.js');
    const dataDir = mkdtempSync(join(tmpdir(), 'openai-files-crash-'));
    // The child's own temporary directory: its spool directory is ours to look into.
    const tmp = mkdtempSync(join(tmpdir(), 'openai-files-crash-tmp-'));
    const spoolDir = join(tmp, 'openai-file-spool');
    const spoolFiles = () => {
      try {
        return readdirSync(spoolDir);
      } catch {
        return [];
      }
    };
    let server = await startLocalProcess({ DATA_DIR: dataDir, TMPDIR: tmp });
    try {
      const { secret_key: key } = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
      const idemKey = `crash-${Date.now()}`;
      const MiB = 1024 * 1024;
      const size = 24 * MiB;
      const bytes = Buffer.alloc(size, 'k');
      const Bd = 'crashboundary';
      const head = Buffer.from(`--${Bd}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n--${Bd}\r\nContent-Disposition: form-data; name="file"; filename="crash.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`);
      // Half the file sent, then the server is killed while it spools.
      const url = new URL(`${server.urls.ai}/v1/files`);
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: `Bearer ${key}`, 'idempotency-key': idemKey, 'content-type': `multipart/form-data; boundary=${Bd}`, 'transfer-encoding': 'chunked' } });
      req.on('error', () => {});
      req.write(head);
      for (let sent = 0; sent < size / 2; sent += MiB) req.write(bytes.subarray(sent, sent + MiB));
      for (let i = 0; i < 200 && spoolFiles().length === 0; i++) await new Promise((r) => setTimeout(r, 50));
      expect(spoolFiles()).toHaveLength(1);
      await crashLocalProcess(server);
      req.destroy();
      expect(spoolFiles()).toHaveLength(1);

      server = await startLocalProcess({ DATA_DIR: dataDir, TMPDIR: tmp });
      const sdk = new OpenAI({ apiKey: key, baseURL: `${server.urls.ai}/v1`, organization: null, project: null, maxRetries: 0 });
      expect((await sdk.files.list()).data).toEqual([]);
      // The retry, whole, with the same key: one file, and the dead process's spool is gone.
      const file = await sdk.files.create({ file: await toFile(bytes, 'crash.bin'), purpose: 'assistants' }, { headers: { 'Idempotency-Key': idemKey } });
      expect(file.bytes).toBe(size);
      expect(spoolFiles()).toEqual([]);
      expect((await sdk.files.list()).data.map((f) => f.id)).toEqual([file.id]);
      const again = await sdk.files.create({ file: await toFile(bytes, 'crash.bin'), purpose: 'assistants' }, { headers: { 'Idempotency-Key': idemKey } });
      expect(again.id).toBe(file.id);
    } finally {
      await crashLocalProcess(server);
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(tmp, { recursive: true, force: true });
    }
  }, 120_000);
});

describe('record sizes', () => {
  it('a batch whose attributes, repeated for each file, are over a record in bytes (multi-byte characters): 400, never a 500', async () => {
    const files = await Promise.all(Array.from({ length: 17 }, (_, i) => note(`big-attrs-${i}.txt`)));
    const vs = await client.vectorStores.create({ name: 'big attributes' });
    const attributes = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, '€'.repeat(512)]));
    const r = await json('POST', `/v1/vector_stores/${vs.id}/file_batches`, { file_ids: files, attributes });
    if (r.status !== 200) expectError(r, 400, 'invalid_body', 'files');
    else expect(r.body.file_counts.total).toBe(files.length);
  });
});

describe('stored response sizes', () => {
  it('a conversation under the kept characters but over a record in bytes (multi-byte text): answered, not kept, never a 500', async () => {
    const r = await json('POST', '/v1/responses', { input: '€'.repeat(140_000) });
    expect(r.status, JSON.stringify(r.body).slice(0, 300)).toBe(200);
    expect(r.body.store).toBe(false);
    expectError(await json('GET', `/v1/responses/${r.body.id}`), 404, 'response_not_found');
  });
});
