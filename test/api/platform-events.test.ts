/**
 * Platform events (docs/events/platform-events.md) through the local server: Data
 * API writes of an application-bound key are published into its workspace as record.* and blob.*
 * events, in order, with the documented data and idempotency keys; a refused write publishes
 * nothing; a crash between the commit and the publish is recovered by the sweeper, once; and a
 * workspace where nobody subscribes pays no extra transaction. The engine's clock is a manual one, so
 * the sweeper's grace period and the subscription cache end without waiting.
 */
import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError, type Res } from '../helpers/data-api.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import type { KvWrite } from '../../lambdas/engine/ports.js';
import { CHANGE_OUTBOX_GRACE_MS, CHANGE_OUTBOX_SHARDS } from '../../lambdas/data/change-outbox.js';
import { sweepPlatformEvents, SUBSCRIPTION_CACHE_MS } from '../../lambdas/events/platform-events.js';

let p: TestPlatform;
const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
let org: string;
let W: string;
let appId: string;
let appKey: Record<string, string>;
let quietW: string;
let quietKey: Record<string, string>;
let subscription: string;
let streamSubscription: string;
const DB = 'shop';
const QUIET_DB = 'quiet';

const data = (cred: Record<string, string>, method: string, path: string, body?: unknown) => callApi(p.urls.data, cred, method, path, body);
const events = (method: string, path: string, body?: unknown) => callApi(p.urls.events, appKey, method, `/v1/workspaces/${W}${path}`, body);
const rec = (path = '') => `/v1/databases/${DB}/collections/notes/records${path}`;
const sha = (bytes: Uint8Array) => createHash('sha256').update(bytes).digest('hex');

async function ok(r: Promise<Res> | Res, status = 200): Promise<any> {
  const res = await r;
  expect(res.status, JSON.stringify(res.body)?.slice(0, 400)).toBe(status);
  return res.body;
}

/** Every message waiting in the subscription, oldest first, acked so the next test starts clean. */
async function drain(): Promise<any[]> {
  const out: any[] = [];
  for (;;) {
    const { messages } = await ok(events('POST', `/subscriptions/${subscription}/pull`, { max: 100 }));
    if (!messages.length) return out;
    out.push(...messages);
    await ok(events('POST', `/subscriptions/${subscription}/ack`, { ids: messages.map((m: any) => m.event_id) }));
  }
}

const envelope = (type: string, idempotencyKey: RegExp | string, eventData: unknown) => ({
  event_id: expect.stringMatching(/^evt_[0-9a-z]{26}$/),
  type,
  source: appId,
  time: expect.any(String),
  tenant: { organization_id: org, account_id: org, workspace_id: W, application_id: appId },
  idempotency_key: typeof idempotencyKey === 'string' ? idempotencyKey : expect.stringMatching(idempotencyKey),
  data: eventData,
  delivery_count: 1,
  lease_id: expect.stringMatching(/^evt_[0-9a-z]{26}\.1$/),
});

async function outboxItems() {
  const items = [];
  for (let shard = 0; shard < CHANGE_OUTBOX_SHARDS; shard++) items.push(...(await p.engine.kv.query({ pk: `dchg#${shard}` })).items);
  return items;
}

/** Wraps the engine's key-value store for one test; returns the restore. */
function intercept(kind: 'transact' | 'query' | 'delete', wrap: (original: any, args: any[]) => Promise<any>): () => void {
  const kv = p.engine.kv as any;
  const original = kv[kind].bind(kv);
  kv[kind] = (...args: any[]) => wrap(original, args);
  return () => {
    kv[kind] = original;
  };
}

beforeAll(async () => {
  p = await startTestPlatform({ clock });
  org = p.credentials.organization_id;
  W = p.credentials.workspace_id;
  const t = new Tenants(p.engine.kv, () => clock.now());
  const app = await t.createApplication(W, 'shop', []);
  appId = app.id;
  appKey = bearer((await t.createSecretKey(org, app.id)).key);
  quietW = (await t.createWorkspace(org, 'quiet')).id;
  const quietApp = await t.createApplication(quietW, 'quiet', []);
  quietKey = bearer((await t.createSecretKey(org, quietApp.id)).key);
  subscription = (await ok(events('POST', '/subscriptions', { types: ['record.*', 'blob.*'], delivery: { mode: 'pull' } }), 201)).subscription_id;
  streamSubscription = (await ok(events('POST', '/subscriptions', { types: ['record.created'], delivery: { mode: 'websocket' } }), 201)).subscription_id;
  await ok(data(appKey, 'PUT', `/v1/databases/${DB}`), 201);
  await ok(data(quietKey, 'PUT', `/v1/databases/${QUIET_DB}`), 201);
  clock.advance(SUBSCRIPTION_CACHE_MS);
});
afterAll(async () => p?.close());

describe('platform events', () => {
  it('publishes record.created, record.updated and record.deleted of single-record writes, in order, with the record as answered', async () => {
    const created = await ok(data(appKey, 'POST', rec(), { id: 'n1', title: 'first' }), 201);
    const updated = await ok(data(appKey, 'PATCH', rec('/n1'), { title: 'second' }));
    await ok(data(appKey, 'DELETE', rec('/n1')), 204);
    const got = await drain();
    expect(got).toEqual([
      envelope('record.created', new RegExp(`^rec:${DB}:notes:n1:[A-Za-z0-9_-]+:v1$`), { database: DB, collection: 'notes', record: created }),
      envelope('record.updated', new RegExp(`^rec:${DB}:notes:n1:[A-Za-z0-9_-]+:v2$`), { database: DB, collection: 'notes', record: updated }),
      envelope('record.deleted', new RegExp(`^del:${DB}:notes:n1:[A-Za-z0-9_-]+$`), { database: DB, collection: 'notes', id: 'n1' }),
    ]);
    // One life: the three keys name the same incarnation.
    const lives = got.map((e) => e.idempotency_key.split(':')[4]);
    expect(new Set(lives).size).toBe(1);
    expect(got[0].time).toBe(new Date(clock.now()).toISOString());
    expect(await outboxItems()).toEqual([]);
    // Any delivery mode: a WebSocket subscription on record.created holds that one event (pulled here).
    const { messages } = await ok(events('POST', `/subscriptions/${streamSubscription}/pull`, { max: 100 }));
    expect(messages).toEqual([{ ...got[0], event_id: got[0].event_id }]);
  });

  it('a record created again after its delete is a new event (its keys name the new life)', async () => {
    await ok(data(appKey, 'POST', rec(), { id: 'again', v: 1 }), 201);
    await ok(data(appKey, 'DELETE', rec('/again')), 204);
    await ok(data(appKey, 'POST', rec(), { id: 'again', v: 2 }), 201);
    const got = await drain();
    expect(got.map((e) => [e.type, e.data.record?.v ?? null])).toEqual([
      ['record.created', 1],
      ['record.deleted', null],
      ['record.created', 2],
    ]);
    expect(got[0].idempotency_key).not.toBe(got[2].idempotency_key);
  });

  it('publishes a batch as one event per op, in op order, from one transaction', async () => {
    await ok(data(appKey, 'POST', rec(), { id: 'b0', n: 0 }), 201);
    await drain();
    let transactions = 0;
    const restore = intercept('transact', (original, [writes]) => {
      if ((writes as KvWrite[]).some((w) => 'put' in w && String(w.put.pk).startsWith('rec#'))) transactions++;
      return original(writes);
    });
    let results: any[];
    try {
      ({ results } = await ok(
        data(appKey, 'POST', `/v1/databases/${DB}/batch`, {
          ops: [
            { op: 'create', collection: 'notes', id: 'b1', data: { n: 1 } },
            { op: 'update', collection: 'notes', id: 'b0', data: { n: 10 } },
            { op: 'create', collection: 'other', id: 'b2', data: { n: 2 } },
          ],
        }),
      ));
    } finally {
      restore();
    }
    expect(transactions).toBe(1);
    expect(await drain()).toEqual([
      envelope('record.created', /^rec:shop:notes:b1:.+:v1$/, { database: DB, collection: 'notes', record: results[0] }),
      envelope('record.updated', /^rec:shop:notes:b0:.+:v2$/, { database: DB, collection: 'notes', record: results[1] }),
      envelope('record.created', /^rec:shop:other:b2:.+:v1$/, { database: DB, collection: 'other', record: results[2] }),
    ]);
    await ok(data(appKey, 'POST', `/v1/databases/${DB}/batch`, { ops: [{ op: 'delete', collection: 'notes', id: 'b1' }, { op: 'delete', collection: 'other', id: 'b2' }] }));
    expect((await drain()).map((e) => [e.type, e.data])).toEqual([
      ['record.deleted', { database: DB, collection: 'notes', id: 'b1' }],
      ['record.deleted', { database: DB, collection: 'other', id: 'b2' }],
    ]);
  });

  it('a batch of 100 plain creates still fits (its events go out after the commit)', async () => {
    const ops = Array.from({ length: 100 }, (_, i) => ({ op: 'create', collection: 'bulk', id: `k${i}`, data: { i } }));
    await ok(data(appKey, 'POST', `/v1/databases/${DB}/batch`, { ops: ops.slice(0, 1) }));
    await drain();
    const { results } = await ok(data(appKey, 'POST', `/v1/databases/${DB}/batch`, { ops: ops.slice(1) }));
    expect(results).toHaveLength(99);
    const more = Array.from({ length: 100 }, (_, i) => ({ op: 'create', collection: 'bulk', id: `m${i}`, data: { i } }));
    await ok(data(appKey, 'POST', `/v1/databases/${DB}/batch`, { ops: more }));
    const got = await drain();
    expect(got).toHaveLength(199);
    expect(got.map((e) => e.data.record.id)).toEqual([...ops.slice(1).map((o) => o.id), ...more.map((o) => o.id)]);
    expect(await outboxItems()).toEqual([]);
  });

  it('sends a record over 16 KiB as a reference with truncated: true', async () => {
    const big = await ok(data(appKey, 'POST', rec(), { id: 'big', text: 'x'.repeat(20 * 1024) }), 201);
    const [event] = await drain();
    expect(event).toEqual(envelope('record.created', /^rec:shop:notes:big:.+:v1$/, { database: DB, collection: 'notes', id: 'big', version: big.version, truncated: true }));
  });

  it('publishes nothing for a refused write', async () => {
    await ok(data(appKey, 'POST', rec(), { id: 'dup', title: 'a' }), 201);
    await drain();
    expectError(await data(appKey, 'POST', rec(), { id: 'dup' }), 409, 'already_exists');
    expectError(await callApi(p.urls.data, appKey, 'PATCH', rec('/dup'), { title: 'b' }, { 'if-match': '"7"' }), 409, 'version_conflict');
    expectError(await data(appKey, 'DELETE', rec('/nobody')), 404, 'record_not_found');
    // A batch whose last op fails applies nothing, so publishes nothing.
    expectError(
      await data(appKey, 'POST', `/v1/databases/${DB}/batch`, { ops: [{ op: 'create', collection: 'notes', id: 'fresh', data: {} }, { op: 'create', collection: 'notes', id: 'dup', data: {} }] }),
      409,
      'already_exists',
    );
    expectError(await data(appKey, 'DELETE', `/v1/databases/${DB}/blobs/${sha(Buffer.from('never stored'))}`), 404, 'blob_not_found');
    expect(await drain()).toEqual([]);
    expect(await outboxItems()).toEqual([]);
  });

  it('publishes blob.created and blob.deleted for PUT, multipart complete and DELETE; a file already stored publishes nothing', async () => {
    const bytes = Buffer.from('platform event bytes');
    const hash = sha(bytes);
    const blobUrl = (h: string, rest = '') => `${p.urls.data}/v1/databases/${DB}/blobs/${h}${rest}`;
    expect((await fetch(blobUrl(hash), { method: 'PUT', headers: appKey, body: bytes })).status).toBe(201);
    expect((await fetch(blobUrl(hash), { method: 'PUT', headers: appKey, body: bytes })).status).toBe(200);
    expect((await fetch(blobUrl(hash), { method: 'DELETE', headers: appKey })).status).toBe(204);
    const parted = Buffer.from('one part, the last, of any size');
    const partedHash = sha(parted);
    const { upload_id } = await ok(data(appKey, 'POST', `/v1/databases/${DB}/blobs/${partedHash}/uploads`), 201);
    const part = await fetch(blobUrl(partedHash, `/uploads/${upload_id}/parts/1`), { method: 'PUT', headers: appKey, body: parted });
    expect(part.status).toBe(200);
    const { etag } = (await part.json()) as { etag: string };
    await ok(data(appKey, 'POST', `/v1/databases/${DB}/blobs/${partedHash}/uploads/${upload_id}/complete`, { parts: [{ part_number: 1, etag }] }), 201);
    const got = await drain();
    expect(got).toEqual([
      envelope('blob.created', new RegExp(`^blob:${DB}:${hash}:[0-9a-f]+:created$`), { database: DB, sha256: hash, size: bytes.length }),
      envelope('blob.deleted', new RegExp(`^blob:${DB}:${hash}:[0-9a-f]+:deleted$`), { database: DB, sha256: hash, size: bytes.length }),
      envelope('blob.created', new RegExp(`^blob:${DB}:${partedHash}:[0-9a-f]+:created$`), { database: DB, sha256: partedHash, size: parted.length }),
    ]);
    // The created and deleted events of one stored generation name it.
    expect(got[0].idempotency_key.split(':')[3]).toBe(got[1].idempotency_key.split(':')[3]);
  });

  it("an organization-wide key's writes publish nothing (it belongs to no workspace)", async () => {
    const orgKey = bearer(p.credentials.secret_key);
    await ok(data(orgKey, 'PUT', '/v1/databases/org-wide'), 201);
    await ok(data(orgKey, 'POST', '/v1/databases/org-wide/collections/notes/records', { id: 'o1' }), 201);
    expect(await drain()).toEqual([]);
  });

  it('a crash between the commit and the publish is recovered by the sweeper, and the event arrives once', async () => {
    // The publish's transaction (the event item) fails once: the write has committed, its outbox item stays.
    let failures = 1;
    const restore = intercept('transact', (original, [writes]) => {
      if (failures > 0 && (writes as KvWrite[]).some((w) => 'put' in w && String(w.put.pk).startsWith('evt#'))) {
        failures--;
        return Promise.reject(new Error('crash after the commit'));
      }
      return original(writes);
    });
    let created: any;
    try {
      created = await ok(data(appKey, 'POST', rec(), { id: 'crash1', title: 'kept' }), 201);
    } finally {
      restore();
    }
    expect(failures).toBe(0);
    expect(await drain()).toEqual([]);
    expect(await outboxItems()).toHaveLength(1);
    // Inside the grace period the sweeper leaves it (the write's own publish may still be running).
    expect(await sweepPlatformEvents(p.engine)).toBe(0);
    clock.advance(CHANGE_OUTBOX_GRACE_MS + 1);
    expect(await sweepPlatformEvents(p.engine)).toBeLessThanOrEqual(1);
    expect(await outboxItems()).toEqual([]);
    expect(await drain()).toEqual([envelope('record.created', /^rec:shop:notes:crash1:.+:v1$/, { database: DB, collection: 'notes', record: created })]);
    expect(await sweepPlatformEvents(p.engine)).toBe(0);
  });

  it('a batch that fills its transaction and whose publish fails leaves an outbox item for the sweeper', async () => {
    let failures = 1;
    let outboxInTransaction = false;
    const restore = intercept('transact', (original, [writes]) => {
      const ws = writes as KvWrite[];
      if (ws.some((w) => 'put' in w && String(w.put.pk).startsWith('rec#')) && ws.some((w) => 'put' in w && String(w.put.pk).startsWith('dchg#'))) outboxInTransaction = true;
      if (failures > 0 && ws.some((w) => 'put' in w && String(w.put.pk).startsWith('evt#'))) {
        failures--;
        return Promise.reject(new Error('publish failed'));
      }
      return original(writes);
    });
    const ops = Array.from({ length: 100 }, (_, i) => ({ op: 'create', collection: 'bulk', id: `f${i}`, data: { i } }));
    try {
      await ok(data(appKey, 'POST', `/v1/databases/${DB}/batch`, { ops }));
    } finally {
      restore();
    }
    expect(outboxInTransaction).toBe(false); // 100 record writes: no room, published after the commit
    expect(await outboxItems()).toHaveLength(1);
    clock.advance(CHANGE_OUTBOX_GRACE_MS + 1);
    await sweepPlatformEvents(p.engine);
    expect(await outboxItems()).toEqual([]);
    // Each once. The events that had gone out keep their place; the one recovered comes after them
    // (docs/events/platform-events.md, "Order").
    const ids = (await drain()).map((e) => e.data.record.id);
    expect(ids).toHaveLength(100);
    expect([...ids].sort()).toEqual(ops.map((o) => o.id).sort());
  });

  it('a re-publish of events that did go out (a crash before the outbox item was deleted) is deduplicated', async () => {
    let failures = 1;
    const restore = intercept('delete', (original, [key, condition]) => {
      if (failures > 0 && String(key.pk).startsWith('dchg#')) {
        failures--;
        return Promise.reject(new Error('crash before the outbox delete'));
      }
      return original(key, condition);
    });
    try {
      await ok(data(appKey, 'POST', `/v1/databases/${DB}/batch`, { ops: [{ op: 'create', collection: 'notes', id: 'twice1', data: {} }, { op: 'create', collection: 'notes', id: 'twice2', data: {} }] }));
    } finally {
      restore();
    }
    expect(failures).toBe(0);
    expect(await outboxItems()).toHaveLength(1);
    clock.advance(CHANGE_OUTBOX_GRACE_MS + 1);
    await sweepPlatformEvents(p.engine);
    expect(await outboxItems()).toEqual([]);
    expect((await drain()).map((e) => e.data.record.id)).toEqual(['twice1', 'twice2']);
  });

  it('costs nothing where nobody subscribes: no outbox write, no extra transaction, at most one cached read per second', async () => {
    const q = (path: string) => `/v1/databases/${QUIET_DB}/collections/notes/records${path}`;
    await ok(data(quietKey, 'POST', q(''), { id: 'warm' }), 201);
    clock.advance(SUBSCRIPTION_CACHE_MS);
    let recordTransactions = 0;
    let outboxWrites = 0;
    let subscriptionReads = 0;
    const restoreTransact = intercept('transact', (original, [writes]) => {
      const ws = writes as KvWrite[];
      if (ws.some((w) => 'put' in w && String(w.put.pk).startsWith('dchg#'))) outboxWrites++;
      if (ws.some((w) => ('put' in w && String(w.put.pk).startsWith('rec#')) || ('delete' in w && String(w.delete.pk).startsWith('rec#')))) recordTransactions++;
      return original(writes);
    });
    const restoreQuery = intercept('query', (original, [query]) => {
      if (String(query.pk) === `evsub#${quietW}`) subscriptionReads++;
      return original(query);
    });
    try {
      for (let i = 0; i < 5; i++) await ok(data(quietKey, 'POST', q(''), { id: `q${i}` }), 201);
      await ok(data(quietKey, 'PATCH', q('/q0'), { title: 'x' }));
      await ok(data(quietKey, 'DELETE', q('/q1')), 204);
      await ok(data(quietKey, 'POST', `/v1/databases/${QUIET_DB}/batch`, { ops: [{ op: 'create', collection: 'notes', id: 'qb', data: {} }, { op: 'delete', collection: 'notes', id: 'q2' }] }));
      const bytes = Buffer.from('quiet bytes');
      expect((await fetch(`${p.urls.data}/v1/databases/${QUIET_DB}/blobs/${sha(bytes)}`, { method: 'PUT', headers: quietKey, body: bytes })).status).toBe(201);
    } finally {
      restoreTransact();
      restoreQuery();
    }
    expect(recordTransactions).toBe(8);
    expect(outboxWrites).toBe(0);
    expect(subscriptionReads).toBe(1);
    expect(await outboxItems()).toEqual([]);
    // Nothing reached the subscribed workspace either.
    expect(await drain()).toEqual([]);
  });
});
