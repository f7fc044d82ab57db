/**
 * The queue consumers of the local runtime, in every worker process, as SQS triggers a function per
 * batch in AWS: webhook deliveries, and the sweep of outbox entries a crashed publish left behind.
 * Several loops of one message each, so a receiver that takes its 10 seconds holds up one loop and
 * never the deliveries to other receivers.
 */
import type { Engine } from '../engine/ports.js';
import { systemClock } from '../engine/clock.js';
import { runConsumer } from '../engine/embedded/queue.js';
import { webhookConsumer } from '../events/delivery.js';
import { sweepOutbox } from '../events/outbox.js';
import { log } from '../shared/log.js';

const DELIVERY_LOOPS = 16;
/** Pause of an idle loop, real time (the engine's clock may be a test's manual one). */
const IDLE_MS = 100;
const SWEEP_EVERY_MS = 10_000;

export function startQueueWorkers(engine: Engine): { stop(): Promise<void> } {
  const onError = (error: unknown) => log.error('queue consumer failed', { error: String(error) });
  const consumer = webhookConsumer(engine);
  const loops = Array.from({ length: DELIVERY_LOOPS }, () => runConsumer(engine.queue, 'webhooks', consumer, { clock: systemClock, idleMs: IDLE_MS, batch: 1, onError }));
  const sweeper = setInterval(() => void sweepOutbox(engine).catch(onError), SWEEP_EVERY_MS);
  sweeper.unref();
  return {
    async stop() {
      clearInterval(sweeper);
      await Promise.all(loops.map((l) => l.stop()));
    },
  };
}
