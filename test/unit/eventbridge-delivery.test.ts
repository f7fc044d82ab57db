/**
 * The EventBridge destination (docs/events/eventbridge.md) over the real AWS adapter with
 * aws-sdk-client-mock: the webhooks queue consumer's eventbridge deliveries share PutEvents calls of
 * at most 10 entries and 256 KB, a failed entry is retried alone on the webhooks' ladder, a throttled
 * call is retried on the ladder, and after the fifth attempt the event is a dead letter with
 * `last_error` `eventbridge_<Code>`, which a replay sends to the bus again.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventBridgeClient, PutEventsCommand, type PutEventsCommandInput, type PutEventsResultEntry } from '@aws-sdk/client-eventbridge';
import { mockClient } from 'aws-sdk-client-mock';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { AwsEventBusSender } from '../../lambdas/engine/aws/event-bus.js';
import { PUT_EVENTS_MAX_BYTES, entryBytes } from '../../lambdas/engine/event-bus.js';
import type { QueueMessage } from '../../lambdas/engine/ports.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { MAX_ATTEMPTS, retryDelaySeconds, webhookConsumer } from '../../lambdas/events/delivery.js';
import { listDeadLetters, replayDeadLetter } from '../../lambdas/events/dead-letters.js';
import { allowEventBus, ENTRY_SOURCE, revokeEventBus } from '../../lambdas/events/eventbridge.js';
import { eventKey } from '../../lambdas/events/keys.js';
import { workspaceStats } from '../../lambdas/events/stats.js';
import { Subscriptions } from '../../lambdas/events/subscriptions.js';
import { newId } from '../../lambdas/shared/ids.js';
import { useSettings } from '../../lambdas/shared/settings.js';

const BUS = 'arn:aws:events:eu-west-1:123456789012:event-bus/orders';
const OTHER_REGION_BUS = 'arn:aws:events:us-east-1:123456789012:event-bus/audit';
const eb = mockClient(EventBridgeClient);

let now = Date.UTC(2026, 10, 27, 12);
const clock = { now: () => now, sleep: async () => {} };
let engine: EmbeddedEngine;
let dataDir: string;
let org: string;
let ws: string;

/** Every PutEvents call's entries, in call order. */
const calls = () => eb.commandCalls(PutEventsCommand).map((c) => (c.args[0].input as PutEventsCommandInput).Entries!);
const ok = (input: PutEventsCommandInput): { Entries: PutEventsResultEntry[]; FailedEntryCount: number } => ({ Entries: input.Entries!.map((_, i) => ({ EventId: `e${i}` })), FailedEntryCount: 0 });

beforeAll(() => {
  useSettings({ awsEndpointUrl: 'http://127.0.0.1:9' }); // the mock answers; nothing is sent
});
afterAll(() => useSettings());

beforeEach(async () => {
  eb.reset();
  dataDir = mkdtempSync(join(tmpdir(), 'eventbridge-'));
  engine = createEmbeddedEngine({ dataDir, clock });
  const tenants = new Tenants(engine.kv, () => now);
  org = (await tenants.createOrganization('acme')).id;
  ws = (await tenants.createWorkspace(org, 'main')).id;
  await allowEventBus(engine, org, BUS);
  await allowEventBus(engine, org, OTHER_REGION_BUS);
});
afterEach(async () => {
  await engine.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const subscribe = async (delivery: Record<string, unknown>) => (await new Subscriptions(engine).create(ws, { types: ['*'], delivery: { mode: 'eventbridge', ...delivery } })).subscription_id;

/** Stores `n` events (as publish would) and answers their queue messages for `sub`. */
async function events(sub: string, n: number, dataBytes = 10): Promise<QueueMessage[]> {
  const out: QueueMessage[] = [];
  for (let i = 0; i < n; i++) {
    const event_id = newId('evt', now);
    const envelope = JSON.stringify({ event_id, type: 'order.paid', source: 'test', time: new Date(now).toISOString(), data: { i, pad: 'x'.repeat(dataBytes) } });
    await engine.kv.put({ ...eventKey(ws, event_id), type: 'order.paid', tier: 'basic', envelope });
    out.push({ id: `m${i}`, receipt: `r${i}`, receiveCount: 1, body: JSON.stringify({ workspace_id: ws, subscription_id: sub, event_id, attempt: 1 }) });
  }
  return out;
}

const consumer = () => webhookConsumer(engine, { eventBus: new AwsEventBusSender('http://127.0.0.1:9') });
/** The webhooks queue's messages due now (a retry is due after its delay). */
const due = async () => {
  const got = await engine.queue.receive('webhooks', { max: 10, visibilitySeconds: 30 });
  for (const m of got) await engine.queue.delete('webhooks', m.receipt);
  return got;
};
const stats = () => workspaceStats(engine, ws, []);

describe('eventbridge deliveries', () => {
  it('put the envelope as detail, the type (or detail_type) as DetailType, ten entries a call', async () => {
    eb.on(PutEventsCommand).callsFake(ok);
    const sub = await subscribe({ event_bus_arn: BUS });
    const messages = await events(sub, 25);
    expect(await consumer()(messages)).toEqual({ failed: [] });
    expect(calls().map((c) => c.length)).toEqual([10, 10, 5]);
    const first = calls()[0][0];
    const stored = await engine.kv.get(eventKey(ws, JSON.parse(messages[0].body).event_id));
    expect(first).toMatchObject({ EventBusName: BUS, Source: ENTRY_SOURCE, DetailType: 'order.paid', Detail: stored!.envelope });
    expect((await stats()).completed).toBe(25);

    eb.reset();
    eb.on(PutEventsCommand).callsFake(ok);
    const named = await subscribe({ event_bus_arn: BUS, detail_type: 'Order Event' });
    await consumer()(await events(named, 1));
    expect(calls()[0][0].DetailType).toBe('Order Event');
  });

  it('keep each call within 256 KB, and a call per region', async () => {
    eb.on(PutEventsCommand).callsFake(ok);
    const sub = await subscribe({ event_bus_arn: BUS });
    const messages = await events(sub, 10, 40_000); // about 40 KB each: six fit in 256 KB
    await consumer()(messages);
    const sizes = calls().map((c) => c.reduce((n, e) => n + entryBytes({ eventBusArn: e.EventBusName!, source: e.Source!, detailType: e.DetailType!, detail: e.Detail!, time: e.Time! }), 0));
    expect(calls().map((c) => c.length)).toEqual([6, 4]);
    for (const size of sizes) expect(size).toBeLessThanOrEqual(PUT_EVENTS_MAX_BYTES);

    eb.reset();
    eb.on(PutEventsCommand).callsFake(ok);
    const other = await subscribe({ event_bus_arn: OTHER_REGION_BUS });
    await consumer()([...(await events(sub, 2)), ...(await events(other, 2))]);
    expect(calls().map((c) => c.map((e) => e.EventBusName)).sort()).toEqual([[OTHER_REGION_BUS, OTHER_REGION_BUS], [BUS, BUS]].sort());
  });

  it('retry a failed entry alone, on the ladder, while the others complete', async () => {
    // The second and fourth entries fail (as EventBridge answers a partial failure); later calls succeed.
    eb.on(PutEventsCommand)
      .callsFakeOnce((input: PutEventsCommandInput) => ({
        FailedEntryCount: 2,
        Entries: input.Entries!.map((_, i) => (i === 1 || i === 3 ? { ErrorCode: 'InternalFailure', ErrorMessage: 'try again' } : { EventId: `e${i}` })),
      }))
      .callsFake(ok);
    const sub = await subscribe({ event_bus_arn: BUS });
    const messages = await events(sub, 5);
    await consumer()(messages);
    expect(await stats()).toMatchObject({ completed: 3, retries: 2 });

    expect(await due()).toEqual([]); // not before the ladder's 10 s
    now += retryDelaySeconds(1) * 1000;
    const retried = await due();
    expect(retried.map((m) => JSON.parse(m.body).event_id).sort()).toEqual([1, 3].map((i) => JSON.parse(messages[i].body).event_id).sort());
    expect(retried.map((m) => JSON.parse(m.body).attempt)).toEqual([2, 2]);
    await consumer()(retried);
    expect(calls().map((c) => c.length)).toEqual([5, 2]);
    expect(calls()[1].map((e) => e.Detail)).toEqual(calls()[0].filter((_, i) => i === 1 || i === 3).map((e) => e.Detail));
    expect(await stats()).toMatchObject({ completed: 5, retries: 2 });
  });

  it('retry a throttled call on the ladder, then dead-letter it with last_error eventbridge_ThrottlingException; a replay puts it again', async () => {
    eb.on(PutEventsCommand).rejects(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    const sub = await subscribe({ event_bus_arn: BUS });
    let batch = await events(sub, 1);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      expect(JSON.parse(batch[0].body).attempt).toBe(attempt);
      await consumer()(batch);
      if (attempt === MAX_ATTEMPTS) break;
      now += retryDelaySeconds(attempt) * 1000 - 1000;
      expect(await due()).toEqual([]); // one second early: not yet
      now += 1000;
      batch = await due();
      expect(batch).toHaveLength(1);
    }
    expect(calls()).toHaveLength(MAX_ATTEMPTS);
    now += 3_600_000;
    expect(await due()).toEqual([]);
    const [dead] = await listDeadLetters(engine, ws, 10);
    expect(dead).toMatchObject({ attempts: MAX_ATTEMPTS, last_error: 'eventbridge_ThrottlingException' });
    expect(await stats()).toMatchObject({ retries: MAX_ATTEMPTS - 1, dlq_inflow: 1, completed: 0 });

    eb.reset();
    eb.on(PutEventsCommand).callsFake(ok);
    await replayDeadLetter(engine, ws, (dead.event as { event_id: string }).event_id);
    const replayed = await due();
    expect(replayed.map((m) => JSON.parse(m.body))).toMatchObject([{ subscription_id: sub, attempt: 1, replay: 1 }]);
    await consumer()(replayed);
    expect(calls()).toHaveLength(1);
    expect(calls()[0][0].EventBusName).toBe(BUS);
  });

  it('dead-letter an entry that fails every attempt with last_error eventbridge_<ErrorCode>', async () => {
    eb.on(PutEventsCommand).callsFake((input: PutEventsCommandInput) => ({ FailedEntryCount: 1, Entries: input.Entries!.map(() => ({ ErrorCode: 'AccessDeniedException', ErrorMessage: 'no' })) }));
    const sub = await subscribe({ event_bus_arn: BUS });
    let batch = await events(sub, 1);
    for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
      await consumer()(batch);
      now += retryDelaySeconds(attempt) * 1000;
      batch = await due();
    }
    expect(batch).toEqual([]);
    expect((await listDeadLetters(engine, ws, 10))[0]).toMatchObject({ attempts: MAX_ATTEMPTS, last_error: 'eventbridge_AccessDeniedException' });
  });

  it('put nothing on a bus the organization no longer allows (last_error eventbridge_bus_not_allowed after the ladder)', async () => {
    eb.on(PutEventsCommand).callsFake(ok);
    const sub = await subscribe({ event_bus_arn: BUS });
    await revokeEventBus(engine, org, BUS);
    await consumer()(await events(sub, 1));
    expect(calls()).toEqual([]);
    expect(await stats()).toMatchObject({ retries: 1 });
  });

  it('share a batch with webhook messages without waiting for them', async () => {
    eb.on(PutEventsCommand).callsFake(ok);
    const sub = await subscribe({ event_bus_arn: BUS });
    const gone = { id: 'x', receipt: 'x', receiveCount: 1, body: JSON.stringify({ workspace_id: ws, subscription_id: 'sub_00000000000000000000000000', event_id: 'evt_x', attempt: 1 }) };
    const junk = { id: 'y', receipt: 'y', receiveCount: 1, body: 'not json' };
    expect(await consumer()([gone, ...(await events(sub, 3)), junk])).toEqual({ failed: [] });
    expect(calls().map((c) => c.length)).toEqual([3]);
  });
});
