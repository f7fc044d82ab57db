/**
 * Publish (spec 4.21): each accepted event is one key-value transaction holding its idempotency key
 * (put if absent: two concurrent publishes with one key make one event), the event itself, a message in
 * the inbox of every matching pull or stream subscription, and an outbox entry per matching webhook
 * subscription. All of an event's delivery state commits with it, so a crash loses neither the event
 * nor its deliveries; webhook deliveries are queued from the outbox after the commit (delivery.ts).
 */
import type { Engine, KvWrite } from '../engine/ports.js';
import { TransactionCanceledError } from '../engine/errors.js';
import type { Principal } from '../auth/principal.js';
import { monotonicUlid } from '../shared/ids.js';
import { checkEvent, envelopeJson, eventsOf, sourceOf, tenantOf, type EventInput, type RejectionCode } from './envelope.js';
import { eventKey, idempotencyKeyItem, inboxKey } from './keys.js';
import { inboxWritten } from './inbox-signal.js';
import { wakeStreams } from './stream-remote.js';
import { Subscriptions, subscriptionMatches } from './subscriptions.js';
import { count } from './stats.js';
import { outboxKey, queueDeliveries } from './outbox.js';

/** Spec 6: a publish with the same idempotency_key within 168 hours is a duplicate. */
export const IDEMPOTENCY_WINDOW_SECONDS = 168 * 3600;
/** Events (and so dead letters and replays) are kept 30 days, as dead letters are. */
export const EVENT_RETENTION_SECONDS = 30 * 24 * 3600;
/**
 * How many events of one publish commit at once: all of them. Each is its own transaction (a bad or
 * duplicate one never blocks the others), and the embedded store commits the transactions that arrive
 * together in one SQLite commit (group commit), so a call of 100 events costs about one commit.
 */
const PARALLEL = 100;

export interface PublishAnswer {
  accepted: { event_id: string; duplicate: boolean }[];
  rejected: { index: number; code: RejectionCode }[];
}

export async function publish(engine: Engine, principal: Principal, workspaceId: string, body: unknown): Promise<PublishAnswer> {
  const raw = eventsOf(body);
  const checked = raw.map(checkEvent);
  const rejected = checked.flatMap((c, index) => (typeof c === 'string' ? [{ index, code: c }] : []));
  const inputs = checked.filter((c): c is EventInput => typeof c !== 'string');
  if (!inputs.length) return { accepted: [], rejected };

  const subscriptions = await new Subscriptions(engine).list(workspaceId);
  const now = engine.clock.now();
  const time = new Date(now).toISOString();
  const tenant = tenantOf(principal, workspaceId);
  const source = sourceOf(principal);
  // Ids first, in order: an inbox read in key order then lists a publish's events in the order sent.
  const ids = inputs.map(() => `evt_${monotonicUlid(now)}`);
  const accepted: PublishAnswer['accepted'] = new Array(inputs.length);
  let deliveries = 0;
  const webhooks: { eventId: string; subscriptionId: string }[] = [];
  const inboxes = new Set<string>();

  const commit = async (i: number) => {
    const input = inputs[i];
    const event_id = ids[i];
    const idempotency_key = input.idempotencyKey ?? event_id;
    const envelope = envelopeJson({ event_id, type: input.type, source, time, tenant, idempotency_key }, input.dataJson);
    const matching = subscriptions.filter((s) => subscriptionMatches(s, input.type));
    const expires = Math.floor(now / 1000);
    const writes: KvWrite[] = [];
    // An event without a key of its own cannot repeat one: no key item for it.
    if (input.idempotencyKey !== undefined) {
      writes.push({ put: { ...idempotencyKeyItem(workspaceId, input.idempotencyKey), event_id, expires_at: expires + IDEMPOTENCY_WINDOW_SECONDS }, condition: { ifAbsent: true } });
    }
    writes.push({ put: { ...eventKey(workspaceId, event_id), type: input.type, tier: input.tier, envelope, expires_at: expires + EVENT_RETENTION_SECONDS } });
    for (const s of matching) {
      if (s.delivery.mode === 'webhook') writes.push({ put: { ...outboxKey(workspaceId, event_id, s.subscription_id), expires_at: expires + EVENT_RETENTION_SECONDS } });
      else writes.push({ put: { ...inboxKey(s.subscription_id, event_id), envelope, visible_at: 0, delivery_count: 0, expires_at: expires + EVENT_RETENTION_SECONDS } });
    }
    try {
      await engine.kv.transact(writes);
    } catch (error) {
      if (input.idempotencyKey !== undefined && error instanceof TransactionCanceledError && error.failed.includes(0)) {
        const original = await engine.kv.get(idempotencyKeyItem(workspaceId, input.idempotencyKey));
        if (original) {
          accepted[i] = { event_id: String(original.event_id), duplicate: true };
          return;
        }
      }
      throw error;
    }
    accepted[i] = { event_id, duplicate: false };
    deliveries += matching.length;
    for (const s of matching) {
      if (s.delivery.mode === 'webhook') webhooks.push({ eventId: event_id, subscriptionId: s.subscription_id });
      else {
        inboxWritten(s.subscription_id);
        inboxes.add(s.subscription_id);
      }
    }
  };

  let next = 0;
  await Promise.all(Array.from({ length: Math.min(PARALLEL, inputs.length) }, async () => {
    while (next < inputs.length) await commit(next++);
  }));
  // The events and outbox entries are committed: counting, queueing and waking go at once (one group commit).
  await Promise.all([
    count(engine, workspaceId, { published: accepted.filter((a) => !a.duplicate).length, depth: deliveries }),
    queueDeliveries(engine, workspaceId, webhooks),
    wakeStreams(engine, inboxes),
  ]);
  return { accepted, rejected };
}
