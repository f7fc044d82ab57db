/**
 * A workspace's published events read in order, for watching (the console's live tail): the events are
 * kept per workspace for their retention (`evt#<workspace>` / `<event_id>`, publish.ts), and their ids
 * sort by time, so "what came after the last one I showed" is one range read of that partition. A
 * reader takes nothing: no lease, no ack, no subscription, so every subscription still gets every event
 * (unlike a pull or a stream, which are consumers; docs/decisions/console-live-tail.md).
 */
import type { Engine, KvSortKeyCondition } from '../engine/ports.js';
import * as z from 'zod/mini';
import { ulidBound } from '../shared/ids.js';
import { onFirstUse, parseQuery, queryInteger } from '../shared/validate.js';
import { envelopeSchema, EVENT_ID_PATTERN, type Envelope } from './envelope.js';
import { eventKey } from './keys.js';

export const EVENT_LOG_LIMIT = { min: 1, max: 100, default: 50 };
/**
 * How old an event must be before a read returns it. A publish takes its ids before its transactions
 * commit, and concurrent publishes commit in any order: a reader that returned the newest committed id
 * at once could later find an older id committed behind its cursor, and never show it. Reading only up
 * to two seconds ago leaves those commits time to land (a tail then shows an event 2 s late).
 */
export const EVENT_LOG_SETTLE_MS = 2000;

/** The tail's query: `after` (an event id from a previous answer's `next_cursor`) and `limit`. */
const querySchema = onFirstUse(() =>
  z.strictObject({
    after: z.optional(z.string().check(z.regex(EVENT_ID_PATTERN, 'an event id (evt_ and 26 characters)'), z.describe("The previous answer's next_cursor: the events after it, oldest first."))),
    limit: queryInteger(EVENT_LOG_LIMIT, EVENT_LOG_LIMIT.default).check(z.describe('Most events to return.')),
  }),
);

/** Anything else, a malformed `after` or a limit out of 1–100, is 400 invalid_query (param names it). */
export function parseEventLogQuery(query: Record<string, string>): { after?: string; limit: number } {
  return parseQuery(querySchema(), query, { takes: 'the tail takes only after and limit' });
}

/** The answer: the envelopes as every delivery carries them, and where to continue. */
export const eventLogAnswerSchema = onFirstUse(() =>
  z.strictObject({
    events: z.array(envelopeSchema()).check(z.describe('Oldest first.')),
    next_cursor: z.string().check(z.regex(EVENT_ID_PATTERN), z.describe('The `after` of the next read: the last event returned, or where this read stopped.')),
    has_more: z.boolean().check(z.describe('More events had settled than the limit (or one page) held: read again at once.')),
  }),
);
export type EventLogAnswer = z.output<ReturnType<typeof eventLogAnswerSchema>>;

/**
 * The workspace's events after `after`, oldest first; without `after`, the newest `limit` (still
 * oldest first). Only events at least EVENT_LOG_SETTLE_MS old. One Query of the partition with a
 * sort-key range, so it reads the same on SQLite and DynamoDB, and expired events are not seen.
 */
export async function recentEvents(engine: Engine, workspaceId: string, options: { after?: string; limit: number }): Promise<EventLogAnswer> {
  const { after, limit } = options;
  if (after !== undefined && !EVENT_ID_PATTERN.test(after)) throw new Error('recentEvents: after is not an event id'); // parseEventLogQuery refuses it first
  if (!Number.isInteger(limit) || limit < EVENT_LOG_LIMIT.min || limit > EVENT_LOG_LIMIT.max) throw new Error('recentEvents: limit out of range');
  const horizon = engine.clock.now() - EVENT_LOG_SETTLE_MS;
  const last = `evt_${ulidBound(horizon, 'last')}`;
  const pk = eventKey(workspaceId, '').pk;

  if (after === undefined) {
    const page = await engine.kv.query({ pk, sk: { lte: last }, descending: true, limit });
    const events = page.items.reverse().map(envelopeOf);
    // Nothing yet: continue from the horizon, so a later read returns what comes next rather than the newest page.
    return { events, next_cursor: events.at(-1)?.event_id ?? `evt_${ulidBound(horizon, 'first')}`, has_more: false };
  }
  // `after` at or past the horizon: nothing has settled after it yet (and a range's bounds must be in order).
  if (after >= last) return { events: [], next_cursor: after, has_more: false };
  // Inclusive bounds, so one more than the limit: `after` itself is dropped when it is still there.
  const sk: KvSortKeyCondition = { between: [after, last] };
  const page = await engine.kv.query({ pk, sk, limit: limit + 1 });
  const items = page.items.filter((i) => i.sk !== after);
  const events = items.slice(0, limit).map(envelopeOf);
  return { events, next_cursor: events.at(-1)?.event_id ?? after, has_more: items.length > limit || page.cursor !== undefined };
}

const envelopeOf = (item: Record<string, unknown>): Envelope => JSON.parse(String(item.envelope)) as Envelope;
