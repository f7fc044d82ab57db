/**
 * The queue consumers of the local runtime, in the background processes (workers.ts; in the one
 * process of a test's platform), as SQS triggers a function per batch in AWS: webhook deliveries, background jobs (a vector database's removal), and the sweeps of
 * outbox entries a crashed publish left behind, of expired AI uploads and collections, of lost items, and of
 * index entries no collection item serves.
 *
 * One receiver per queue and process takes up to 10 messages at a time and hands each to the consumer
 * on its own, deleting it when its attempt is done: a receiver that takes its 10 seconds holds up its
 * own message only, never the deliveries to other receivers (at most its `maxInFlight` at once). A
 * failed message is not deleted: its lease is shortened to the queue's retrySeconds, as in AWS. A
 * receive is a write transaction on the shared SQLite file, so an idle receiver waits between tries
 * rather than spinning against the publishers, and waits longer the longer it finds nothing (idleMs
 * doubling up to maxIdleMs): five receivers polling at their shortest cost some 2 % of a core while
 * nothing runs (docs/decisions/queue-idle-backoff.md). Work sent now wakes them (`onQueued`), so only
 * delayed messages (retries) and sends no wake-up reaches are found by polling.
 */
import type { Engine, QueueConsumer, QueueMessage } from '../engine/ports.js';
import { QUEUES, retryFailedSoon, type QueueName } from '../engine/queues.js';
import { webhookConsumer } from '../events/delivery.js';
import { eventBusSender } from '../engine/index.js';
import { onDeliveryQueued, sweepOutbox } from '../events/outbox.js';
import { sweepPlatformEvents } from '../events/platform-events.js';
import { jobsConsumer } from '../consumers/jobs.js';
import { knowledgeConsumer } from '../consumers/knowledge-items.js';
import { jobEvents } from '../consumers/knowledge-jobs.js';
import { knowledgeJobsConsumer } from '../knowledge/jobs/consumer.js';
import { onJobQueued, sweepJobs } from '../knowledge/jobs/pipeline.js';
import { sweepProcessing } from '../knowledge/processing.js';
import { onItemQueued } from '../knowledge/items.js';
import { sweepExpiredCollections } from '../knowledge/collections.js';
import { sweepIndexes } from '../knowledge/index-sweep.js';
import { sweepExpiredUploads } from '../knowledge/uploads.js';
import { uploadChecksConsumer } from '../consumers/upload-checks.js';
import { inRequest, log } from '../shared/log.js';

const BATCH = 10;
const SWEEP_EVERY_MS = 5_000;

/** What each local receiver does: its consumer, how many messages at once, how long it idles (real time: the engine's clock may be a test's manual one). */
interface ReceiverOptions {
  queue: QueueName;
  consumer: QueueConsumer;
  maxInFlight: number;
  /** The wait after a receive that found less than it had room for; doubled after each such receive in a row, up to maxIdleMs. */
  idleMs: number;
  maxIdleMs?: number;
  /** Wakes an idle receiver early when this process queues a message (a hint; other processes' messages are found by polling). */
  onQueued?: (listener: () => void) => () => void;
}

export const RECEIVERS = {
  /** Deliveries wait on receivers for up to 10 s each: many at once, polled often. */
  webhooks: { maxInFlight: 64, idleMs: 25, maxIdleMs: 400 },
  /** Jobs are long and write the vector index (throttled per index on S3 Vectors): a few at once, polled less often. */
  jobs: { maxInFlight: 4, idleMs: 250, maxIdleMs: 1000 },
  /** Items parse and chunk in bounded children (knowledge/extraction-pool.ts): two at once per background process, one child each. */
  knowledge: { maxInFlight: 2, idleMs: 100, maxIdleMs: 1000 },
  /**
   * Knowledge job steps and transcription pieces: a piece waits on its upstream (KNOWLEDGE_JOB_TRANSCRIPTION_CONCURRENCY
   * at once per job), a step runs ffmpeg or waits on chat calls: eight at once per background process.
   */
  'knowledge-jobs': { maxInFlight: 8, idleMs: 100, maxIdleMs: 1000 },
  /** Each check reads a whole file (up to 5 GiB) from disk: two at once. */
  'upload-checks': { maxInFlight: 2, idleMs: 250, maxIdleMs: 1000 },
} as const;

/** Where a receiver learns that a message was just queued (a hint): this process's own sends by default, the primary's relay in a background process. */
export interface QueueWakeups {
  knowledge: (listener: () => void) => () => void;
  webhooks: (listener: () => void) => () => void;
  'knowledge-jobs': (listener: () => void) => () => void;
}

/** The sends each wake-up follows, in the process that sends. */
export const OWN_SENDS: QueueWakeups = { knowledge: onItemQueued, webhooks: onDeliveryQueued, 'knowledge-jobs': onJobQueued };

export function startQueueWorkers(engine: Engine, wakeups: QueueWakeups = OWN_SENDS): { stop(): Promise<void> } {
  const onError = (error: unknown) => log.error('queue consumer failed', { error: String(error) });
  const receivers = [
    startReceiver(engine, { queue: 'webhooks', consumer: webhookConsumer(engine, { eventBus: eventBusSender() }), ...RECEIVERS.webhooks, onQueued: wakeups.webhooks }, onError),
    startReceiver(engine, { queue: 'jobs', consumer: jobsConsumer(engine), ...RECEIVERS.jobs }, onError),
    startReceiver(engine, { queue: 'knowledge', consumer: knowledgeConsumer(engine), ...RECEIVERS.knowledge, onQueued: wakeups.knowledge }, onError),
    // A job's first step is sent by the process that served its start (woken through the primary), its
    // next steps and pieces by the process that ran the one before: both wake this receiver.
    startReceiver(engine, { queue: 'knowledge-jobs', consumer: knowledgeJobsConsumer(engine, jobEvents(engine)), ...RECEIVERS['knowledge-jobs'], onQueued: wakeups['knowledge-jobs'] }, onError),
    // AI uploads whose complete call answered 202, as lambdas/consumers/upload-checks.ts does on AWS.
    startReceiver(engine, { queue: 'upload-checks', consumer: uploadChecksConsumer(engine), ...RECEIVERS['upload-checks'] }, onError),
  ];

  let indexSweep: Promise<void> | undefined;
  const sweeper = setInterval(() => {
    void sweepOutbox(engine).catch(onError);
    void sweepPlatformEvents(engine).catch(onError);
    // Expired AI uploads' parts and bytes, as the scheduled function does on AWS (lambdas/consumers/uploads-sweep.ts).
    void sweepExpiredUploads(engine).catch(onError);
    // Expired collections' data, as lambdas/consumers/collections-sweep.ts does on AWS.
    void sweepExpiredCollections(engine).catch(onError);
    // Items whose processor died or whose message was lost, as the collections sweep does on AWS.
    void sweepProcessing(engine).catch(onError);
    // Knowledge jobs whose step's processor died, and finished jobs' events a crash left unsent.
    void sweepJobs(engine, jobEvents(engine)).catch(onError);
    // Index entries no item serves, as the collections sweep does on AWS; one run at a time, within the tick.
    if (!indexSweep) indexSweep = sweepIndexes(engine, { budgetMs: SWEEP_EVERY_MS / 2 }).then(() => undefined, onError).finally(() => (indexSweep = undefined));
  }, SWEEP_EVERY_MS);
  sweeper.unref();
  return {
    async stop() {
      clearInterval(sweeper);
      await Promise.all([...receivers.map((r) => r.stop()), indexSweep]);
    },
  };
}

/** Receives `queue` until stopped, each message handed to the consumer alone and deleted once it succeeded. */
export function startReceiver(engine: Engine, options: ReceiverOptions, onError: (error: unknown) => void): { stop(): Promise<void> } {
  const { queue, consumer, maxInFlight, idleMs } = options;
  const maxIdleMs = Math.max(idleMs, options.maxIdleMs ?? idleMs);
  const inFlight = new Set<Promise<void>>();
  let stopped = false;

  // Each message is an invocation of its own, as Lambda's: its lines get a request id.
  const handle = (message: QueueMessage) =>
    inRequest({}, async () => {
      try {
        const { failed } = await consumer([message]);
        // A failed attempt comes back after the queue's retrySeconds, as in AWS (lambdas/engine/aws/queue.ts).
        if (!failed.length) await engine.queue.delete(queue, message.receipt);
        else await retryFailedSoon(engine.queue, queue, [message.receipt], onError);
      } catch (error) {
        onError(error);
      }
    });

  // An idle receiver sleeps `waitMs` (longer each time it finds nothing), or less when a message is
  // queued or a slot frees meanwhile; either brings the wait back to idleMs.
  let wake: (() => void) | undefined;
  let waitMs = idleMs;
  const unsubscribe = options.onQueued?.(() => wake?.());
  const idle = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        wake = undefined;
        waitMs = Math.min(maxIdleMs, waitMs * 2);
        resolve();
      }, waitMs);
      wake = () => {
        clearTimeout(timer);
        wake = undefined;
        waitMs = idleMs;
        resolve();
      };
    });

  const receiving = (async () => {
    while (!stopped) {
      const room = Math.min(BATCH, maxInFlight - inFlight.size);
      let messages: QueueMessage[] = [];
      if (room > 0) {
        try {
          messages = await engine.queue.receive(queue, { max: room, visibilitySeconds: QUEUES[queue].localLeaseSeconds });
        } catch (error) {
          onError(error);
        }
      }
      if (messages.length) waitMs = idleMs;
      for (const m of messages) {
        // A freed slot wakes a receiver that was full: the next message starts now, not idleMs later.
        const task = handle(m).finally(() => {
          inFlight.delete(task);
          wake?.();
        });
        inFlight.add(task);
      }
      if (messages.length < room || room === 0) await idle();
    }
  })();

  return {
    async stop() {
      stopped = true;
      unsubscribe?.();
      wake?.();
      await receiving;
      await Promise.all(inFlight);
    },
  };
}
