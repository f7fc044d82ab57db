/** The activity log (spec section 2 "Activity record", 4.20) through the local server. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { authenticate } from '../../lambdas/auth/credentials.js';
import { bootstrap } from '../../lambdas/local/bootstrap.js';
import { startPlatform } from '../../lambdas/local/platform.js';
import { routeById } from '../../lambdas/http/routes.js';
import { activityRecorder, recordActivity, type ActivityEvent } from '../../lambdas/activity/activity.js';
import { listActivity } from '../../lambdas/activity/listing.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';

const DAY = 24 * 3600 * 1000;
const ORIGIN = 'https://app.example';
const FIELDS = [
  'id', 'at_ms', 'organization_id', 'actor_kind', 'actor_id', 'source', 'kind', 'method', 'route', 'status', 'outcome',
  'error_code', 'latency_ms', 'file_id', 'file_sha256', 'file_size', 'content_type', 'file_name', 'related',
  'bytes_in', 'bytes_out', 'country', 'request_id', 'operation_id',
];
const SHA_A = 'a'.repeat(64);
const SHA_B = 'b'.repeat(64);

describe('activity log', () => {
  // Noon UTC: the paging test crosses into the next day.
  const clock = new ManualClock(Date.UTC(2026, 2, 10, 12, 0, 0));
  let p: TestPlatform;
  let org: string;
  let appA: string;
  let appKeyA: string;
  let appKeyB: string;
  let publishableA: string;
  let otherOrgKey: string;
  let pagingKey: string;

  beforeAll(async () => {
    p = await startTestPlatform({ clock });
    org = p.credentials.organization_id;
    const t = new Tenants(p.engine.kv, () => clock.now());
    const a = await t.createApplication(p.credentials.workspace_id, 'a', []);
    const b = await t.createApplication(p.credentials.workspace_id, 'b', []);
    appA = a.id;
    appKeyA = (await t.createSecretKey(org, a.id)).key;
    appKeyB = (await t.createSecretKey(org, b.id)).key;
    publishableA = (await new PublishableKeys(p.engine.kv, () => clock.now()).create(a.id, [ORIGIN])).key;
    otherOrgKey = (await t.createSecretKey((await t.createOrganization('other')).id)).key;
    pagingKey = (await t.createSecretKey((await t.createOrganization('paging')).id)).key;
  });
  afterAll(async () => p?.close());

  const list = async (key: string, query: Record<string, string | number> = {}, headers: Record<string, string> = {}) => {
    const qs = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)]));
    const res = await fetch(`${p.urls.data}/v1/activity?${qs}`, { headers: { ...bearer(key), ...headers } });
    return { status: res.status, body: (await res.json()) as any };
  };
  const listOk = async (key: string, query: Record<string, string | number> = {}) => {
    const r = await list(key, query);
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    return r.body as { items: any[]; next_cursor: string | null; archive_searched: boolean };
  };
  const expectInvalid = async (query: Record<string, string | number>) => {
    const r = await list(p.credentials.secret_key, query);
    expect(r.status, JSON.stringify(query)).toBe(400);
    expect(r.body.error.code, JSON.stringify(query)).toBe('invalid_query');
  };
  /** Moves past every event of the earlier tests (list calls included) and returns the new now. */
  const tick = () => {
    clock.advance(1);
    return clock.now();
  };
  /** Records an event directly, as a service does, for the caller of `key` on `routeId`. */
  const record = async (key: string, routeId: string, event: ActivityEvent) => {
    const principal = await authenticate(p.engine, `Bearer ${key}`);
    const route = routeById(routeId);
    recordActivity(p.engine, { principal, api: route.api, method: route.method === 'ANY' ? null : route.method, route: route.path }, event);
  };

  it('records calls on the AI, Data and Events APIs as api.call, newest first, with every field', async () => {
    const from = tick();
    const models = await fetch(`${p.urls.ai}/v1/models`, { headers: { ...bearer(p.credentials.secret_key), 'cloudfront-viewer-country': 'de' } });
    expect(models.status).toBe(200);
    const modelsBytes = (await models.arrayBuffer()).byteLength;
    clock.advance(1);
    const put = await fetch(`${p.urls.data}/v1/databases/shop`, { method: 'PUT', headers: bearer(p.credentials.secret_key) });
    expect(put.status).toBe(201);
    const putBytes = (await put.arrayBuffer()).byteLength;
    clock.advance(1);
    const missing = await fetch(`${p.urls.events}/v1/nowhere?x=1`, { headers: bearer(p.credentials.secret_key) });
    expect(missing.status).toBe(404);
    const missingBytes = (await missing.arrayBuffer()).byteLength;
    clock.advance(1);

    const { items, next_cursor, archive_searched } = await listOk(p.credentials.secret_key, { from });
    expect(archive_searched).toBe(false);
    expect(next_cursor).toBeNull();
    expect(items).toHaveLength(3);
    for (const item of items) expect(Object.keys(item)).toEqual(FIELDS);
    const keyId = (await authenticate(p.engine, `Bearer ${p.credentials.secret_key}`)).credentialId;
    const common = {
      id: expect.stringMatching(/^act_[0-9a-z]{26}$/),
      organization_id: org,
      actor_kind: 'secret_key',
      actor_id: keyId,
      kind: 'api.call',
      method: expect.any(String),
      latency_ms: expect.any(Number),
      file_id: null,
      file_sha256: null,
      file_size: null,
      content_type: null,
      file_name: null,
      bytes_in: 0,
    };
    expect(items[0]).toEqual({
      ...common,
      at_ms: from + 2,
      source: 'events',
      method: 'GET',
      route: '/v1/nowhere',
      status: 404,
      outcome: 'client_error',
      error_code: 'not_found',
      related: null,
      bytes_out: missingBytes,
      country: null,
      request_id: missing.headers.get('x-request-id'),
      operation_id: null,
    });
    expect(items[1]).toEqual({
      ...common,
      at_ms: from + 1,
      source: 'data',
      method: 'PUT',
      route: '/v1/databases/{database}',
      status: 201,
      outcome: 'success',
      error_code: null,
      related: { database: 'shop', collection_id: null, record_id: null },
      bytes_out: putBytes,
      country: null,
      request_id: put.headers.get('x-request-id'),
      operation_id: null,
    });
    expect(items[2]).toEqual({
      ...common,
      at_ms: from,
      source: 'ai',
      method: 'GET',
      route: '/v1/models',
      status: 200,
      outcome: 'success',
      error_code: null,
      related: null,
      bytes_out: modelsBytes,
      country: 'DE',
      // The ids the answer carried: every AI answer echoes an operation id (made up for a GET without one).
      request_id: models.headers.get('x-request-id'),
      operation_id: models.headers.get('x-operation-id'),
    });
    expect(new Set(items.map((i) => i.request_id)).size).toBe(3);
    for (const item of items) expect(item.request_id).toMatch(/^[0-9a-f-]{36}$/);
    for (const item of items) expect(item.latency_ms).toBeGreaterThanOrEqual(0);
  });

  it('counts bytes in, records 403s from the credential checks, and never records a 401', async () => {
    const from = tick();
    const body = JSON.stringify({ user_id: 'user-1' });
    const minted = await fetch(`${p.urls.data}/v1/end-user-tokens`, { method: 'POST', headers: { ...bearer(appKeyA), 'content-type': 'application/json' }, body });
    expect(minted.status).toBe(200);
    clock.advance(1);
    const browser = await fetch(`${p.urls.data}/v1/databases`, { headers: { ...bearer(p.credentials.secret_key), origin: ORIGIN } });
    expect(browser.status).toBe(403);
    clock.advance(1);
    expect((await fetch(`${p.urls.data}/v1/databases`, { headers: bearer('aik_' + '0'.repeat(64)) })).status).toBe(401);
    expect((await fetch(`${p.urls.ai}/v1/models`)).status).toBe(401);
    clock.advance(1);

    const { items } = await listOk(p.credentials.secret_key, { from });
    expect(items.map((i) => [i.route, i.status, i.error_code])).toEqual([
      ['/v1/databases', 403, 'secret_key_in_browser'],
      ['/v1/end-user-tokens', 200, null],
    ]);
    expect(items[1]).toMatchObject({ method: 'POST', bytes_in: Buffer.byteLength(body), outcome: 'success' });
    expect(items[0]).toMatchObject({ outcome: 'client_error', actor_kind: 'secret_key' });
  });

  it('filters by from (inclusive) and to (exclusive)', async () => {
    const t0 = tick();
    for (let i = 0; i < 3; i++) {
      await record(p.credentials.secret_key, 'data.records.create', { kind: 'record.write', related: { database: 'shop', collection_id: 'orders', record_id: `r${i}` } });
      clock.advance(10);
    }
    const ids = async (q: Record<string, number | string>) => (await listOk(p.credentials.secret_key, { kind: 'record.write', ...q })).items.map((i) => i.related.record_id);
    expect(await ids({ from: t0 })).toEqual(['r2', 'r1', 'r0']);
    expect(await ids({ from: t0 + 10 })).toEqual(['r2', 'r1']);
    expect(await ids({ from: t0, to: t0 + 20 })).toEqual(['r1', 'r0']);
    expect(await ids({ from: t0 + 1, to: t0 + 20 })).toEqual(['r1']);
    expect(await ids({ to: t0 + 1 })).toEqual(['r0']);
  });

  it('filters by kind (comma-separated) and by file_sha256 (every event of that file)', async () => {
    const from = tick();
    const blob = (kind: ActivityEvent['kind'], sha: string, routeId: string) =>
      record(p.credentials.secret_key, routeId, { kind, file_sha256: sha, file_size: 5, content_type: 'text/plain', related: { database: 'shop' } });
    await blob('blob.write', SHA_A, 'data.blobs.put');
    clock.advance(1);
    await blob('blob.read', SHA_A, 'data.blobs.get');
    clock.advance(1);
    await blob('blob.write', SHA_B, 'data.blobs.put');
    clock.advance(1);
    await blob('blob.delete', SHA_A, 'data.blobs.delete');
    clock.advance(1);
    await record(p.credentials.secret_key, 'data.uploads.complete', { kind: 'file.upload.completed', file_sha256: SHA_A, file_id: 'file_1', file_name: 'a.txt' });
    clock.advance(1);

    const kinds = async (q: Record<string, string | number>) => (await listOk(p.credentials.secret_key, { from, ...q })).items.map((i) => [i.kind, i.file_sha256]);
    expect(await kinds({ kind: 'blob.write' })).toEqual([
      ['blob.write', SHA_B],
      ['blob.write', SHA_A],
    ]);
    expect(await kinds({ kind: 'blob.read,blob.delete' })).toEqual([
      ['blob.delete', SHA_A],
      ['blob.read', SHA_A],
    ]);
    expect(await kinds({ file_sha256: SHA_A })).toEqual([
      ['file.upload.completed', SHA_A],
      ['blob.delete', SHA_A],
      ['blob.read', SHA_A],
      ['blob.write', SHA_A],
    ]);
    expect(await kinds({ file_sha256: SHA_A, kind: 'blob.write,file.upload.completed' })).toEqual([
      ['file.upload.completed', SHA_A],
      ['blob.write', SHA_A],
    ]);
    const [upload] = (await listOk(p.credentials.secret_key, { from, kind: 'file.upload.completed' })).items;
    expect(upload).toMatchObject({ file_id: 'file_1', file_name: 'a.txt', method: 'POST', route: '/v1/databases/{database}/blobs/{sha256}/uploads/{upload_id}/complete', status: null, outcome: null, latency_ms: null });
    const [write] = (await listOk(p.credentials.secret_key, { from, kind: 'blob.write', file_sha256: SHA_B })).items;
    expect(write).toMatchObject({ file_size: 5, content_type: 'text/plain', related: { database: 'shop', collection_id: null, record_id: null } });
    // Calls on a blob route name their file too.
    const res = await fetch(`${p.urls.data}/v1/databases/shop/blobs/${SHA_B}`, { method: 'DELETE', headers: bearer(p.credentials.secret_key) });
    await res.arrayBuffer();
    const calls = (await listOk(p.credentials.secret_key, { from, kind: 'api.call', file_sha256: SHA_B })).items;
    expect(calls.map((c) => [c.route, c.status])).toEqual([['/v1/databases/{database}/blobs/{sha256}', res.status]]);
  });

  it('takes limit 1 to 500 (default 100) and answers 400 invalid_query for anything malformed', async () => {
    expect((await listOk(p.credentials.secret_key, { limit: 1 })).items).toHaveLength(1);
    expect((await listOk(p.credentials.secret_key, { limit: 500 })).next_cursor).toBeNull();
    for (const limit of ['0', '501', '-1', '1.5', 'ten', '', '1000']) await expectInvalid({ limit });
    await expectInvalid({ unknown: 'x' });
    await expectInvalid({ page: 2 });
    for (const bad of ['yesterday', '-5', '1.5', '1e12', '']) {
      await expectInvalid({ from: bad });
      await expectInvalid({ to: bad });
    }
    await expectInvalid({ from: 200, to: 100 });
    await expectInvalid({ from: 100, to: 100 });
    for (const kind of ['nope', 'api.call,', 'api.call,,blob.read', 'API.CALL', 'record', 'file.', 'files.x']) await expectInvalid({ kind });
    for (const sha of ['A'.repeat(64), 'a'.repeat(63), 'g'.repeat(64)]) await expectInvalid({ file_sha256: sha });
    expect((await listOk(p.credentials.secret_key, { kind: 'file.upload.started,file.download,api.call' })).items.length).toBeGreaterThan(0);
  });

  it('pages with an opaque cursor, newest first, across day partitions; a tampered or foreign cursor is 400', async () => {
    // 65 events late on one day, 65 early the next.
    const midnight = Date.UTC(2026, 2, 11);
    clock.advance(midnight - 65 * 1000 - clock.now());
    const day1 = clock.now();
    for (let i = 0; i < 130; i++) {
      if (i === 65) clock.advance(midnight + 5_000 - clock.now());
      await record(pagingKey, 'data.records.create', { kind: 'record.write', related: { database: 'pg', collection_id: 'c', record_id: `r${String(i).padStart(3, '0')}` } });
      clock.advance(1000);
    }
    const to = clock.now();

    const seen: any[] = [];
    let cursor: string | null = null;
    const sizes: number[] = [];
    do {
      const page = await listOk(pagingKey, cursor ? { limit: 50, cursor } : { limit: 50, to });
      sizes.push(page.items.length);
      seen.push(...page.items);
      cursor = page.next_cursor;
      clock.advance(1);
    } while (cursor);
    expect(sizes).toEqual([50, 50, 30]);
    expect(seen.map((i) => i.related.record_id)).toEqual([...Array(130).keys()].reverse().map((i) => `r${String(i).padStart(3, '0')}`));
    expect(new Set(seen.map((i) => i.id)).size).toBe(130);
    const days = new Set(seen.map((i) => new Date(i.at_ms).toISOString().slice(0, 10)));
    expect([...days]).toEqual(['2026-03-11', '2026-03-10']);
    expect(seen.at(-1).at_ms).toBe(day1);

    // The same filters may accompany the cursor; others may not. Tampering is refused.
    const first = await listOk(pagingKey, { limit: 10, to, kind: 'record.write' });
    const next = first.next_cursor!;
    expect((await listOk(pagingKey, { limit: 10, cursor: next, kind: 'record.write', to })).items[0].related.record_id).toBe('r119');
    expect((await list(pagingKey, { cursor: next, kind: 'api.call' })).body.error.code).toBe('invalid_query');
    expect((await list(pagingKey, { cursor: next, to: to - 1 })).body.error.code).toBe('invalid_query');
    const flipped = next.slice(0, 5) + (next[5] === 'A' ? 'B' : 'A') + next.slice(6);
    for (const bad of [flipped, next + 'x', next.slice(0, -1), 'not-a-cursor', Buffer.from('{"v":1}').toString('base64url') + '.x']) {
      const r = await list(pagingKey, { cursor: bad });
      expect(r.status, bad).toBe(400);
      expect(r.body.error.code).toBe('invalid_query');
    }
    // Another caller cannot use it.
    expect((await list(p.credentials.secret_key, { cursor: next })).body.error.code).toBe('invalid_query');
  });

  it("keeps organizations apart: another organization sees none of this one's activity", async () => {
    const mine = new Set((await listOk(p.credentials.secret_key, { limit: 500 })).items.map((i) => i.id));
    expect(mine.size).toBeGreaterThan(0);
    const theirs = (await listOk(otherOrgKey, { limit: 500 })).items;
    expect(theirs.filter((i) => mine.has(i.id))).toEqual([]);
    for (const item of theirs) expect(item.organization_id).not.toBe(org);
    expect((await listOk(otherOrgKey, { file_sha256: SHA_A })).items).toEqual([]);
  });

  it("shows an application-bound credential only its application's activity", async () => {
    const from = tick();
    await record(appKeyA, 'data.records.create', { kind: 'record.write', related: { database: 'a-db', record_id: 'from-a' } });
    await record(appKeyB, 'data.records.create', { kind: 'record.write', related: { database: 'b-db', record_id: 'from-b' } });
    await record(p.credentials.secret_key, 'data.records.create', { kind: 'record.write', related: { database: 'shop', record_id: 'from-org' } });
    clock.advance(1);
    const ids = async (key: string) => (await listOk(key, { from, kind: 'record.write' })).items.map((i) => i.related.record_id);
    expect(await ids(appKeyA)).toEqual(['from-a']);
    expect(await ids(appKeyB)).toEqual(['from-b']);
    expect(await ids(p.credentials.secret_key)).toEqual(['from-org', 'from-b', 'from-a']);
    // Across all kinds, app A sees only calls its own key made (the end-user token mint earlier, its list calls).
    const all = (await listOk(appKeyA, { limit: 500 })).items;
    expect(all.length).toBeGreaterThan(0);
    const keyA = (await authenticate(p.engine, `Bearer ${appKeyA}`)).credentialId;
    for (const item of all) expect(item.actor_id).toBe(keyA);
  });

  it('is for server credentials only: a publishable key or an end-user token gets 403 forbidden', async () => {
    const pk = await list(publishableA, {}, { origin: ORIGIN });
    expect(pk.status).toBe(403);
    expect(pk.body.error.code).toBe('forbidden');
    const minted: any = await (
      await fetch(`${p.urls.data}/v1/end-user-tokens`, { method: 'POST', headers: { ...bearer(appKeyA), 'content-type': 'application/json' }, body: '{"user_id":"u2"}' })
    ).json();
    const eu = await list(minted.token);
    expect(eu.status).toBe(403);
    expect(eu.body.error.code).toBe('forbidden');
    expect((await fetch(`${p.urls.data}/v1/activity`)).status).toBe(401);
    // Those refused calls are in the log too, with the caller that made them.
    const refused = (await listOk(p.credentials.secret_key, { from: clock.now() - 10, kind: 'api.call' })).items.filter((i) => i.route === '/v1/activity' && i.status === 403);
    expect(refused.map((i) => i.actor_kind).sort()).toEqual(['end_user', 'publishable_key']);
    expect(refused.find((i) => i.actor_kind === 'end_user').actor_id).toBe('u2');
  });

  it("does not show an application's key the calls of another application's key", async () => {
    const from = tick();
    await (await fetch(`${p.urls.data}/v1/databases`, { headers: bearer(appKeyB) })).arrayBuffer();
    clock.advance(1);
    expect((await listOk(appKeyA, { from, kind: 'api.call' })).items).toEqual([]);
    expect((await listOk(appKeyB, { from, kind: 'api.call' })).items.map((i) => i.route)).toEqual(['/v1/databases']);
  });
});

describe('activity on shutdown', () => {
  it('a clean shutdown writes the buffered events before the engine closes', async () => {
    process.env.LOG_LEVEL ??= 'silent';
    const dataDir = mkdtempSync(join(tmpdir(), 'platform-act-'));
    try {
      const engine = createEmbeddedEngine({ dataDir });
      const { credentials } = await bootstrap(engine, dataDir);
      const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
      registerApiOrigins(platform.urls);
      const res = await fetch(`${platform.urls.ai}/v1/models`, { headers: bearer(credentials.secret_key) });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
      const principal = await authenticate(engine, `Bearer ${credentials.secret_key}`);
      recordActivity(engine, { principal, api: 'data', method: 'PUT', route: routeById('data.blobs.put').path }, { kind: 'blob.write', file_sha256: SHA_A, file_size: 3 });
      expect(activityRecorder.pending).toBeGreaterThanOrEqual(1);
      await platform.close();
      expect(activityRecorder.pending).toBe(0);

      const reopened = createEmbeddedEngine({ dataDir });
      try {
        const page = await listActivity(
          reopened.kv,
          { organizationId: credentials.organization_id, applicationId: null },
          { from: 0, to: Date.now() + 1, kinds: null, file_sha256: null },
          { limit: 10, now: Date.now() },
        );
        expect(page.items.map((i) => [i.kind, i.route])).toEqual([
          ['blob.write', '/v1/databases/{database}/blobs/{sha256}'],
          ['api.call', '/v1/models'],
        ]);
        expect((await reopened.kv.query({ index: 'gsi1', pk: `actfile#${credentials.organization_id}#${SHA_A}` })).items).toHaveLength(1);
      } finally {
        await reopened.close();
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
