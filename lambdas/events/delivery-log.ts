/**
 * The delivery log (docs/decisions/console-resources.md "Deliveries"): one item per subscription and
 * event, `evdlv#<workspace>#<subscription>` / `<event_id>`, saying where its push delivery stands
 * (`retrying`, `completed`, `dead`), the attempts made, the last attempt's error and when the next one
 * is due. Each attempt's outcome is written in the same transaction as its counters and their
 * once-only marker (stats.ts countOnce), so it costs no extra round trip and an attempt the queue
 * delivers twice writes it once; a replay's attempts update the same item. Kept 30 days, as dead letters.
 */
import type { Engine, KvWrite } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { EVENT_ID_PATTERN } from './envelope.js';
import { DEAD_LETTER_RETENTION_SECONDS } from './dead-letters.js';

export type DeliveryStatus = 'retrying' | 'completed' | 'dead';
export const DELIVERY_LIST_LIMIT = { min: 1, max: 100, default: 20 };

export const deliveryLogKey = (workspaceId: string, subscriptionId: string, eventId: string) => ({ pk: `evdlv#${workspaceId}#${subscriptionId}`, sk: eventId });

/** One attempt's outcome, as attemptDelivery knows it. */
export interface AttemptRecord {
  workspaceId: string;
  subscriptionId: string;
  eventId: string;
  status: DeliveryStatus;
  /** This attempt's number in its delivery (a replay starts again at 1). */
  attempt: number;
  /** The spec's dead-letter reason of a failed attempt; null when it succeeded. */
  lastError: string | null;
  /** When the next attempt is due (epoch ms), `retrying` only. */
  nextAttemptAt?: number;
}

/** The write that records an attempt's outcome, for the counters' transaction. */
export function deliveryLogWrite(now: number, r: AttemptRecord): KvWrite {
  return {
    update: deliveryLogKey(r.workspaceId, r.subscriptionId, r.eventId),
    set: {
      status: r.status,
      attempts: r.attempt,
      last_error: r.lastError,
      last_attempt_at: new Date(now).toISOString(),
      next_attempt_at: r.status === 'retrying' && r.nextAttemptAt !== undefined ? new Date(r.nextAttemptAt).toISOString() : null,
      expires_at: Math.floor(now / 1000) + DEAD_LETTER_RETENTION_SECONDS,
    },
  };
}

export interface DeliveryRecord {
  event_id: string;
  status: DeliveryStatus;
  attempts: number;
  last_error: string | null;
  last_attempt_at: string;
  next_attempt_at: string | null;
}

/**
 * A subscription's deliveries, newest event first (event ids sort by time). The cursor is the last
 * event id of the previous page (an id the caller was shown; anything else is 400 invalid_cursor).
 */
export async function recentDeliveries(engine: Engine, workspaceId: string, subscriptionId: string, page: { cursor?: string; limit: number }): Promise<{ deliveries: DeliveryRecord[]; next_cursor: string | null }> {
  if (page.cursor !== undefined && !EVENT_ID_PATTERN.test(page.cursor)) throw new PlatformError('invalid_cursor', 'cursor is the next_cursor of an earlier page.', 'cursor');
  const { pk } = deliveryLogKey(workspaceId, subscriptionId, '');
  const result = await engine.kv.query({ pk, descending: true, limit: page.limit, ...(page.cursor ? { sk: { lt: page.cursor } } : {}) });
  const deliveries = result.items.map((i) => ({
    event_id: String(i.sk),
    status: i.status as DeliveryStatus,
    attempts: Number(i.attempts),
    last_error: typeof i.last_error === 'string' ? i.last_error : null,
    last_attempt_at: String(i.last_attempt_at),
    next_attempt_at: typeof i.next_attempt_at === 'string' ? i.next_attempt_at : null,
  }));
  const more = result.cursor !== undefined && deliveries.length === page.limit;
  return { deliveries, next_cursor: more ? deliveries[deliveries.length - 1]!.event_id : null };
}
