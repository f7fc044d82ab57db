/** The activity recorder: batching, timing, failure handling, and the synchronous flush in Lambda. */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import type { Engine, KeyValueStore, KvItem, KvWrite } from '../../lambdas/engine/ports.js';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { httpHandler } from '../../lambdas/http/handler.js';
import type { RouteDef } from '../../lambdas/http/routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { ActivityRecorder, activityRecorder } from '../../lambdas/data/activity.js';

class FakeKv {
  puts: KvItem[] = [];
  transactions: KvWrite[][] = [];
  failTransact = false;
  failPutOf = new Set<string>();
  delayMs = 0;
  async put(item: KvItem) {
    await new Promise((r) => setTimeout(r, this.delayMs));
    if (this.failPutOf.has(item.sk)) throw new Error('put failed');
    this.puts.push(item);
  }
  async transact(writes: KvWrite[]) {
    await new Promise((r) => setTimeout(r, this.delayMs));
    if (this.failTransact) throw new Error('transaction failed');
    this.transactions.push(writes);
  }
}

const item = (i: number): KvItem => ({ pk: 'act#org_1#2026-01-01', sk: `${String(i).padStart(15, '0')}#act_${i}` });
const kvOf = (fake: FakeKv) => fake as unknown as KeyValueStore;

describe('ActivityRecorder', () => {
  it('writes 100 events as one transaction of 100 puts, at once', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    for (let i = 0; i < 100; i++) recorder.add(kvOf(fake), item(i));
    expect(recorder.pending).toBe(0); // the 100th event started the write; no timer needed
    await recorder.flush();
    expect(fake.transactions).toHaveLength(1);
    expect(fake.transactions[0]).toHaveLength(100);
    expect(fake.transactions[0].map((w) => ('put' in w ? w.put.sk : '')).sort()).toEqual([...Array(100).keys()].map((i) => item(i).sk).sort());
    expect(fake.puts).toEqual([]);
  });

  it('writes fewer events when the interval passes, and a single one as a plain put', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 20 });
    recorder.add(kvOf(fake), item(1));
    recorder.add(kvOf(fake), item(2));
    recorder.add(kvOf(fake), item(3));
    expect(recorder.pending).toBe(3);
    await vi.waitFor(() => expect(fake.transactions).toHaveLength(1), { timeout: 2000, interval: 5 });
    expect(fake.transactions[0]).toHaveLength(3);
    recorder.add(kvOf(fake), item(4));
    await vi.waitFor(() => expect(fake.puts.map((p) => p.sk)).toEqual([item(4).sk]), { timeout: 2000, interval: 5 });
    expect(recorder.pending).toBe(0);
  });

  it('splits a large buffer into batches of 100 on flush', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ batchSize: 100, intervalMs: 60_000 });
    for (let i = 0; i < 250; i++) recorder.add(kvOf(fake), item(i));
    await recorder.flush();
    expect(fake.transactions.map((t) => t.length)).toEqual([100, 100, 50]);
  });

  it('flush waits for writes in flight', async () => {
    const fake = new FakeKv();
    fake.delayMs = 50;
    const recorder = new ActivityRecorder({ batchSize: 2, intervalMs: 60_000 });
    recorder.add(kvOf(fake), item(1));
    recorder.add(kvOf(fake), item(2)); // starts a write now
    recorder.add(kvOf(fake), item(3));
    await recorder.flush();
    expect(fake.transactions).toHaveLength(1);
    expect(fake.puts).toHaveLength(1);
  });

  it('never throws: a failed transaction is retried as single puts, what still fails is logged and dropped', async () => {
    const fake = new FakeKv();
    fake.failTransact = true;
    fake.failPutOf.add(item(2).sk);
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    for (let i = 1; i <= 3; i++) recorder.add(kvOf(fake), item(i));
    await expect(recorder.flush()).resolves.toBeUndefined();
    expect(fake.puts.map((p) => p.sk).sort()).toEqual([item(1).sk, item(3).sk]);
  });

  it('keeps one buffer per store and flushes only the one asked for', async () => {
    const a = new FakeKv();
    const b = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    recorder.add(kvOf(a), item(1));
    recorder.add(kvOf(b), item(2));
    await recorder.flush(kvOf(a));
    expect(a.puts).toHaveLength(1);
    expect(b.puts).toHaveLength(0);
    expect(recorder.pending).toBe(1);
    await recorder.flush();
    expect(b.puts).toHaveLength(1);
  });
});

describe('the chain records api.call', () => {
  let dir: string;
  let embedded: EmbeddedEngine;
  let key: string;
  let org: string;

  beforeAll(async () => {
    process.env.LOG_LEVEL = 'silent';
    dir = mkdtempSync(join(tmpdir(), 'act-'));
    embedded = createEmbeddedEngine({ dataDir: dir });
    const t = new Tenants(embedded.kv, () => Date.now());
    org = (await t.createOrganization('o')).id;
    key = (await t.createSecretKey(org)).key;
  });
  afterAll(async () => {
    await activityRecorder.flush();
    await embedded.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const route: RouteDef = { id: 'data.test.thing', api: 'data', method: 'GET', path: '/v1/things/{thing}', handler: 'none', grants: ['table:read'] };
  const event = (headers: Record<string, string>): APIGatewayProxyEventV2 => ({
    version: '2.0',
    routeKey: 'GET /v1/things/{thing}',
    rawPath: '/v1/things/t1',
    rawQueryString: '',
    headers,
    pathParameters: { thing: 't1' },
    isBase64Encoded: false,
    requestContext: { http: { method: 'GET', path: '/v1/things/t1', protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: '' }, requestId: 'r1' } as APIGatewayProxyEventV2['requestContext'],
  });
  const ctx = { getRemainingTimeInMillis: () => 30_000 } as Context;
  const handler = httpHandler(route, async () => ({ status: 200, body: { ok: true } }));
  const stored = async () => (await embedded.kv.query({ pk: `act#${org}#${new Date().toISOString().slice(0, 10)}` })).items;

  it('locally in the background: the answer does not wait for the write', async () => {
    useEngine(embedded);
    const res = await handler(event({ authorization: `Bearer ${key}` }), ctx);
    expect(res.statusCode).toBe(200);
    expect(activityRecorder.pending).toBe(1);
    await activityRecorder.flush();
    const items = await stored();
    expect(items).toHaveLength(1);
    expect(items[0]).toMatchObject({ kind: 'api.call', route: '/v1/things/{thing}', status: 200, outcome: 'success', bytes_out: 11 });
  });

  it('on AWS before returning (nothing runs after the answer there)', async () => {
    const aws: Engine = { ...embedded, name: 'aws' };
    useEngine(aws);
    const before = (await stored()).length;
    const res = await handler(event({ authorization: `Bearer ${key}`, 'cloudfront-viewer-country': 'fr' }), ctx);
    expect(res.statusCode).toBe(200);
    expect(activityRecorder.pending).toBe(0);
    const items = await stored();
    expect(items).toHaveLength(before + 1);
    expect(items.at(-1)).toMatchObject({ country: 'FR', method: 'GET' });
  });

  it('does not record a 401 (no organization)', async () => {
    useEngine(embedded);
    const res = await handler(event({ authorization: 'Bearer aik_' + '0'.repeat(64) }), ctx);
    expect(res.statusCode).toBe(401);
    expect(activityRecorder.pending).toBe(0);
  });
});
