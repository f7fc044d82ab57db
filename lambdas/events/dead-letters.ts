/**
 * Dead letters (spec 2, 3, 4.21): an event whose webhook delivery failed 5 times, kept 30 days with
 * `attempts`, `dead_at`, `replay_count` and `last_error`. One per event and workspace; it also names
 * the subscriptions whose delivery died (several failing subscriptions update the same letter). A
 * replay queues the same event_id again to those of them that still exist, the subscriptions that
 * never received it, and counts `replay_count`; a replay that dies again adds to the same letter.
 * Per subscription the letter keeps `dead_<sub>` (deaths), `queued_<sub>` (the deaths a replay was
 * queued for: pending while it equals `dead_<sub>`) and `delivered_<sub>` (a replay completed: never
 * queued again). A replay claims its subscriptions with one conditional write, so concurrent replays
 * (on any worker) queue one delivery each.
 */
import type { Engine } from '../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../engine/errors.js';
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse, parseQuery, queryInteger } from '../shared/validate.js';
import { eventKey } from './keys.js';
import { envelopeSchema, EVENT_ID_PATTERN } from './envelope.js';
import { Subscriptions, queuedDelivery } from './subscriptions.js';
import { outboxKey, queueDelivery } from './outbox.js';

export const DEAD_LETTER_RETENTION_SECONDS = 30 * 24 * 3600;
export const DEAD_LIST_LIMIT = { min: 1, max: 100, default: 20 };

/** GET .../dead's query: only `limit`. */
export const deadListQuerySchema = onFirstUse(() =>
  z.strictObject({ limit: queryInteger(DEAD_LIST_LIMIT, DEAD_LIST_LIMIT.default).check(z.describe('Most dead letters to list, newest first.')) }),
);

/** The dead-letter list's query: anything else, or a limit out of range, is 400 invalid_query. */
export function parseDeadListQuery(query: Record<string, string>): { limit: number } {
  return parseQuery(deadListQuerySchema(), query, { takes: 'GET /dead takes only limit' });
}

export const deadLetterKey = (workspaceId: string, eventId: string) => ({ pk: `evdead#${workspaceId}`, sk: eventId });
const deadLetterNotFound = (id: string) => new PlatformError('dead_event_not_found', `No dead letter for event "${id}" in this workspace.`);

export async function recordDeadLetter(engine: Engine, workspaceId: string, eventId: string, subscriptionId: string, failure: { attempts: number; last_error: string }): Promise<void> {
  const now = engine.clock.now();
  await engine.kv.update({
    key: deadLetterKey(workspaceId, eventId),
    set: { attempts: failure.attempts, last_error: failure.last_error, dead_at: new Date(now).toISOString(), expires_at: Math.floor(now / 1000) + DEAD_LETTER_RETENTION_SECONDS },
    // A flag per subscription (a map keyed by the generated sub_ id, never a user's text): concurrent
    // deaths of two subscriptions both land, as two adds.
    add: { replay_count: 0, [`dead_${subscriptionId}`]: 1, [`queued_${subscriptionId}`]: 0 },
  });
}

/** A replay's delivery completed: the letter keeps the subscription, marked so no replay queues it again. */
export async function markReplayDelivered(engine: Engine, workspaceId: string, eventId: string, subscriptionId: string): Promise<void> {
  try {
    await engine.kv.update({ key: deadLetterKey(workspaceId, eventId), add: { [`delivered_${subscriptionId}`]: 1 }, condition: { ifExists: true } });
  } catch (error) {
    if (!(error instanceof ConditionFailedError)) throw error; // the letter's retention ended: nothing to mark
  }
}

/** The answers' schemas (spec 2 "Dead letter"), built at their first use. */
const answerSchemas = onFirstUse(() => {
  const letter = z
    .strictObject({
      event: envelopeSchema(),
      attempts: z.int().check(z.minimum(1), z.describe('Delivery attempts made before it died (5).')),
      dead_at: z.iso.datetime().check(z.describe('When it died last.')),
      replay_count: z.int().check(z.minimum(0), z.describe('Replays that queued a delivery.')),
      last_error: z.string().check(
        z.describe(
          'Why the last attempt failed: `webhook_status_<code>`, `webhook_timeout`, `webhook_network`, `url_destination_blocked`, `secret_missing`; for an eventbridge subscription (an extension) `eventbridge_<ErrorCode>` or `eventbridge_bus_not_allowed`.',
        ),
      ),
    })
    .check(z.meta({ id: 'DeadLetter' }));
  return {
    list: z.strictObject({ dead: z.array(letter).check(z.describe('Newest first.')) }),
    replay: z.strictObject({
      event_id: z.string().check(z.regex(EVENT_ID_PATTERN)),
      replayed: z.boolean().check(z.describe('Whether a delivery was queued (`queued` is not empty).')),
      queued: z.array(z.string()).check(z.describe('The subscriptions the event was queued to again: those whose delivery died, that never received it and have no replay pending.')),
    }),
  };
});

/** GET .../dead's answer. */
export const deadListSchema = () => answerSchemas().list;
/** POST .../dead/{event_id}/replay's answer. */
export const replayAnswerSchema = () => answerSchemas().replay;

export interface DeadLetter {
  event: unknown;
  attempts: number;
  dead_at: string;
  replay_count: number;
  last_error: string;
}

/** Newest first (event ids sort by time). */
export async function listDeadLetters(engine: Engine, workspaceId: string, limit: number): Promise<DeadLetter[]> {
  const page = await engine.kv.query({ pk: deadLetterKey(workspaceId, '').pk, descending: true, limit });
  const events = await Promise.all(page.items.map((i) => engine.kv.get(eventKey(workspaceId, String(i.sk)))));
  return page.items.flatMap((item, i) => {
    const event = events[i];
    if (!event) return []; // the event's retention ended first
    return [{ event: JSON.parse(String(event.envelope)), attempts: Number(item.attempts), dead_at: String(item.dead_at), replay_count: Number(item.replay_count ?? 0), last_error: String(item.last_error) }];
  });
}

/**
 * Queues the event again to the matching webhook subscriptions that never received it and have no replay
 * pending; answers their ids (none: nothing queued, `replay_count` unchanged). The claim and an outbox
 * entry per subscription commit in one transaction, so a crash before the queue send is swept later.
 */
export async function replayDeadLetter(engine: Engine, workspaceId: string, eventId: string): Promise<string[]> {
  if (!EVENT_ID_PATTERN.test(eventId)) throw deadLetterNotFound(eventId);
  const key = deadLetterKey(workspaceId, eventId);
  const [first, event] = await Promise.all([engine.kv.get(key), engine.kv.get(eventKey(workspaceId, eventId))]);
  if (!first || !event) throw deadLetterNotFound(eventId);
  const webhooks = (await new Subscriptions(engine).list(workspaceId)).filter(queuedDelivery);
  let letter: typeof first | undefined = first;
  for (let round = 0; round < 10; round++) {
    if (!letter) throw deadLetterNotFound(eventId);
    const current = letter;
    const due = webhooks.filter((s) => {
      const id = s.subscription_id;
      return current[`dead_${id}`] !== undefined && !Number(current[`delivered_${id}`] ?? 0) && Number(current[`queued_${id}`] ?? 0) < Number(current[`dead_${id}`]);
    });
    if (!due.length) return [];
    const unmarked = due.filter((s) => current[`queued_${s.subscription_id}`] === undefined);
    if (unmarked.length) {
      // A letter recorded before `queued_` existed: the attribute first, so the claim can test it.
      await engine.kv.update({ key, add: Object.fromEntries(unmarked.map((s) => [`queued_${s.subscription_id}`, 0])), condition: { ifExists: true } }).catch((error) => {
        if (!(error instanceof ConditionFailedError)) throw error;
      });
      letter = await engine.kv.get(key);
      continue;
    }
    // A replay's generation for a subscription: its deaths so far, new with every replay (a replay needs a new death).
    const generation = (id: string) => Number(current[`dead_${id}`]);
    const claim = Object.fromEntries(due.flatMap((s) => [[`dead_${s.subscription_id}`, current[`dead_${s.subscription_id}`]!], [`queued_${s.subscription_id}`, current[`queued_${s.subscription_id}`]!]]));
    try {
      await engine.kv.transact([
        { update: key, set: Object.fromEntries(due.map((s) => [`queued_${s.subscription_id}`, current[`dead_${s.subscription_id}`]])), add: { replay_count: 1 }, condition: { ifEquals: claim } },
        ...due.map((s) => ({ put: { ...outboxKey(workspaceId, eventId, s.subscription_id), replay: generation(s.subscription_id) } })),
      ]);
    } catch (error) {
      if (!(error instanceof TransactionCanceledError)) throw error;
      letter = await engine.kv.get(key); // another replay (or a death) came first: look again
      continue;
    }
    await Promise.all(
      due.map(async (s) => {
        await queueDelivery(engine, { workspace_id: workspaceId, subscription_id: s.subscription_id, event_id: eventId, attempt: 1, replay: generation(s.subscription_id) });
        await engine.kv.delete(outboxKey(workspaceId, eventId, s.subscription_id));
      }),
    );
    return due.map((s) => s.subscription_id);
  }
  throw new PlatformError('service_unavailable', 'The dead letter kept changing; try the replay again.');
}
