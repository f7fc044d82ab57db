/** The activity recorder: segments, timing, failure handling, and the synchronous flush in Lambda. */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Engine, KeyValueStore, KvItem, KvValue } from '../../lambdas/engine/ports.js';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { httpHandler } from '../../lambdas/http/handler.js';
import type { RouteDef } from '../../lambdas/http/routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { ACTIVITY_FIELDS, activityCaller, activityEntry, activityRecordOf, activityRecorder } from '../../lambdas/activity/activity.js';
import { inRequest } from '../../lambdas/shared/log.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import {
  ACTIVITY_COLUMNS,
  ACTIVITY_RETENTION_MS,
  ActivityRecorder,
  SEGMENT_MAX_SPAN_MS,
  activitySortKey,
  segmentEvents,
  segmentItem,
  type ActivityEntry,
} from '../../lambdas/activity/segments.js';
import { apiEvent, lambdaContext } from '../helpers/events.js';

class FakeKv {
  puts: KvItem[] = [];
  failPutOf = new Set<string>();
  delayMs = 0;
  async put(item: KvItem) {
    await new Promise((r) => setTimeout(r, this.delayMs));
    if (this.failPutOf.has(item.sk)) throw new Error('put failed');
    this.puts.push(item);
  }
  /** Every stored event's id, segment by segment. */
  ids() {
    return this.puts.map((p) => segmentEvents(p).map((e) => e.id));
  }
}

const DAY1 = 'act#org_1#2026-01-01';
const T0 = Date.parse('2026-01-01T10:00:00Z');
/** An event of partition `pk` at T0 + `ms`. */
const entry = (i: number, ms = i, extra: Partial<ActivityEntry> = {}): ActivityEntry => ({
  pk: DAY1,
  key: activitySortKey(T0 + ms, `act_${String(i).padStart(4, '0')}`),
  at: T0 + ms,
  organizationId: 'org_1',
  row: ACTIVITY_COLUMNS.map((c) => ({ id: `act_${String(i).padStart(4, '0')}`, at_ms: T0 + ms, kind: 'api.call' })[c as string] ?? null),
  filePk: null,
  bytes: 300,
  ...extra,
});
const kvOf = (fake: FakeKv) => fake as unknown as KeyValueStore;
const range = (from: number, to: number) => Array.from({ length: to - from }, (_, k) => from + k);
const ids = (from: number, to: number) => range(from, to).map((i) => `act_${String(i).padStart(4, '0')}`);

describe('ActivityRecorder', () => {
  it('writes 100 events of one day as one segment, at once, newest first and keyed by the newest', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    for (let i = 0; i < 100; i++) recorder.add(kvOf(fake), entry(i));
    expect(recorder.pending).toBe(0); // the 100th event started the write; no timer needed
    await recorder.flush();
    expect(fake.puts).toHaveLength(1);
    expect(fake.ids()[0]).toEqual(ids(0, 100).reverse());
    expect(fake.puts[0]).toMatchObject({ pk: DAY1, sk: entry(99).key, oldest_ms: T0, expires_at: Math.floor((T0 + 99 + ACTIVITY_RETENTION_MS) / 1000) });
    expect(fake.puts[0].gsi1pk).toBeUndefined();
  });

  it('writes what it holds when the interval passes', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 20 });
    for (let i = 1; i <= 3; i++) recorder.add(kvOf(fake), entry(i));
    expect(recorder.pending).toBe(3);
    await vi.waitFor(() => expect(fake.puts).toHaveLength(1), { timeout: 2000, interval: 5 });
    expect(fake.ids()).toEqual([ids(1, 4).reverse()]);
    recorder.add(kvOf(fake), entry(4));
    await vi.waitFor(() => expect(fake.ids()[1]).toEqual(ids(4, 5)), { timeout: 2000, interval: 5 });
    expect(recorder.pending).toBe(0);
  });

  it(`starts a new segment past ${SEGMENT_MAX_SPAN_MS} ms between its oldest and newest event, and per day`, async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    recorder.add(kvOf(fake), entry(1, 0));
    recorder.add(kvOf(fake), entry(2, SEGMENT_MAX_SPAN_MS)); // still within the span
    recorder.add(kvOf(fake), entry(3, SEGMENT_MAX_SPAN_MS + 1)); // past it: a new segment
    recorder.add(kvOf(fake), entry(4, 5, { pk: 'act#org_1#2026-01-02' })); // another partition
    await recorder.flush();
    const segments = fake.puts.map((p) => [p.pk, segmentEvents(p).map((e) => e.id)]);
    expect(segments).toHaveLength(3);
    expect(segments).toEqual(
      expect.arrayContaining([
        [DAY1, ['act_0002', 'act_0001']],
        [DAY1, ['act_0003']],
        ['act#org_1#2026-01-02', ['act_0004']],
      ]),
    );
  });

  it('puts an event about a file alone in a segment, in the file index', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    recorder.add(kvOf(fake), entry(1));
    recorder.add(kvOf(fake), entry(2, 2, { filePk: 'actfile#org_1#abc' }));
    recorder.add(kvOf(fake), entry(3));
    await recorder.flush();
    const file = fake.puts.find((p) => p.gsi1pk)!;
    expect(file).toMatchObject({ pk: DAY1, sk: entry(2, 2).key, gsi1pk: 'actfile#org_1#abc', gsi1sk: entry(2, 2).key });
    expect(segmentEvents(file)).toHaveLength(1);
    expect(fake.ids().sort()).toEqual([['act_0002'], ['act_0003', 'act_0001']].sort());
  });

  it('closes a segment before its estimated size passes 256 KB', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    for (let i = 0; i < 30; i++) recorder.add(kvOf(fake), entry(i, i, { bytes: 20_000 }));
    await recorder.flush();
    expect(fake.puts.map((p) => segmentEvents(p).length).sort((a, b) => b - a)).toEqual([13, 13, 4]);
  });

  it('flush waits for writes in flight', async () => {
    const fake = new FakeKv();
    fake.delayMs = 50;
    const recorder = new ActivityRecorder({ maxEvents: 2, intervalMs: 60_000 });
    recorder.add(kvOf(fake), entry(1));
    recorder.add(kvOf(fake), entry(2)); // full: starts a write now
    recorder.add(kvOf(fake), entry(3));
    await recorder.flush();
    expect(fake.ids()).toEqual([['act_0002', 'act_0001'], ['act_0003']]);
  });

  it('never throws: a failed write is logged and dropped, the other segments are written', async () => {
    const fake = new FakeKv();
    fake.failPutOf.add(entry(2, SEGMENT_MAX_SPAN_MS * 2).key);
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    recorder.add(kvOf(fake), entry(1, 0));
    recorder.add(kvOf(fake), entry(2, SEGMENT_MAX_SPAN_MS * 2));
    recorder.add(kvOf(fake), entry(3, SEGMENT_MAX_SPAN_MS * 4));
    await expect(recorder.flush()).resolves.toBeUndefined();
    expect(fake.ids().sort()).toEqual([['act_0001'], ['act_0003']]);
    expect(recorder.pending).toBe(0);
  });

  it('keeps one buffer per store and flushes only the one asked for', async () => {
    const a = new FakeKv();
    const b = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    recorder.add(kvOf(a), entry(1));
    recorder.add(kvOf(b), entry(2));
    await recorder.flush(kvOf(a));
    expect(a.puts).toHaveLength(1);
    expect(b.puts).toHaveLength(0);
    expect(recorder.pending).toBe(1);
    await recorder.flush();
    expect(b.puts).toHaveLength(1);
  });
});

describe('ActivityRecorder.addDurable (an event an answer promises: an AI call usage)', () => {
  it('resolves once the segment holding it is written: the durable adds of one turn share one write, with the events already buffered, without waiting for the interval', async () => {
    const fake = new FakeKv();
    fake.delayMs = 30;
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    recorder.add(kvOf(fake), entry(1)); // buffered before: goes with them
    let resolved = 0;
    const durable = [2, 3, 4].map((i) => recorder.addDurable(kvOf(fake), entry(i)).then(() => resolved++));
    await new Promise((r) => setImmediate(r));
    expect(resolved).toBe(0); // the write is under way, not done
    await Promise.all(durable);
    expect(fake.ids()).toEqual([ids(1, 5).reverse()]);
    expect(recorder.pending).toBe(0);
  });

  it('writes only the partitions durable adds wait for: other events stay buffered for the interval', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    recorder.add(kvOf(fake), entry(1, 1, { pk: 'act#org_2#2026-01-01' }));
    await recorder.addDurable(kvOf(fake), entry(2));
    expect(fake.ids()).toEqual([['act_0002']]);
    expect(recorder.pending).toBe(1);
  });

  it('an event filling its segment waits for that write; one about a file, for its own segment', async () => {
    const fake = new FakeKv();
    const recorder = new ActivityRecorder({ maxEvents: 2, intervalMs: 60_000 });
    recorder.add(kvOf(fake), entry(1));
    const full = recorder.addDurable(kvOf(fake), entry(2));
    const file = recorder.addDurable(kvOf(fake), entry(3, 3, { filePk: 'actfile#org_1#abc' }));
    await Promise.all([full, file]);
    expect(fake.ids()).toEqual([['act_0002', 'act_0001'], ['act_0003']]);
  });

  it('never fails the call: a failed write is logged and resolves', async () => {
    const fake = new FakeKv();
    fake.failPutOf.add(entry(1).key);
    const recorder = new ActivityRecorder({ intervalMs: 60_000 });
    await expect(recorder.addDurable(kvOf(fake), entry(1))).resolves.toBeUndefined();
    expect(fake.puts).toHaveLength(0);
    expect(recorder.pending).toBe(0);
  });
});

describe('an event through its segment', () => {
  it('comes back with every field of the record, in the spec order, organization included', () => {
    const principal: Principal = {
      kind: 'end_user', credentialId: 'tok_1', organizationId: 'org_a', applicationId: 'app_1', workspaceId: 'ws_1',
      capabilities: null, userId: 'user_7', claims: {}, origins: null, permissions: [],
    };
    const sha = 'a'.repeat(64);
    const at = Date.parse('2026-11-26T01:02:03.456Z');
    const entry = activityEntry({ principal, api: 'data', method: 'PUT', route: '/v1/databases/{database}/blobs/{sha256}', country: 'fr' }, {
      kind: 'file.upload.completed', status: 201, error_code: null, latency_ms: 12, file_id: 'f_1', file_sha256: sha, file_size: 3,
      content_type: 'text/plain', file_name: 'a.txt', related: { database: 'db1', collection_id: null, record_id: 'r1' }, bytes_in: 3, bytes_out: 70,
    }, at);
    const [stored] = segmentEvents(segmentItem({ pk: entry.pk, organizationId: 'org_a', filePk: entry.filePk, events: [entry], bytes: entry.bytes, oldest: at, newest: at }));
    const record = activityRecordOf(stored);
    expect(Object.keys(record)).toEqual([...ACTIVITY_FIELDS]);
    expect(record).toEqual({
      id: expect.stringMatching(/^act_[0-9a-z]{26}$/), at_ms: at, organization_id: 'org_a', actor_kind: 'end_user', actor_id: 'user_7',
      source: 'data', kind: 'file.upload.completed', method: 'PUT', route: '/v1/databases/{database}/blobs/{sha256}', status: 201,
      outcome: 'success', error_code: null, latency_ms: 12, file_id: 'f_1', file_sha256: sha, file_size: 3, content_type: 'text/plain',
      file_name: 'a.txt', related: { database: 'db1', collection_id: null, record_id: 'r1' }, bytes_in: 3, bytes_out: 70, country: 'FR',
      request_id: null, operation_id: null,
    });
    expect(stored.application_id).toBe('app_1');
    expect(entry).toMatchObject({ pk: 'act#org_a#2026-11-26', filePk: `actfile#org_a#${sha}`, key: `${String(at).padStart(15, '0')}#${record.id}` });
  });

  const principal: Principal = {
    kind: 'secret_key', credentialId: 'key_1', organizationId: 'org_a', applicationId: null, workspaceId: null,
    capabilities: null, userId: null, claims: null, origins: null, permissions: null,
  };
  const roundTrip = (entry: ActivityEntry, columns?: string[]) => {
    const item = segmentItem({ pk: entry.pk, organizationId: 'org_a', filePk: null, events: [entry], bytes: entry.bytes, oldest: entry.at, newest: entry.at });
    if (columns) {
      // A segment written before some columns existed: its rows hold only the columns it names.
      item.events = (item.events as KvValue[][]).map((row) => row.slice(0, columns.length));
      item.columns = columns;
    }
    return activityRecordOf(segmentEvents(item)[0]);
  };

  it('keeps the request id of the call that recorded it, and the operation id on AI calls only', () => {
    const at = Date.parse('2026-11-26T01:02:03.456Z');
    const ids = { request_id: 'req-1', operation_id: 'op-00000001' };
    const ai = inRequest(ids, () => activityEntry(activityCaller(principal, { api: 'ai', method: 'POST', route: '/v1/embeddings' }), { kind: 'api.call', status: 200 }, at));
    const data = inRequest(ids, () => activityEntry(activityCaller(principal, { api: 'data', method: 'GET', route: '/v1/databases' }), { kind: 'api.call', status: 200 }, at));
    expect(roundTrip(ai)).toMatchObject({ request_id: 'req-1', operation_id: 'op-00000001' });
    expect(roundTrip(data)).toMatchObject({ request_id: 'req-1', operation_id: null });
  });

  it('reads a segment written before request_id and operation_id existed: both null', () => {
    const at = Date.parse('2026-11-26T01:02:03.456Z');
    const entry = inRequest({ request_id: 'req-1', operation_id: 'op-00000001' }, () =>
      activityEntry(activityCaller(principal, { api: 'ai', method: 'POST', route: '/v1/embeddings' }), { kind: 'api.call', status: 200 }, at),
    );
    const before = ACTIVITY_COLUMNS.filter((c) => c !== 'request_id' && c !== 'operation_id');
    expect(before).toHaveLength(ACTIVITY_COLUMNS.length - 2);
    const record = roundTrip(entry, before);
    expect(Object.keys(record)).toEqual([...ACTIVITY_FIELDS]);
    expect(record).toMatchObject({ status: 200, request_id: null, operation_id: null });
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
  const event = (headers: Record<string, string>) =>
    apiEvent({ method: 'GET', path: '/v1/things/t1', routeKey: 'GET /v1/things/{thing}', params: { thing: 't1' }, headers });
  const ctx = lambdaContext();
  const handler = httpHandler(route, async () => ({ status: 200, body: { ok: true } }));
  const stored = async () => (await embedded.kv.query({ pk: `act#${org}#${new Date().toISOString().slice(0, 10)}` })).items.flatMap((s) => segmentEvents(s).reverse());

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
