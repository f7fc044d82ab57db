/**
 * The local runtime's queue receivers (lambdas/local/queue-workers.ts) on the embedded queue: a
 * message whose consumer succeeds is deleted, a failed one comes back after its queue's retrySeconds
 * (as in AWS, lambdas/engine/aws/queue.ts), at most `maxInFlight` run at once, and a freed slot takes the next at once; and the jobs queue has its receiver beside
 * the webhooks one, running the jobs consumer; a knowledge job's message sent by this process wakes its idle receiver.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import type { Engine, QueueMessage } from '../../lambdas/engine/ports.js';
import { QUEUES } from '../../lambdas/engine/queues.js';
import { RECEIVERS, startQueueWorkers, startReceiver } from '../../lambdas/local/queue-workers.js';
import { JOBS_QUEUE, sendStep } from '../../lambdas/knowledge/jobs/pipeline.js';
import { waitFor } from '../helpers/wait.js';

let dir: string;
let engine: Engine;
let clock: ManualClock;
const errors: unknown[] = [];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'queue-workers-'));
  clock = new ManualClock(Date.UTC(2026, 10, 27));

  engine = createEmbeddedEngine({ dataDir: dir, clock });
  errors.length = 0;
});
afterEach(async () => {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

/** What is in the queue now, received and handed back at once (a 0 s lease). */
const pending = async (queue: string) => (await engine.queue.receive(queue, { max: 10, visibilitySeconds: 0 })).map((m) => m.body).sort();

describe('a local receiver', () => {
  it("deletes a message its consumer took, and brings a failed one back after the queue's retrySeconds", async () => {
    const seen: string[] = [];
    const receiver = startReceiver(
      engine,
      {
        queue: 'jobs',
        consumer: async ([m]) => (seen.push(m.body), { failed: m.body === 'bad' ? [m.id] : [] }),
        maxInFlight: 4,
        idleMs: 5,
      },
      (e) => errors.push(e),
    );
    await engine.queue.send('jobs', 'good');
    await engine.queue.send('jobs', 'bad');
    await waitFor('both messages', () => seen.length === 2, 5000);
    // Still leased: not received again while its lease runs.
    await new Promise((r) => setTimeout(r, 50));
    expect(seen.sort()).toEqual(['bad', 'good']);
    // Its lease was shortened to the queue's retrySeconds (far under the visibility timeout, six times
    // the AWS consumer's timeout): not back a second before, back just after, tried again (and stays, failing).
    expect(QUEUES.jobs.retrySeconds).toBeLessThan(QUEUES.jobs.visibilitySeconds);
    clock.advance(QUEUES.jobs.retrySeconds * 1000 - 1000);
    await new Promise((r) => setTimeout(r, 50));
    expect(seen).toHaveLength(2);
    clock.advance(1001);
    await waitFor('the failed message again', () => seen.length === 3, 5000);
    expect(seen.filter((b) => b === 'bad')).toHaveLength(2);
    await receiver.stop();
    clock.advance(QUEUES.jobs.retrySeconds * 1000 + 1);
    expect(await pending('jobs')).toEqual(['bad']);
    expect(errors).toEqual([]);
  });

  it(`runs at most maxInFlight messages at once`, async () => {
    let running = 0;
    let most = 0;
    let started = 0;
    const release: (() => void)[] = [];
    const receiver = startReceiver(
      engine,
      {
        queue: 'jobs',
        consumer: async () => {
          started++;
          most = Math.max(most, ++running);
          await new Promise<void>((r) => release.push(r));
          running--;
          return { failed: [] };
        },
        maxInFlight: 3,
        idleMs: 5,
      },
      (e) => errors.push(e),
    );
    for (let i = 0; i < 7; i++) await engine.queue.send('jobs', `m${i}`);
    await waitFor('three running', () => release.length === 3, 5000);
    await new Promise((r) => setTimeout(r, 50));
    expect(most).toBe(3);
    // Let them finish a round at a time until all seven ran.
    await waitFor(
      'all seven',
      () => {
        release.splice(0).forEach((r) => r());
        return started === 7 && running === 0;
      },
      10_000,
    );
    await receiver.stop();
    expect(most).toBe(3);
    expect(await pending('jobs')).toEqual([]);
  });

  it('waits longer the longer it finds nothing (up to maxIdleMs), and a wake-up brings it back at once', async () => {
    let receives = 0;
    const receive = engine.queue.receive.bind(engine.queue);
    engine.queue.receive = (...args) => (receives++, receive(...args));
    const listeners = new Set<() => void>();
    const seen: string[] = [];
    const receiver = startReceiver(
      engine,
      { queue: 'jobs', consumer: async ([m]) => (seen.push(m.body), { failed: [] }), maxInFlight: 4, idleMs: 5, maxIdleMs: 200, onQueued: (l) => (listeners.add(l), () => listeners.delete(l)) },
      (e) => errors.push(e),
    );
    await new Promise((r) => setTimeout(r, 1_500));
    // At 5 ms a try it would be some 300; doubling to 200 ms: 5+10+...+160 (6 tries, 315 ms), then one each 200 ms.
    expect(receives).toBeGreaterThanOrEqual(6);
    expect(receives).toBeLessThanOrEqual(16);
    // Sent with a wake-up: taken well before the 200 ms wait would end, and the wait is short again after it.
    await engine.queue.send('jobs', 'now');
    const sent = Date.now();
    for (const l of listeners) l();
    await waitFor('the woken message', () => seen.length === 1, 5000);
    expect(Date.now() - sent).toBeLessThan(150);
    await engine.queue.send('jobs', 'next'); // no wake-up: found by the short poll that follows a message
    await waitFor('the next message', () => seen.length === 2, 5000);
    expect(Date.now() - sent).toBeLessThan(150);
    await receiver.stop();
    expect(errors).toEqual([]);
  });

  it('takes the next message as soon as a slot frees, not after idling', async () => {
    const seen: string[] = [];
    for (let i = 0; i < 3; i++) await engine.queue.send('jobs', `m${i}`);
    // An idle time far past the test's: only a freed slot's wake-up lets the later messages run.
    const receiver = startReceiver(engine, { queue: 'jobs', consumer: async ([m]) => (seen.push(m.body), { failed: [] }), maxInFlight: 1, idleMs: 60_000 }, (e) => errors.push(e));
    await waitFor('all three', () => seen.length === 3, 3_000);
    await receiver.stop();
    expect(seen.sort()).toEqual(['m0', 'm1', 'm2']);
    expect(errors).toEqual([]);
  });
});

describe('the local queue workers', () => {
  it('run the jobs consumer on the jobs queue: a job of no known kind is dropped (deleted), not retried', async () => {
    const workers = startQueueWorkers(engine);
    await engine.queue.send('jobs', JSON.stringify({ kind: 'no-such-kind' }));
    await engine.queue.send('jobs', 'not json');
    // The jobs receiver polls every 250 ms when idle: give it a few turns.
    await new Promise((r) => setTimeout(r, 1000));
    await workers.stop();
    // Both taken and deleted: nothing comes back after their leases, nothing went to jobs-dead.
    clock.advance(QUEUES.jobs.localLeaseSeconds * 1000 + 1);
    expect(await pending('jobs')).toEqual([]);
    const dead: QueueMessage[] = await engine.queue.receive('jobs-dead', { max: 10, visibilitySeconds: 0 });
    expect(dead).toEqual([]);
  });

  it("wake the knowledge-jobs receiver when this process sends a job's step, not after its idle time", async () => {
    // An idle time far past the test's (restored after): only the send's wake-up lets the message run.
    const receivers = RECEIVERS as unknown as Record<string, { idleMs: number }>;
    const idleMs = receivers[JOBS_QUEUE].idleMs;
    receivers[JOBS_QUEUE].idleMs = 60_000;
    const workers = startQueueWorkers(engine);
    try {
      // The receiver found the queue empty and sleeps.
      await new Promise((r) => setTimeout(r, 300));
      // A step of a job that does not exist: the consumer drops it (deleted, not retried).
      await sendStep(engine, { org: 'org_x', app: '-', job: 'job_none', step: 'probe' });
      // Looked at once (each look is a receive, and five send it to the dead letters): taken and deleted, not dead-lettered.
      await new Promise((r) => setTimeout(r, 1_000));
      expect(await pending(JOBS_QUEUE)).toEqual([]);
      expect(await pending(`${JOBS_QUEUE}-dead`)).toEqual([]);
    } finally {
      receivers[JOBS_QUEUE].idleMs = idleMs;
      await workers.stop();
    }
    expect(errors).toEqual([]);
  });
});
