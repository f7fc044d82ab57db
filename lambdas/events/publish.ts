/**
 * Publish (spec 4.21): each accepted event commits in one key-value transaction with its idempotency
 * key (put if absent: two concurrent publishes with one key make one event), a message in the inbox of
 * every matching pull or stream subscription, and an outbox entry per matching webhook subscription. All of an event's delivery state commits with it, so a crash loses neither the event
 * nor its deliveries; webhook deliveries are queued from the outbox after the commit (delivery.ts).
 */
import type { Engine, KvWrite } from '../engine/ports.js';
import { TransactionCanceledError } from '../engine/errors.js';
import { LIMITS } from '../engine/limits.js';
import type { Principal } from '../auth/principal.js';
import { monotonicUlid } from '../shared/ids.js';
import * as z from 'zod/mini';
import { onFirstUse } from '../shared/validate.js';
import { checkEvent, envelopeJson, EVENT_ID_PATTERN, eventsOf, REJECTION_CODES, sourceOf, tenantOf, type EventInput } from './envelope.js';
import { eventKey, idempotencyKeyItem, inboxKey, waitingIndex } from './keys.js';
import { inboxWritten } from './inbox-signal.js';
import { wakeStreams } from './stream-remote.js';
import { Subscriptions, queuedDelivery, subscriptionMatches } from './subscriptions.js';
import { countWrite } from './stats.js';
import { removeInbox } from './inbox.js';
import { outboxKey, queueDeliveries } from './outbox.js';

/** Spec 6: a publish with the same idempotency_key within 168 hours is a duplicate. */
export const IDEMPOTENCY_WINDOW_SECONDS = 168 * 3600;
/** Events (and so dead letters and replays) are kept 30 days, as dead letters are. */
export const EVENT_RETENTION_SECONDS = 30 * 24 * 3600;
/**
 * How many transactions of one publish commit at once: all of them. An event with an idempotency key is
 * its own transaction (a duplicate never blocks the others); events without one share transactions of
 * up to 100 writes (nothing in them can fail alone). The embedded store commits the transactions that
 * arrive together in one SQLite commit (group commit), so a call of 100 events costs about one commit.
 */
const PARALLEL = 100;
/** A shared transaction stays under half DynamoDB's 4 MB (the estimate counts the envelope per item). */
const SHARED_TRANSACTION_BYTES = LIMITS.transactionBytes / 2;
/** Keys and attributes of an item beside its envelope, at most. */
const WRITE_OVERHEAD_BYTES = 512;

/** The 202 answer (spec 4.21 "Publish"): the accepted events in the order sent, and each rejected one by its index. */
export const publishAnswerSchema = onFirstUse(() =>
  z.strictObject({
    accepted: z.array(
      z.strictObject({
        event_id: z.string().check(z.regex(EVENT_ID_PATTERN)),
        duplicate: z.boolean().check(z.describe('The idempotency_key was used in the workspace within 168 hours: event_id is the original one and nothing new is delivered.')),
      }),
    ).check(z.describe('The accepted events, in the order they were sent.')),
    rejected: z.array(
      z.strictObject({
        index: z.int().check(z.minimum(0), z.describe("The event's position in the body's `events` (0 for `event`).")),
        code: z.enum(REJECTION_CODES).check(
          z.describe(
            'The first check it failed: not an object `invalid_event`; a field other than type, data, idempotency_key, tier `unknown_field`; a bad type `invalid_type`; an unknown tier `invalid_event`; a bad key `invalid_idempotency_key`; no data `data_required`; data nesting over 128 levels or holding a number JSON cannot carry `invalid_event`; data over 16 KiB (32 KiB advanced) `payload_too_large`.',
          ),
        ),
      }),
    ).check(z.describe('The rejected events: a bad event never blocks the others.')),
  }),
);
export type PublishAnswer = z.output<ReturnType<typeof publishAnswerSchema>>;

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
  const webhooks: { eventId: string; subscriptionId: string }[] = [];
  const inboxes = new Set<string>();
  /** The inbox messages written, by subscription (removed again if it was deleted meanwhile). */
  const written = new Map<string, string[]>();

  const expires = Math.floor(now / 1000);
  /** One event's writes: its idempotency key (when it has one), itself, its inbox messages and outbox entries. */
  const plan = (i: number) => {
    const input = inputs[i];
    const event_id = ids[i];
    const idempotency_key = input.idempotencyKey ?? event_id;
    const envelope = envelopeJson({ event_id, type: input.type, source, time, tenant, idempotency_key }, input.dataJson);
    const matching = subscriptions.filter((s) => subscriptionMatches(s, input.type));
    const writes: KvWrite[] = [];
    // An event without a key of its own cannot repeat one: no key item for it.
    if (input.idempotencyKey !== undefined) {
      writes.push({ put: { ...idempotencyKeyItem(workspaceId, input.idempotencyKey), event_id, expires_at: expires + IDEMPOTENCY_WINDOW_SECONDS }, condition: { ifAbsent: true } });
    }
    writes.push({ put: { ...eventKey(workspaceId, event_id), type: input.type, tier: input.tier, envelope, expires_at: expires + EVENT_RETENTION_SECONDS } });
    for (const s of matching) {
      if (queuedDelivery(s)) writes.push({ put: { ...outboxKey(workspaceId, event_id, s.subscription_id), expires_at: expires + EVENT_RETENTION_SECONDS } });
      else writes.push({ put: { ...inboxKey(s.subscription_id, event_id), ...waitingIndex(s.subscription_id, event_id), envelope, visible_at: 0, delivery_count: 0, expires_at: expires + EVENT_RETENTION_SECONDS } });
    }
    // What the event's items weigh at most (the envelope in each of them, plus keys and attributes).
    const bytes = writes.length * (Buffer.byteLength(envelope) + WRITE_OVERHEAD_BYTES);
    return { i, event_id, matching, writes, bytes, keyed: input.idempotencyKey !== undefined };
  };
  type Planned = ReturnType<typeof plan>;

  const accept = (p: Planned) => {
    accepted[p.i] = { event_id: p.event_id, duplicate: false };
    for (const s of p.matching) {
      if (queuedDelivery(s)) webhooks.push({ eventId: p.event_id, subscriptionId: s.subscription_id });
      else {
        inboxWritten(s.subscription_id);
        inboxes.add(s.subscription_id);
        written.set(s.subscription_id, [...(written.get(s.subscription_id) ?? []), p.event_id]);
      }
    }
  };

  /** A keyed event alone: its key's condition decides for it only (a duplicate answers the original id). */
  const commitKeyed = async (p: Planned) => {
    try {
      // The counters move in the event's own transaction: a crash never leaves them off.
      await engine.kv.transact([...p.writes, countWrite(workspaceId, p.event_id, { published: 1, depth: p.matching.length })!]);
    } catch (error) {
      if (error instanceof TransactionCanceledError && error.failed.includes(0)) {
        const original = await engine.kv.get(idempotencyKeyItem(workspaceId, inputs[p.i].idempotencyKey!));
        if (original) {
          accepted[p.i] = { event_id: String(original.event_id), duplicate: true };
          return;
        }
      }
      throw error;
    }
    accept(p);
  };

  /** Events without a key hold no condition: they share transactions, all or nothing (fewer, larger commits). */
  const commitShared = async (batch: Planned[]) => {
    const depth = batch.reduce((n, p) => n + p.matching.length, 0);
    await engine.kv.transact([...batch.flatMap((p) => p.writes), countWrite(workspaceId, batch[0].event_id, { published: batch.length, depth })!]);
    batch.forEach(accept);
  };

  const batches: Planned[][] = [];
  let shared: Planned[] = [];
  let items = 0;
  let bytes = 0;
  for (let i = 0; i < inputs.length; i++) {
    const p = plan(i);
    if (p.keyed) {
      batches.push([p]);
      continue;
    }
    if (shared.length && (items + p.writes.length > LIMITS.transactionItems - 1 || bytes + p.bytes > SHARED_TRANSACTION_BYTES)) {
      batches.push(shared);
      [shared, items, bytes] = [[], 0, 0];
    }
    shared.push(p);
    items += p.writes.length;
    bytes += p.bytes;
  }
  if (shared.length) batches.push(shared);

  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(PARALLEL, batches.length) }, async () => {
      while (next < batches.length) {
        const batch = batches[next++];
        await (batch[0].keyed ? commitKeyed(batch[0]) : commitShared(batch));
      }
    }),
  );
  // The events, outbox entries and counts are committed: queueing and waking go at once (one group commit).
  await Promise.all([
    removeDeleted(engine, workspaceId, written),
    queueDeliveries(engine, workspaceId, webhooks),
    wakeStreams(engine, inboxes),
  ]);
  return { accepted, rejected };
}

/**
 * A subscription deleted between this publish's list and its commit would keep the messages written to
 * it (and their depth): they are removed here, as the delete removes those it finds (inbox.ts
 * removeInbox, each counted once).
 */
async function removeDeleted(engine: Engine, workspaceId: string, written: Map<string, string[]>): Promise<void> {
  if (!written.size) return;
  const live = new Set((await new Subscriptions(engine).list(workspaceId)).map((s) => s.subscription_id));
  await Promise.all([...written].map(([id, events]) => (live.has(id) ? undefined : removeInbox(engine, workspaceId, id, events))));
}
