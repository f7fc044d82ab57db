/**
 * The queue consumers of the local runtime, in every worker process, as SQS triggers a function per
 * batch in AWS: webhook deliveries, and the sweep of outbox entries a crashed publish left behind.
 *
 * One receiver per process takes up to 10 messages at a time and hands each to the consumer on its
 * own, deleting it when its attempt is done: a receiver that takes its 10 seconds holds up its own
 * message only, never the deliveries to other receivers (at most MAX_IN_FLIGHT at once). A receive is
 * a write transaction on the shared SQLite file, so an idle receiver waits IDLE_MS between tries
 * rather than spinning against the publishers.
 */
import type { Engine, QueueMessage } from '../engine/ports.js';
import { QUEUES } from '../engine/queues.js';
import { webhookConsumer } from '../events/delivery.js';
import { eventBusSender } from '../engine/index.js';
import { onDeliveryQueued, sweepOutbox } from '../events/outbox.js';
import { sweepPlatformEvents } from '../events/platform-events.js';
import { inRequest, log } from '../shared/log.js';

const MAX_IN_FLIGHT = 64;
const BATCH = 10;
/** Pause of an idle receiver, real time (the engine's clock may be a test's manual one). */
const IDLE_MS = 25;
const SWEEP_EVERY_MS = 5_000;

export function startQueueWorkers(engine: Engine): { stop(): Promise<void> } {
  const onError = (error: unknown) => log.error('queue consumer failed', { error: String(error) });
  const consumer = webhookConsumer(engine, { eventBus: eventBusSender() });
  const inFlight = new Set<Promise<void>>();
  let stopped = false;

  // Each message is an invocation of its own, as Lambda's: its lines get a request id.
  const handle = (message: QueueMessage) =>
    inRequest({}, async () => {
      try {
        const { failed } = await consumer([message]);
        // A failed attempt stays leased and comes back when its lease ends, as in SQS.
        if (!failed.length) await engine.queue.delete('webhooks', message.receipt);
      } catch (error) {
        onError(error);
      }
    });

  // An idle receiver sleeps IDLE_MS, or less when this process queues a delivery meanwhile.
  let wake: (() => void) | undefined;
  const unsubscribe = onDeliveryQueued(() => wake?.());
  const idle = () =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => (wake = undefined, resolve()), IDLE_MS);
      wake = () => {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      };
    });

  const receiving = (async () => {
    while (!stopped) {
      const room = Math.min(BATCH, MAX_IN_FLIGHT - inFlight.size);
      let messages: QueueMessage[] = [];
      if (room > 0) {
        try {
          messages = await engine.queue.receive('webhooks', { max: room, visibilitySeconds: QUEUES.webhooks.visibilitySeconds });
        } catch (error) {
          onError(error);
        }
      }
      for (const m of messages) {
        const task = handle(m).finally(() => inFlight.delete(task));
        inFlight.add(task);
      }
      if (messages.length < room || room === 0) await idle();
    }
  })();

  const sweeper = setInterval(() => {
    void sweepOutbox(engine).catch(onError);
    void sweepPlatformEvents(engine).catch(onError);
  }, SWEEP_EVERY_MS);
  sweeper.unref();
  return {
    async stop() {
      stopped = true;
      unsubscribe();
      wake?.();
      clearInterval(sweeper);
      await receiving;
      await Promise.all(inFlight);
    },
  };
}
