/**
 * Reading the activity log (GET /v1/activity): one page, newest first, over the segments that
 * segments.ts writes.
 */
import type { KeyValueStore, ServerSecret } from '../engine/ports.js';
import { InvalidCursorError, openCursor, sealCursor } from '../shared/cursors.js';
import * as z from 'zod/mini';
import { onFirstUse } from '../shared/validate.js';
import { ROUTE_APIS } from '../shared/api.js';
import type { CredentialKind } from '../auth/principal.js';
import { FILE_KIND, NAMED_ACTIVITY_KINDS, activityRecordOf, isActivityKind, type ActivityKind, type ActivityRecord } from './activity.js';
import {
  ACTIVITY_RETENTION_MS,
  SEGMENT_MAX_SPAN_MS,
  activityDay,
  activityFilePartition,
  activityPartition,
  atMsOfSortKey,
  eventKey,
  pad15,
  segmentEvents,
  type StoredEvent,
} from './segments.js';

export interface ActivityQuery {
  /** Unix ms, inclusive. */
  from: number;
  /** Unix ms, exclusive. */
  to: number;
  /** Only these kinds; null for all. */
  kinds: ActivityKind[] | null;
  file_sha256: string | null;
}

/**
 * The Activity record of the answers (activity.ts activityRecordOf): every field of ActivityRecord,
 * null where it does not apply; `usage` only on `ai.usage` and `ai.rerank` events. Here, not in
 * activity.ts, which every function of the three APIs loads: only this route needs zod for it.
 */
export const activityRecordSchema = onFirstUse(() => {
  const text = (description?: string) => z.nullable(description ? z.string().check(z.describe(description)) : z.string());
  const whole = (description: string) => z.nullable(z.int().check(z.minimum(0), z.describe(description)));
  const amount = z.number().check(z.minimum(0));
  return z
    .strictObject({
      id: z.string().check(z.regex(/^act_/), z.describe('`act_` and a ULID (sortable).')),
      at_ms: z.int().check(z.describe('Unix ms the event was recorded (for `api.call`: when the answer was final).')),
      organization_id: z.string(),
      actor_kind: z.enum(['secret_key', 'oauth_client', 'publishable_key', 'end_user', 'person'] satisfies CredentialKind[]),
      actor_id: z.string().check(z.describe("The key id, OAuth client id or publishable key id; for an end-user token, the end user's id; for a person signed in to the console (`person`), the person's id.")),
      source: z.enum(ROUTE_APIS).check(z.describe('The API called: `ai`, `data`, `events`, or `console` (the console API, called by the console\'s pages).')),
      kind: z.union([z.enum(NAMED_ACTIVITY_KINDS), z.string().check(z.regex(FILE_KIND))]).check(z.describe('`api.call`, `ai.usage`, `ai.rerank`, `record.write`, `record.delete`, `blob.*`, `file.upload.completed`, `file.download`, `file.delete`, other `file.*`.')),
      method: text('The HTTP method of the call.'),
      route: text("The route's path template (`/v1/databases/{database}`), or the raw path of a call no route matched."),
      status: whole('`api.call` only: the final HTTP status.'),
      outcome: z.nullable(z.enum(['success', 'client_error', 'server_error'])),
      error_code: text('`api.call` only: the `error.code` of an error answer.'),
      latency_ms: whole('`api.call` only: whole ms to the final answer.'),
      file_id: text(),
      file_sha256: z.nullable(z.string().check(z.regex(/^[0-9a-f]{64}$/))),
      file_size: whole('Bytes.'),
      content_type: text(),
      file_name: text(),
      related: z.nullable(z.strictObject({ database: text(), collection_id: text(), record_id: text() })),
      bytes_in: whole('`api.call` only: the request body.'),
      bytes_out: whole('`api.call` only: the answer body.'),
      country: z.nullable(z.string().check(z.regex(/^[A-Z]{2}$/))),
      request_id: text("The `x-request-id` of the call that recorded the event (null on events recorded before it was kept)."),
      operation_id: text('AI calls: the operation id the answer echoed; null elsewhere.'),
      usage: z.optional(
        z.strictObject({
          prompt_tokens: amount,
          completion_tokens: amount,
          total_tokens: amount,
          cost_usd: amount.check(z.describe('USD, rounded to the micro-USD.')),
          audio_seconds: z.optional(amount),
        }),
      ),
    })
    .check(z.meta({ id: 'ActivityRecord' }));
});

/** GET /v1/activity's answer (the handler shapes it from listActivity's page). */
export const activityPageSchema = onFirstUse(() =>
  z.strictObject({
    items: z.array(activityRecordSchema()).check(z.describe('Newest first; fewer than `limit`, even none, when the page examined 2,000 events first.')),
    next_cursor: z.nullable(z.string().check(z.describe('Opaque; null on the last page.'))),
    archive_searched: z.boolean().check(z.describe('Always false: there is no archive tier yet.')),
  }),
);
export type ActivityPage = z.output<ReturnType<typeof activityPageSchema>>;

/** Most items one page examines (read, then filtered by kind or application) before it answers short with a cursor. */
export const ACTIVITY_SCAN_BUDGET = 2000;
const DAY_MS = 24 * 3600 * 1000;
/** Events are stamped by the clock of the function that recorded them: allow that much skew past `now`. */
const CLOCK_SKEW_MS = 60_000;

interface CursorState {
  q: ActivityQuery;
  /** Sort key of the last item examined: the next page starts strictly below it. */
  after: string;
}

/**
 * Opaque cursor: the resolved query and the position, sealed (shared/cursors.ts) for the caller (an
 * organization and application), so an altered cursor, one forged without the server secret, or one
 * shown to another caller does not open (InvalidCursorError).
 */
export function encodeActivityCursor(secret: ServerSecret, state: CursorState, callerKey: string): Promise<string> {
  return sealCursor(secret, { v: 1, ...state }, `activity\n${callerKey}`);
}

export async function decodeActivityCursor(secret: ServerSecret, cursor: string, callerKey: string): Promise<CursorState> {
  const state = await openCursor(secret, cursor, `activity\n${callerKey}`);
  if (!isCursorState(state)) throw new InvalidCursorError();
  return { q: { from: state.q.from, to: state.q.to, kinds: state.q.kinds, file_sha256: state.q.file_sha256 }, after: state.after };
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const hasExactly = (o: Record<string, unknown>, keys: string[]) => Object.keys(o).length === keys.length && keys.every((k) => Object.hasOwn(o, k));

/**
 * The opened cursor has exactly the shape encodeActivityCursor writes (defence in depth, should the
 * server secret ever leak): no value of another type ever reaches the listing.
 */
function isCursorState(s: unknown): s is CursorState & { v: 1 } {
  if (!isPlainObject(s) || !hasExactly(s, ['v', 'q', 'after']) || s.v !== 1) return false;
  if (typeof s.after !== 'string' || s.after.length > 256 || !/^\d{15}#/.test(s.after)) return false;
  const q = s.q;
  if (!isPlainObject(q) || !hasExactly(q, ['from', 'to', 'kinds', 'file_sha256'])) return false;
  if (!Number.isSafeInteger(q.from) || !Number.isSafeInteger(q.to) || (q.from as number) < 0 || (q.from as number) >= (q.to as number)) return false;
  if (q.file_sha256 !== null && (typeof q.file_sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(q.file_sha256))) return false;
  if (q.kinds === null) return true;
  return Array.isArray(q.kinds) && q.kinds.length >= 1 && q.kinds.length <= 20 && q.kinds.every((k) => typeof k === 'string' && isActivityKind(k));
}

/** Segments read per query: with segments under 256 KB, a page stays under DynamoDB's 1 MB. */
const SEGMENTS_PER_READ = 4;

/**
 * One page of the organization's activity, newest first, and the sort key to continue below (null at
 * the end). Day partitions are read from the newest down (or the file index when `file_sha256` is set).
 *
 * Segments come newest-first by their newest event, but the segments of several writers overlap in
 * time, so their events are merged: once a segment keyed K is read, every event still unread sorts
 * at or below K, so the buffered events above K are final and go out in order. Kind and application
 * filters apply after the read, so a page may come back short, with a cursor, once
 * ACTIVITY_SCAN_BUDGET events were examined.
 */
export async function listActivity(
  kv: KeyValueStore,
  caller: { organizationId: string; applicationId: string | null },
  q: ActivityQuery,
  options: { limit: number; after?: string; now: number },
): Promise<{ items: ActivityRecord[]; after: string | null }> {
  const { limit, after, now } = options;
  // Events wanted: sort keys in [lower, upper). Nothing is older than the hot retention, nothing newer
  // than now (plus skew).
  const fromMs = Math.max(q.from, now - ACTIVITY_RETENTION_MS - DAY_MS);
  const lower = pad15(fromMs);
  let upper = pad15(Math.min(q.to, now + CLOCK_SKEW_MS + 1));
  if (after !== undefined && after < upper) upper = after;
  const upperMs = atMsOfSortKey(upper);
  if (upper <= lower) return { items: [], after: null };
  // A segment keyed by its newest event holds events at most SEGMENT_MAX_SPAN_MS older.
  const segmentsBetween: [string, string] = [lower, `${pad15(upperMs + SEGMENT_MAX_SPAN_MS)}#\uffff`];

  const partitions: { pk: string; index?: 'gsi1' }[] = [];
  if (q.file_sha256) partitions.push({ pk: activityFilePartition(caller.organizationId, q.file_sha256), index: 'gsi1' });
  else {
    const lastDay = Date.parse(activityDay(upperMs));
    for (let day = lastDay; day >= Date.parse(activityDay(fromMs)); day -= DAY_MS) {
      partitions.push({ pk: activityPartition(caller.organizationId, new Date(day).toISOString().slice(0, 10)) });
    }
  }
  const kinds = q.kinds ? new Set<string>(q.kinds) : null;
  const out: StoredEvent[] = [];
  let examined = 0;
  let last: string | null = null;
  let done: { items: ActivityRecord[]; after: string | null } | undefined;

  /** Sends out, in order, the buffered events sorting above `bound`; sets `done` once the page is full. */
  const release = (buffered: { key: string; event: StoredEvent }[], bound: string) => {
    buffered.sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
    let i = 0;
    for (; i < buffered.length && buffered[i].key > bound; i++) {
      const { key, event } = buffered[i];
      examined++;
      last = key;
      const visible = (!kinds || kinds.has(String(event.kind))) && (caller.applicationId === null || event.application_id === caller.applicationId);
      if (visible) out.push(event);
      if (out.length > limit) {
        done = { items: out.slice(0, limit).map(activityRecordOf), after: eventKey(out[limit - 1]) };
        return;
      }
      if (examined >= ACTIVITY_SCAN_BUDGET) {
        done = { items: out.map(activityRecordOf), after: last };
        return;
      }
    }
    buffered.splice(0, i);
  };

  for (const partition of partitions) {
    const buffered: { key: string; event: StoredEvent }[] = [];
    let cursor: string | undefined;
    do {
      const page = await kv.query({ ...partition, sk: { between: segmentsBetween }, descending: true, limit: SEGMENTS_PER_READ, cursor });
      for (const segment of page.items) {
        release(buffered, segment.sk);
        if (done) return done;
        for (const event of segmentEvents(segment)) {
          const key = eventKey(event);
          if (key >= lower && key < upper) buffered.push({ key, event });
        }
      }
      cursor = page.cursor;
    } while (cursor);
    release(buffered, '');
    if (done) return done;
  }
  return { items: out.map(activityRecordOf), after: null };
}
