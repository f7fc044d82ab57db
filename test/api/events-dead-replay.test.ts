/**
 * Replaying a dead letter through `npm start` with 2 workers: the same event_id
 * goes only to the subscriptions that never received it (spec 3). A replay completed marks its
 * subscription on the letter, a replay while one is pending queues nothing more, concurrent replays on
 * both workers queue one delivery per subscription, and the answer names the subscriptions it queued.
 * A dead letter is made fast by queueing a delivery's last attempt (5) beside the running server, on the
 * same SQLite file, to a receiver that fails: the workers attempt it and record the letter as usual.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { useLocalProcess } from '../helpers/local-process.js';
import { closeServer, listen } from '../helpers/servers.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { queueDelivery } from '../../lambdas/events/outbox.js';
import { waitFor as waitUntil } from '../helpers/wait.js';

const local = useLocalProcess('events-dead-replay-', { LOCAL_WORKERS: '2', EVENTS_ALLOW_LOOPBACK_WEBHOOKS: '1', EVENTS_RATE_LIMIT_PER_MINUTE: '0' });

/** Per path: the receiver answers 503 until told to succeed; every request is recorded with its answer. */
const failing = new Set<string>();
const received: { path: string; eventId: string; status: number }[] = [];
const receiver = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    const status = failing.has(req.url!) ? 503 : 204;
    received.push({ path: req.url!, eventId: String(req.headers['x-event-id']), status });
    res.statusCode = status;
    res.end();
  });
});
let base = '';
let workspace = '';
let subA = '';
let subB = '';

const call = async (method: string, path: string, body?: unknown) => {
  const res = await fetch(`${local.local.urls.events}/v1/workspaces/${workspace}${path}`, {
    method,
    headers: { authorization: `Bearer ${local.key}`, 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json().catch(() => undefined)) as any };
};
const stats = async () => (await call('GET', '/stats')).body;
const delivered = (path: string, eventId: string) => received.filter((r) => r.path === path && r.eventId === eventId && r.status === 204).length;
const attempted = (path: string, eventId: string) => received.filter((r) => r.path === path && r.eventId === eventId).length;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const waitFor = (what: string, probe: () => boolean | Promise<boolean>, ms = 60_000) => waitUntil(what, probe, ms, 50);

beforeAll(async () => {
  base = await listen(receiver);
  workspace = JSON.parse(readFileSync(join(local.dataDir, 'credentials.json'), 'utf8')).workspace_id;
}, 60_000);
afterAll(() => closeServer(receiver));

/** An event whose deliveries to A and B both died: published before they existed, then each given its last attempt. */
async function deadLetterForBoth(type: string): Promise<string> {
  if (!subA) {
    for (const path of ['/a', '/b']) {
      const res = await call('POST', '/subscriptions', { types: ['replay.*'], delivery: { mode: 'webhook', url: `${base}${path}` } });
      expect(res.status).toBe(201);
      if (path === '/a') subA = res.body.subscription_id;
      else subB = res.body.subscription_id;
    }
  }
  // Published to an unmatched type first, so no ordinary delivery runs beside the ones queued here.
  const published = await call('POST', '/events', { event: { type: `other.${type}`, data: { type } } });
  expect(published.status).toBe(202);
  const eventId = published.body.accepted[0].event_id as string;
  const before = await stats();
  failing.add('/a');
  failing.add('/b');
  const side = createEmbeddedEngine({ dataDir: local.dataDir });
  try {
    // `replay: true` leaves `depth` alone (these deliveries were never counted as waiting).
    for (const sub of [subA, subB]) await queueDelivery(side, { workspace_id: workspace, subscription_id: sub, event_id: eventId, attempt: 5, replay: true });
  } finally {
    await side.close();
  }
  await waitFor('both deliveries dead', async () => (await stats()).dlq_inflow - before.dlq_inflow >= 2);
  const letter = (await call('GET', '/dead')).body.dead.find((d: any) => d.event.event_id === eventId);
  expect(letter).toMatchObject({ attempts: 5, replay_count: 0, last_error: 'webhook_status_503' });
  return eventId;
}

it('sequential replays: the first queues both subscriptions, later ones queue none while pending or once delivered', async () => {
  const eventId = await deadLetterForBoth('sequential');
  const before = await stats();
  failing.delete('/a'); // A now succeeds, B still fails (its replay retries, 10 s later)

  const first = await call('POST', `/dead/${eventId}/replay`);
  expect(first.status).toBe(202);
  await waitFor('A delivered, B attempted and its retry queued', async () => delivered('/a', eventId) === 1 && attempted('/b', eventId) === 2 && (await stats()).retries > before.retries);

  // A received it; B's replay is pending (retrying): five more replays queue nothing.
  const later = [];
  for (let i = 0; i < 5; i++) {
    const again = await call('POST', `/dead/${eventId}/replay`);
    expect(again.status).toBe(202);
    later.push(again.body);
  }
  failing.delete('/b');
  await waitFor("B's retry delivered", () => delivered('/b', eventId) === 1, 90_000);
  later.push((await call('POST', `/dead/${eventId}/replay`)).body);

  await sleep(3000); // anything queued by mistake would arrive meanwhile
  expect(delivered('/a', eventId)).toBe(1);
  expect(delivered('/b', eventId)).toBe(1);
  expect((await stats()).completed - before.completed).toBe(2);
  // The letter stays, for its history: one replay counted (the six that queued nothing are not).
  const letter = (await call('GET', '/dead')).body.dead.find((d: any) => d.event.event_id === eventId);
  expect(letter).toMatchObject({ replay_count: 1, attempts: 5 });
  // The answers name what each replay queued.
  expect(first.body).toEqual({ event_id: eventId, replayed: true, queued: expect.any(Array) });
  expect([...first.body.queued].sort()).toEqual([subA, subB].sort());
  expect(later).toEqual(Array(6).fill({ event_id: eventId, replayed: false, queued: [] }));
}, 180_000);

it('seven concurrent replays over two workers queue each subscription once, and a duplicate of a replay delivery counts once', async () => {
  const eventId = await deadLetterForBoth('concurrent');
  const before = await stats();
  failing.clear();

  const answers = await Promise.all(Array.from({ length: 7 }, () => call('POST', `/dead/${eventId}/replay`)));
  expect(answers.map((a) => a.status)).toEqual(Array(7).fill(202));

  await waitFor('both delivered', () => delivered('/a', eventId) === 1 && delivered('/b', eventId) === 1);
  await sleep(3000); // deliberate: anything queued twice would arrive meanwhile
  expect(attempted('/a', eventId)).toBe(2); // the dying attempt and one replay
  expect(attempted('/b', eventId)).toBe(2);
  expect((await stats()).completed - before.completed).toBe(2);
  expect(answers.flatMap((a) => a.body.queued).sort()).toEqual([subA, subB].sort());
  for (const a of answers) expect(a.body.replayed).toBe(a.body.queued.length > 0);

  // The queue hands a replay's delivery over twice (SQS is at least once): delivered again, counted once.
  const side = createEmbeddedEngine({ dataDir: local.dataDir });
  try {
    await queueDelivery(side, { workspace_id: workspace, subscription_id: subA, event_id: eventId, attempt: 1, replay: 1 });
  } finally {
    await side.close();
  }
  await waitFor('the duplicate delivered', () => delivered('/a', eventId) === 2);
  await sleep(1000); // deliberate: a second count would land meanwhile
  expect((await stats()).completed - before.completed).toBe(2);

  // Delivered to both: a later replay still answers 202, queueing nothing.
  expect((await call('POST', `/dead/${eventId}/replay`)).body).toEqual({ event_id: eventId, replayed: false, queued: [] });
  expect((await call('POST', '/dead/evt_00000000000000000000000000/replay')).status).toBe(404);
}, 180_000);
