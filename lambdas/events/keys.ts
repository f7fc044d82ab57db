/**
 * Where the Events API keeps its items in the key-value store (docs/events/design.md):
 *
 *   evsub#<workspace> / <subscription_id>   a subscription
 *   evsub#<workspace> / #slot#<n>           which subscription holds slot n of 50 (the limit)
 *   evkey#<workspace> / <idempotency_key>   an idempotency key's event id, for 168 hours
 *   evt#<workspace>   / <event_id>          a published event (its envelope), for the retention
 *   inbox#<subscription_id> / <event_id>    a message waiting for a pull or stream client (lease, count);
 *     gsi1 inbox#w#<sub> / <event_id> while it waits, gsi2 inbox#l#<sub> / <lease end>#<event_id> while leased
 *   evout#<shard>     / <event>#<ws>#<sub>  a webhook delivery not yet queued (outbox.ts)
 *   evdead#<workspace> / <event_id>         a dead letter (dead-letters.ts)
 *   evstat#<workspace> / stats              the workspace's counters (stats.ts)
 *
 * Event ids sort by time, so an inbox read in key order is oldest first.
 */
export const subscriptionsPartition = (workspaceId: string) => `evsub#${workspaceId}`;
export const subscriptionKey = (workspaceId: string, subscriptionId: string) => ({ pk: subscriptionsPartition(workspaceId), sk: subscriptionId });
export const subscriptionSlotKey = (workspaceId: string, slot: number) => ({ pk: subscriptionsPartition(workspaceId), sk: `#slot#${slot}` });
export const idempotencyKeyItem = (workspaceId: string, key: string) => ({ pk: `evkey#${workspaceId}`, sk: key });
export const eventKey = (workspaceId: string, eventId: string) => ({ pk: `evt#${workspaceId}`, sk: eventId });
export const inboxPartition = (subscriptionId: string) => `inbox#${subscriptionId}`;
export const inboxKey = (subscriptionId: string, eventId: string) => ({ pk: inboxPartition(subscriptionId), sk: eventId });
/** A waiting message's index keys (gsi1): what a pull can lease now, oldest first, leased ones apart. */
export const waitingIndex = (subscriptionId: string, eventId: string) => ({ gsi1pk: `inbox#w#${subscriptionId}`, gsi1sk: eventId });
/** A leased message's index keys (gsi2), by the end of its lease: a pull finds the ended leases first. */
export const leasedIndex = (subscriptionId: string, visibleAt: number, eventId: string) => ({ gsi2pk: `inbox#l#${subscriptionId}`, gsi2sk: `${leaseEnd(visibleAt)}#${eventId}` });
export const leaseEnd = (visibleAt: number) => String(Math.max(0, Math.floor(visibleAt))).padStart(15, '0');
