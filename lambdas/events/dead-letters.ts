/**
 * Dead letters (spec 2, 3, 4.21): an event whose webhook delivery failed 5 times, kept 30 days with
 * `attempts`, `dead_at`, `replay_count` and `last_error`. One per event and workspace; it also names
 * the subscriptions whose delivery died (several failing subscriptions update the same letter). A
 * replay queues the same event_id again to those of them that still exist, the subscriptions that
 * never received it, and counts `replay_count`; a replay that dies again adds to the same letter.
 */
import type { Engine } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { eventKey } from './keys.js';
import { Subscriptions } from './subscriptions.js';
import { queueDelivery } from './outbox.js';

export const DEAD_LETTER_RETENTION_SECONDS = 30 * 24 * 3600;
export const DEAD_LIST_LIMIT = { min: 1, max: 100, default: 20 };
const EVENT_ID_PATTERN = /^evt_[0-9a-z]{26}$/;

export const deadLetterKey = (workspaceId: string, eventId: string) => ({ pk: `evdead#${workspaceId}`, sk: eventId });
const deadLetterNotFound = (id: string) => new PlatformError('dead_event_not_found', `No dead letter for event "${id}" in this workspace.`);

export async function recordDeadLetter(engine: Engine, workspaceId: string, eventId: string, subscriptionId: string, failure: { attempts: number; last_error: string }): Promise<void> {
  const now = engine.clock.now();
  await engine.kv.update({
    key: deadLetterKey(workspaceId, eventId),
    set: { attempts: failure.attempts, last_error: failure.last_error, dead_at: new Date(now).toISOString(), expires_at: Math.floor(now / 1000) + DEAD_LETTER_RETENTION_SECONDS },
    // A flag per subscription (a map keyed by the generated sub_ id, never a user's text): concurrent
    // deaths of two subscriptions both land, as two adds.
    add: { replay_count: 0, [`dead_${subscriptionId}`]: 1 },
  });
}

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

/** Queues the event again to the matching webhook subscriptions that never received it. */
export async function replayDeadLetter(engine: Engine, workspaceId: string, eventId: string): Promise<void> {
  if (!EVENT_ID_PATTERN.test(eventId)) throw deadLetterNotFound(eventId);
  const [letter, event] = await Promise.all([engine.kv.get(deadLetterKey(workspaceId, eventId)), engine.kv.get(eventKey(workspaceId, eventId))]);
  if (!letter || !event) throw deadLetterNotFound(eventId);
  try {
    await engine.kv.update({ key: deadLetterKey(workspaceId, eventId), add: { replay_count: 1 }, condition: { ifExists: true } });
  } catch (error) {
    if (error instanceof ConditionFailedError) throw deadLetterNotFound(eventId);
    throw error;
  }
  const died = new Set(Object.keys(letter).filter((k) => k.startsWith('dead_sub_')).map((k) => k.slice('dead_'.length)));
  const subscriptions = (await new Subscriptions(engine).list(workspaceId)).filter((s) => died.has(s.subscription_id) && s.delivery.mode === 'webhook');
  await Promise.all(subscriptions.map((s) => queueDelivery(engine, { workspace_id: workspaceId, subscription_id: s.subscription_id, event_id: eventId, attempt: 1, replay: true })));
}
