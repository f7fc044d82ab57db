/**
 * Webhook delivery (spec 3, 4.21): one attempt per `webhooks` queue message. Any 2xx within 10 s
 * completes it; otherwise the next attempt is queued 10 s later, the delay doubling to at most 10
 * minutes, 5 attempts in all, and then the event becomes a dead letter of the workspace (kept 30 days).
 * The URL is checked again at every attempt (webhook-sender.ts). The dead letter names the
 * subscriptions whose delivery died, so a replay goes to those only (a completed delivery writes
 * nothing but its count and its delivery-log item, in the counters' one transaction; a completed
 * replay also marks its subscription delivered on the letter, so no later replay queues it again).
 */
import type { Engine, QueueConsumer } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { log, withLogIds } from '../shared/log.js';
import { eventKey } from './keys.js';
import { Subscriptions, type StoredSubscription } from './subscriptions.js';
import { signatureHeader } from './signing.js';
import { postWebhook, type DeliveryOutcome } from './webhook-sender.js';
import { queueDelivery, type DeliveryMessage } from './outbox.js';
import type { EventBusSender } from '../engine/event-bus.js';
import { PutEventsBatch, putOnBus, type BusOutcome, type BusSlot } from './eventbridge.js';
import { count, countOnce, type Counter } from './stats.js';
import { markReplayDelivered, recordDeadLetter } from './dead-letters.js';
import { deliveryLogWrite, type AttemptRecord } from './delivery-log.js';

export const MAX_ATTEMPTS = 5;
const FIRST_RETRY_SECONDS = 10;
const MAX_RETRY_SECONDS = 600;

/** The pause before attempt `attempt + 1`: 10 s, doubling, at most 10 minutes. */
export const retryDelaySeconds = (attempt: number) => Math.min(MAX_RETRY_SECONDS, FIRST_RETRY_SECONDS * 2 ** (attempt - 1));

export type AttemptResult = 'completed' | 'retrying' | 'dead' | 'dropped';

/** The line a failed attempt logs: in AWS a metric filter counts these (lib/webhook-delivery.ts). */
export const ATTEMPT_FAILED_LOG = 'webhook attempt failed';

/** Parses a queue message's body; anything else is not ours to deliver (dropped, never retried). */
export function deliveryMessageOf(body: string): DeliveryMessage | undefined {
  try {
    const m = JSON.parse(body) as DeliveryMessage;
    if (typeof m.workspace_id === 'string' && typeof m.subscription_id === 'string' && typeof m.event_id === 'string' && Number.isInteger(m.attempt) && m.attempt >= 1) return m;
  } catch {
    // fall through
  }
  return undefined;
}

export interface DeliveryOptions {
  timeoutMs?: number;
  /** The event-bus port: eventbridge subscriptions are put on their bus through it (eventbridge.ts). */
  eventBus?: EventBusSender;
  /** This attempt's place in its consumer batch's PutEvents calls. */
  busSlot?: BusSlot;
}

/** One attempt. Throws only for the engine's own failures (the queue then delivers the message again). */
export async function attemptDelivery(engine: Engine, m: DeliveryMessage, options: DeliveryOptions = {}): Promise<AttemptResult> {
  // An outcome is counted once per delivery (a marker in the counters' transaction): an attempt the
  // queue or the outbox sweep delivers twice counts nothing the second time; a replay's outcomes are
  // marked by its generation (replays queued before generations existed count as before).
  // The attempt's outcome goes to the delivery log in the same transaction (delivery-log.ts).
  const counted = (marker: string, add: Partial<Record<Counter, number>>, logged?: Pick<AttemptRecord, 'status' | 'lastError' | 'nextAttemptAt'>) => {
    const also = logged ? [deliveryLogWrite(engine.clock.now(), { workspaceId: m.workspace_id, subscriptionId: m.subscription_id, eventId: m.event_id, attempt: m.attempt, ...logged })] : [];
    return m.replay === true
      ? count(engine, m.workspace_id, add, undefined, also)
      : countOnce(engine, m.workspace_id, m.event_id, `${m.event_id}#${m.subscription_id}#${m.replay ? `r${m.replay}#` : ''}${marker}`, add, also);
  };
  const subscriptions = new Subscriptions(engine);
  let subscription: StoredSubscription;
  try {
    subscription = await subscriptions.get(m.workspace_id, m.subscription_id);
  } catch (error) {
    if (!(error instanceof PlatformError)) throw error;
    await counted('done', { depth: m.replay ? 0 : -1 });
    return 'dropped'; // deleted meanwhile: nobody to deliver to
  }
  const event = await engine.kv.get(eventKey(m.workspace_id, m.event_id));
  const bus = subscription.delivery.mode === 'eventbridge';
  if (!bus) options.busSlot?.leave();
  if (!event || (!bus && (subscription.delivery.mode !== 'webhook' || !subscription.delivery.url))) {
    await counted('done', { depth: m.replay ? 0 : -1 });
    return 'dropped';
  }
  const body = String(event.envelope);

  let outcome: DeliveryOutcome | BusOutcome | { ok: false; error: 'secret_missing' };
  let secrets: string[] = [];
  try {
    secrets = bus ? [] : await subscriptions.signingSecrets(subscription);
  } catch {
    secrets = [];
  }
  if (bus) outcome = await putOnBus(engine, subscription, event, options);
  else if (!secrets.length) outcome = { ok: false, error: 'secret_missing' };
  else {
    // Signed at each attempt with the time it is sent, so a retry is never stale to the receiver.
    const timestamp = Math.floor(engine.clock.now() / 1000);
    outcome = await postWebhook({
      url: subscription.delivery.url!,
      body,
      timeoutMs: options.timeoutMs,
      headers: {
        'content-type': 'application/json',
        'x-event-id': m.event_id,
        'x-event-type': String(event.type),
        'x-event-timestamp': String(timestamp),
        'x-event-signature': signatureHeader(secrets, timestamp, body),
      },
    });
  }

  if (outcome.ok) {
    if (m.replay) await markReplayDelivered(engine, m.workspace_id, m.event_id, m.subscription_id);
    // A first attempt that succeeds (nearly every delivery) is counted only: its log row cost the
    // delivery tail its target (docs/benchmarks.md, issue 37); a delivery that failed before is logged done.
    await counted('done', { completed: 1, depth: m.replay ? 0 : -1 }, m.attempt > 1 || m.replay ? { status: 'completed', lastError: null } : undefined);
    return 'completed';
  }
  const retrying = m.attempt < MAX_ATTEMPTS && outcome.error !== 'secret_missing';
  log.warn(ATTEMPT_FAILED_LOG, { workspace_id: m.workspace_id, subscription_id: m.subscription_id, event_id: m.event_id, attempt: m.attempt, outcome: retrying ? 'retrying' : 'dead', error: outcome.error });
  if (retrying) {
    await queueDelivery(engine, { ...m, attempt: m.attempt + 1 }, retryDelaySeconds(m.attempt));
    await counted(`a${m.attempt}`, { failed_attempts: 1, retries: 1 }, { status: 'retrying', lastError: outcome.error, nextAttemptAt: engine.clock.now() + retryDelaySeconds(m.attempt) * 1000 });
    return 'retrying';
  }
  await recordDeadLetter(engine, m.workspace_id, m.event_id, m.subscription_id, { attempts: m.attempt, last_error: outcome.error });
  await counted('done', { failed_attempts: 1, dlq_inflow: 1, depth: m.replay ? 0 : -1 }, { status: 'dead', lastError: outcome.error });
  return 'dead';
}

/**
 * The `webhooks` queue's consumer (SQS partial-batch contract): every message of the batch is attempted
 * at once, none waits on another's receiver; a message whose attempt failed on the engine is reported
 * failed and comes back after its queue's retrySeconds (lambdas/engine/queues.ts).
 */
export function webhookConsumer(engine: Engine, options: { timeoutMs?: number; eventBus?: EventBusSender } = {}): QueueConsumer {
  return async (messages) => {
    const failed: string[] = [];
    // The batch's eventbridge deliveries share PutEvents calls (10 entries, 256 KB each).
    const batch = options.eventBus && new PutEventsBatch(options.eventBus);
    await Promise.all(
      messages.map((message) =>
        withLogIds({ message_id: message.id }, async () => {
          const busSlot = batch?.slot();
          const m = deliveryMessageOf(message.body);
          try {
            if (m) await attemptDelivery(engine, m, { ...options, busSlot });
          } catch {
            failed.push(message.id);
          } finally {
            busSlot?.leave();
          }
        }),
      ),
    );
    return { failed };
  };
}
