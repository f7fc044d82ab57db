/**
 * Knowledge collections on AWS (docs/ai/collections.md): the collection routes run as Lambda behind API
 * Gateway runs them (test/helpers/lambda-front.ts) over DynamoDB (dynalite), on a clock the test moves:
 * create with its kept answer in the same transaction, newest-first paging with sealed cursors, the
 * end record's 410 and the sweep, delete, and the counters' conditioned write, as DynamoDB answers them.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Clock, Engine } from '../../lambdas/engine/ports.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import { TransactionCanceledError } from '../../lambdas/engine/errors.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { collectionKey, collectionSweepKey } from '../../lambdas/knowledge/collection-keys.js';
import { countsWrite } from '../../lambdas/knowledge/collections.js';
import { sweepCollections } from '../../lambdas/consumers/collections-sweep.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { startLambdaFront, type LambdaFront } from '../helpers/lambda-front.js';

const DAY_MS = 24 * 3600 * 1000;
let offsetMs = 0;
const clock: Clock = { now: () => systemClock.now() + offsetMs, sleep: systemClock.sleep };

let engine: Engine;
let gateway: LambdaFront;
let key: string;
let org: string;
let workspace: string;
const op = () => `op-${randomUUID()}`;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  engine = (await startAwsDataEngine('ai-collections-aws', { clock })).engine;
  useEngine(engine);
  const tenants = new Tenants(engine.kv, () => clock.now());
  org = (await tenants.createOrganization('collections')).id;
  workspace = (await tenants.createWorkspace(org, 'main')).id;
  key = (await tenants.createSecretKey(org)).key;
  gateway = await startLambdaFront('ai');
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
});

async function call(method: string, path: string, body?: object, operationId = op()) {
  const res = await fetch(gateway.url + path, {
    method,
    body: body && JSON.stringify(body),
    headers: { authorization: `Bearer ${key}`, 'x-operation-id': operationId, ...(body ? { 'content-type': 'application/json' } : {}) },
  });
  return { status: res.status, replay: res.headers.get('x-idempotent-replay'), body: (await res.json()) as any };
}

describe('collections over DynamoDB', () => {
  it('creates, replays, pages newest first, counts, deletes', async () => {
    const id = op();
    const first = await call('POST', '/v1/collections', { mode: 'download', name: 'a' }, id);
    expect([first.status, first.body.status, first.body.counts.total]).toEqual([201, 'empty', 0]);
    const again = await call('POST', '/v1/collections', { mode: 'download', name: 'a' }, id);
    expect([again.status, again.replay, again.body]).toEqual([201, 'true', first.body]);
    const made = [first.body.id];
    for (let i = 0; i < 4; i++) made.push((await call('POST', '/v1/collections', { mode: 'local_vectors' })).body.id);

    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await call('GET', `/v1/collections?limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.status).toBe(200);
      seen.push(...page.body.data.map((c: any) => c.id));
      cursor = page.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual([...made].reverse());

    await engine.kv.transact([countsWrite(org, workspace, made[1], null, 'queued')]);
    await engine.kv.transact([countsWrite(org, workspace, made[1], 'queued', 'failed')]);
    expect((await call('GET', `/v1/collections/${made[1]}`)).body).toMatchObject({ status: 'failed', counts: { total: 1, failed: 1, queued: 0 } });

    expect((await call('DELETE', `/v1/collections/${made[1]}`)).body).toEqual({ id: made[1], deleted: true });
    expect((await call('GET', `/v1/collections/${made[1]}`)).status).toBe(404);
    await expect(engine.kv.transact([countsWrite(org, workspace, made[1], 'failed', null)])).rejects.toBeInstanceOf(TransactionCanceledError);
    expect(await engine.kv.get(collectionKey(org, workspace, made[1]))).toBeUndefined();
  });

  it('expires: 410 past expires_at, left out of the list, swept by the scheduled sweep, 404 once its end record lapses', async () => {
    const a = (await call('POST', '/v1/collections', { mode: 'download' })).body;
    const endsAt = Math.floor(Date.parse(a.expires_at) / 1000);
    offsetMs += 30 * DAY_MS + 1000;
    const got = await call('GET', `/v1/collections/${a.id}`);
    expect([got.status, got.body.error.code]).toEqual([410, 'collection_expired']);
    expect((await call('GET', '/v1/collections')).body.data).toEqual([]);
    const entry = collectionSweepKey(endsAt, org, workspace, a.id);
    expect(await engine.kv.get(entry)).toBeDefined();
    await sweepCollections(engine);
    expect(await engine.kv.get(entry)).toBeUndefined();
    expect((await call('GET', `/v1/collections/${a.id}`)).status).toBe(410);
    offsetMs += 30 * DAY_MS;
    expect((await call('GET', `/v1/collections/${a.id}`)).status).toBe(404);
  });
});
