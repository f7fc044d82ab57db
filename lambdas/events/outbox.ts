/**
 * Webhook deliveries waiting to be queued. A publish commits an outbox entry per (event, webhook
 * subscription) with the event; after the commit each is sent to the `webhooks` queue and then
 * removed. A crash in between leaves the entry, which the sweeper (`sweepOutbox`) queues again once it
 * is older than OUTBOX_GRACE_MS: a delivery may then be queued twice, which at-least-once delivery
 * allows (receivers dedupe by event id). Entries spread over OUTBOX_SHARDS partitions, so the sweeper
 * reads a fixed set of partitions and no partition takes every publish.
 */
import { createHash } from 'node:crypto';
import type { Engine } from '../engine/ports.js';
import { ulidTimeMs } from '../shared/ids.js';

export const OUTBOX_SHARDS = 16;
/** An entry this old was left by a publish that stopped between its commit and its queue send. */
export const OUTBOX_GRACE_MS = 10_000;

const shardOf = (subscriptionId: string) => createHash('sha256').update(subscriptionId).digest()[0] % OUTBOX_SHARDS;
export const outboxKey = (workspaceId: string, eventId: string, subscriptionId: string) => ({
  pk: `evout#${shardOf(subscriptionId)}`,
  sk: `${eventId}#${workspaceId}#${subscriptionId}`,
});

/** What a `webhooks` queue message holds: which delivery, and which attempt this is (1 to 5). */
export interface DeliveryMessage {
  workspace_id: string;
  subscription_id: string;
  event_id: string;
  attempt: number;
  /**
   * Set on a replay of a dead letter: the delivery counts as a replay, not as new traffic. The number
   * is the replay's generation for this subscription (its deaths when it was queued), so each replay's
   * outcome is counted once (`true`: queued before generations existed).
   */
  replay?: boolean | number;
}

const queuedListeners = new Set<() => void>();

/**
 * Calls `listener` when this process queues a delivery due now: the local receiver takes it at once
 * instead of at its next poll (only a hint; another process's deliveries are found by polling).
 */
export function onDeliveryQueued(listener: () => void): () => void {
  queuedListeners.add(listener);
  return () => queuedListeners.delete(listener);
}

export async function queueDelivery(engine: Engine, message: DeliveryMessage, delaySeconds = 0): Promise<void> {
  // Grouped by workspace (the message names no organization): one workspace's backlog of deliveries
  // to a slow endpoint does not hold up another's (docs/decisions/knowledge-fairness.md).
  await engine.queue.send('webhooks', JSON.stringify(message), { group: message.workspace_id, ...(delaySeconds ? { delaySeconds } : {}) });
  if (!delaySeconds) for (const listener of queuedListeners) listener();
}

export async function queueDeliveries(engine: Engine, workspaceId: string, deliveries: { eventId: string; subscriptionId: string }[]): Promise<void> {
  await Promise.all(
    deliveries.map(async ({ eventId, subscriptionId }) => {
      await queueDelivery(engine, { workspace_id: workspaceId, subscription_id: subscriptionId, event_id: eventId, attempt: 1 });
      await engine.kv.delete(outboxKey(workspaceId, eventId, subscriptionId));
    }),
  );
}

/** Queues the entries a crashed publish left behind; returns how many. */
export async function sweepOutbox(engine: Engine): Promise<number> {
  const cutoff = engine.clock.now() - OUTBOX_GRACE_MS;
  let swept = 0;
  for (let shard = 0; shard < OUTBOX_SHARDS; shard++) {
    const page = await engine.kv.query({ pk: `evout#${shard}`, limit: 100 });
    for (const item of page.items) {
      const [eventId, workspaceId, subscriptionId] = String(item.sk).split('#');
      if (ulidTimeMs(eventId) > cutoff) break; // in key order: the rest are younger
      // Queued, then removed: a crash in between queues it again later, never loses it (two sweepers at
      // once may queue it twice, which at-least-once delivery allows).
      // A dead letter's replay (dead-letters.ts) commits its entries with `replay: true`.
      await queueDelivery(engine, { workspace_id: workspaceId, subscription_id: subscriptionId, event_id: eventId, attempt: 1, ...(item.replay === true || typeof item.replay === 'number' ? { replay: item.replay } : {}) });
      await engine.kv.delete({ pk: item.pk, sk: item.sk });
      swept++;
    }
  }
  return swept;
}
