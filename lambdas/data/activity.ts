/**
 * The activity log (spec section 2 "Activity record", 4.20). Services report record and blob events
 * here; the chain reports every call as `api.call` (http/middleware/activity.ts).
 *
 * Recording never slows or fails the call it records: `recordActivity` only builds the item and puts
 * it in an in-memory buffer. The buffer is written in batches (one transaction of up to 100 puts) when
 * it holds 100 events or 100 ms after its first event, whichever comes first. Failures are logged,
 * never thrown. `flushActivity()` writes whatever is buffered and waits for writes in flight: the
 * local platform calls it on a clean shutdown before the engine closes, and in Lambda the chain awaits
 * it after each call (nothing runs once the answer is returned), which costs one batched write per call.
 *
 * Storage, one item per event:
 *   act#<org>#<yyyy-mm-dd UTC> / <at_ms, 15 digits>#<id>          a day is one partition, newest first descending
 *   gsi1: actfile#<org>#<sha256> / same sort key                  every event of one file (`file_sha256` filter)
 * Items expire after 30 days (hot retention; there is no archive tier yet, so `archive_searched` is false).
 */
import { createHash } from 'node:crypto';
import type { Engine, KeyValueStore, KvItem, KvValue } from '../engine/ports.js';
import type { HttpRequest, RequestScope } from '../http/types.js';
import type { Api, CredentialKind } from '../http/routes.js';
import { log } from '../shared/log.js';

/** The spec's named kinds, plus any other `file.*` kind. */
export const NAMED_ACTIVITY_KINDS = [
  'api.call',
  'record.write',
  'record.delete',
  'blob.write',
  'blob.read',
  'blob.delete',
  'file.upload.completed',
  'file.download',
  'file.delete',
] as const;
export type ActivityKind = (typeof NAMED_ACTIVITY_KINDS)[number] | `file.${string}`;

const FILE_KIND = /^file\.[a-z0-9_]+(\.[a-z0-9_]+)*$/;
const NAMED = new Set<string>(NAMED_ACTIVITY_KINDS);
export const isActivityKind = (kind: string): kind is ActivityKind => NAMED.has(kind) || (kind.length <= 64 && FILE_KIND.test(kind));

export interface ActivityRelated {
  database: string | null;
  collection_id: string | null;
  record_id: string | null;
}

/** What a service reports. Anything left out is null in the record. */
export interface ActivityEvent {
  kind: ActivityKind;
  file_id?: string | null;
  file_sha256?: string | null;
  file_size?: number | null;
  content_type?: string | null;
  file_name?: string | null;
  related?: { database?: string | null; collection_id?: string | null; record_id?: string | null } | null;
  /** `api.call` only; the chain sets these. */
  status?: number | null;
  error_code?: string | null;
  latency_ms?: number | null;
  bytes_in?: number | null;
  bytes_out?: number | null;
}

/** One entry of the log, exactly the fields of spec section 2. */
export interface ActivityRecord {
  id: string;
  at_ms: number;
  organization_id: string;
  actor_kind: CredentialKind;
  actor_id: string;
  source: Api;
  kind: ActivityKind;
  method: string | null;
  route: string | null;
  status: number | null;
  outcome: 'success' | 'client_error' | 'server_error' | null;
  error_code: string | null;
  latency_ms: number | null;
  file_id: string | null;
  file_sha256: string | null;
  file_size: number | null;
  content_type: string | null;
  file_name: string | null;
  related: ActivityRelated | null;
  bytes_in: number | null;
  bytes_out: number | null;
  country: string | null;
}

export const ACTIVITY_FIELDS = [
  'id', 'at_ms', 'organization_id', 'actor_kind', 'actor_id', 'source', 'kind', 'method', 'route', 'status', 'outcome',
  'error_code', 'latency_ms', 'file_id', 'file_sha256', 'file_size', 'content_type', 'file_name', 'related',
  'bytes_in', 'bytes_out', 'country',
] as const satisfies readonly (keyof ActivityRecord)[];

/** Hot retention: items expire (TTL) this long after the event. */
export const ACTIVITY_RETENTION_MS = 30 * 24 * 3600 * 1000;
const SHA256 = /^[0-9a-f]{64}$/;
/** Keeps one item far below 400 KB whatever a caller sends (a raw path, a file name). */
const MAX_TEXT = 1024;

export const activityDay = (ms: number) => new Date(ms).toISOString().slice(0, 10);
export const activityPartition = (org: string, day: string) => `act#${org}#${day}`;
export const activityFilePartition = (org: string, sha256: string) => `actfile#${org}#${sha256}`;
export const activitySortKey = (atMs: number, id: string) => `${String(atMs).padStart(15, '0')}#${id}`;

export function outcomeOf(status: number | null): ActivityRecord['outcome'] {
  if (status === null) return null;
  if (status >= 500) return 'server_error';
  if (status >= 400) return 'client_error';
  return 'success';
}

// ---------- ids: `act_` + a ULID, monotonic within the process so same-millisecond events keep their order ----------

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
let lastMs = -1;
let lastRandom: number[] = [];

function monotonicUlid(nowMs: number): string {
  if (nowMs === lastMs) {
    // Increment the random part (base 32) so the id sorts after the previous one of this millisecond.
    let i = 15;
    while (i >= 0 && lastRandom[i] === 31) lastRandom[i--] = 0;
    if (i >= 0) lastRandom[i]++;
  } else {
    lastMs = nowMs;
    lastRandom = Array.from({ length: 16 }, () => Math.floor(Math.random() * 32));
  }
  let time = '';
  for (let i = 0, t = nowMs; i < 10; i++, t = Math.floor(t / 32)) time = CROCKFORD[t % 32] + time;
  return time + lastRandom.map((d) => CROCKFORD[d]).join('');
}

// ---------- the recorder ----------

export interface ActivityRecorderOptions {
  /** Events per write (one transaction); a buffer this full is written at once. */
  batchSize?: number;
  /** Longest an event waits in the buffer. */
  intervalMs?: number;
}

/**
 * Buffers items per key-value store and writes them in batches. Never throws into the caller: a failed
 * transaction is retried as single puts, and what still fails is logged and dropped.
 */
export class ActivityRecorder {
  readonly batchSize: number;
  readonly intervalMs: number;
  private readonly buffers = new Map<KeyValueStore, KvItem[]>();
  private readonly inFlight = new Set<Promise<void>>();
  private timer: ReturnType<typeof setTimeout> | undefined;

  constructor(options: ActivityRecorderOptions = {}) {
    this.batchSize = Math.min(100, Math.max(1, options.batchSize ?? 100));
    this.intervalMs = options.intervalMs ?? 100;
  }

  /** Events buffered and not yet handed to the store. */
  get pending(): number {
    let n = 0;
    for (const items of this.buffers.values()) n += items.length;
    return n;
  }

  add(kv: KeyValueStore, item: KvItem): void {
    let buffer = this.buffers.get(kv);
    if (!buffer) this.buffers.set(kv, (buffer = []));
    buffer.push(item);
    if (buffer.length >= this.batchSize) this.start(kv);
    else this.timer ??= unref(setTimeout(() => this.tick(), this.intervalMs));
  }

  /** Writes what is buffered (for one store, or all) and waits for every write in flight. */
  async flush(kv?: KeyValueStore): Promise<void> {
    if (kv) this.start(kv);
    else for (const store of [...this.buffers.keys()]) this.start(store);
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  private tick(): void {
    this.timer = undefined;
    for (const store of [...this.buffers.keys()]) this.start(store);
  }

  private start(kv: KeyValueStore): void {
    const items = this.buffers.get(kv);
    if (!items?.length) return;
    this.buffers.delete(kv);
    if (this.buffers.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    for (let i = 0; i < items.length; i += this.batchSize) {
      const write = this.write(kv, items.slice(i, i + this.batchSize)).finally(() => this.inFlight.delete(write));
      this.inFlight.add(write);
    }
  }

  private async write(kv: KeyValueStore, items: KvItem[]): Promise<void> {
    try {
      if (items.length === 1) await kv.put(items[0]);
      else await kv.transact(items.map((put) => ({ put })));
      return;
    } catch (error) {
      if (items.length === 1) {
        log.error('activity write failed; events dropped', { count: 1, error: String(error) });
        return;
      }
      log.warn('activity batch write failed; retrying one by one', { count: items.length, error: String(error) });
    }
    const results = await Promise.allSettled(items.map((item) => kv.put(item)));
    const failed = results.filter((r) => r.status === 'rejected') as PromiseRejectedResult[];
    if (failed.length) log.error('activity write failed; events dropped', { count: failed.length, error: String(failed[0].reason) });
  }
}

function unref<T>(timer: T): T {
  (timer as { unref?: () => void }).unref?.();
  return timer;
}

/** The process's recorder: one per process, like the engine. */
export const activityRecorder = new ActivityRecorder();

/** Writes every buffered event (of one engine, or all) and waits for writes in flight. Never throws. */
export async function flushActivity(engine?: Engine): Promise<void> {
  await activityRecorder.flush(engine?.kv).catch((error) => log.error('activity flush failed', { error: String(error) }));
}

const text = (v: string | null | undefined) => (typeof v === 'string' ? v.slice(0, MAX_TEXT) : null);
const num = (v: number | null | undefined) => (typeof v === 'number' && Number.isFinite(v) ? v : null);

/** Builds the stored item of an event (exported for tests and the list handler's own checks). */
export function activityItem(scope: RequestScope, event: ActivityEvent, atMs: number): KvItem {
  const { principal, route } = scope;
  // The chain's context carries the request beside the scope (handlers receive that same object).
  const req = (scope as Partial<{ req: HttpRequest }>).req;
  const id = `act_${monotonicUlid(atMs)}`;
  const status = num(event.status);
  const sha = typeof event.file_sha256 === 'string' && SHA256.test(event.file_sha256) ? event.file_sha256 : null;
  const related = event.related
    ? { database: text(event.related.database), collection_id: text(event.related.collection_id), record_id: text(event.related.record_id) }
    : null;
  const country = req?.headers['cloudfront-viewer-country'];
  const record: ActivityRecord = {
    id,
    at_ms: atMs,
    organization_id: principal.organizationId,
    actor_kind: principal.kind,
    actor_id: principal.userId ?? principal.credentialId,
    source: route.api,
    kind: event.kind,
    method: req?.method ?? (route.method === 'ANY' ? null : route.method),
    route: text(route.path === '$default' ? (req?.path ?? null) : route.path),
    status,
    outcome: outcomeOf(status),
    error_code: text(event.error_code),
    latency_ms: num(event.latency_ms),
    file_id: text(event.file_id),
    file_sha256: sha,
    file_size: num(event.file_size),
    content_type: text(event.content_type),
    file_name: text(event.file_name),
    related: related && (related.database ?? related.collection_id ?? related.record_id) !== null ? related : null,
    bytes_in: num(event.bytes_in),
    bytes_out: num(event.bytes_out),
    country: country && /^[A-Za-z]{2}$/.test(country) ? country.toUpperCase() : null,
  };
  const sk = activitySortKey(atMs, id);
  const item: KvItem = { pk: activityPartition(principal.organizationId, activityDay(atMs)), sk };
  // Fields that do not apply are not stored (activityRecordOf answers them as null): one is written per call.
  for (const key in record) {
    const value = (record as unknown as Record<string, KvValue>)[key];
    if (value !== null) item[key] = value;
  }
  // Not part of the answer: lets an application-bound credential see only its application's activity.
  if (principal.applicationId) item.application_id = principal.applicationId;
  item.expires_at = Math.floor((atMs + ACTIVITY_RETENTION_MS) / 1000);
  if (sha) {
    item.gsi1pk = activityFilePartition(principal.organizationId, sha);
    item.gsi1sk = sk;
  }
  return item;
}

/** The answer shape of a stored item: the spec's fields, in the spec's order. */
export function activityRecordOf(item: KvItem): ActivityRecord {
  const out: Record<string, unknown> = {};
  for (const field of ACTIVITY_FIELDS) out[field] = item[field] ?? null;
  return out as unknown as ActivityRecord;
}

/** Records an event for the calling principal; never throws, never delays the call. */
export function recordActivity(scope: RequestScope, event: ActivityEvent): void {
  try {
    if (!scope?.principal || !scope.engine) return;
    activityRecorder.add(scope.engine.kv, activityItem(scope, event, scope.engine.clock.now()));
  } catch (error) {
    log.error('activity event not recorded', { kind: event?.kind, error: String(error) });
  }
}

// ---------- reading the log (GET /v1/activity) ----------

export interface ActivityQuery {
  /** Unix ms, inclusive. */
  from: number;
  /** Unix ms, exclusive. */
  to: number;
  /** Only these kinds; null for all. */
  kinds: ActivityKind[] | null;
  file_sha256: string | null;
}

export interface ActivityPage {
  items: ActivityRecord[];
  next_cursor: string | null;
  archive_searched: boolean;
}

/** Most items one page examines (read, then filtered by kind or application) before it answers short with a cursor. */
export const ACTIVITY_SCAN_BUDGET = 2000;
const DAY_MS = 24 * 3600 * 1000;
/** Events are stamped by the clock of the function that recorded them: allow that much skew past `now`. */
const CLOCK_SKEW_MS = 60_000;

/** The cursor is invalid: tampered with, or made for another query or caller. */
export class InvalidActivityCursorError extends Error {
  override name = 'InvalidActivityCursorError';
}

interface CursorState {
  q: ActivityQuery;
  /** Sort key of the last item examined: the next page starts strictly below it. */
  after: string;
}

/**
 * Opaque cursor: the resolved query and the position, with a checksum over them and the caller (an
 * organization and application), so an altered cursor, or one shown to another caller, is refused.
 * It carries no secret: the organization always comes from the credential, never from the cursor.
 */
export function encodeActivityCursor(state: CursorState, callerKey: string): string {
  const payload = Buffer.from(JSON.stringify({ v: 1, ...state })).toString('base64url');
  return `${payload}.${checksum(payload, callerKey)}`;
}

export function decodeActivityCursor(cursor: string, callerKey: string): CursorState {
  const [payload, sum, extra] = cursor.split('.');
  if (!payload || !sum || extra !== undefined || checksum(payload, callerKey) !== sum) throw new InvalidActivityCursorError();
  let state: unknown;
  try {
    state = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw new InvalidActivityCursorError();
  }
  const s = state as { v?: unknown; q?: Partial<ActivityQuery>; after?: unknown };
  const q = s?.q;
  if (s?.v !== 1 || !q || typeof s.after !== 'string' || !Number.isSafeInteger(q.from) || !Number.isSafeInteger(q.to)) {
    throw new InvalidActivityCursorError();
  }
  return { q: { from: q.from!, to: q.to!, kinds: q.kinds ?? null, file_sha256: q.file_sha256 ?? null }, after: s.after };
}

function checksum(payload: string, callerKey: string): string {
  return createHash('sha256').update(`platform.activity.cursor\n${callerKey}\n${payload}`).digest('base64url').slice(0, 22);
}

const atMsOfSortKey = (sk: string) => Number(sk.slice(0, 15));
const pad15 = (ms: number) => String(Math.max(0, ms)).padStart(15, '0');

/**
 * One page of the organization's activity, newest first. Day partitions are read from the newest down
 * (or the file index when `file_sha256` is set); kind and application filters apply after the read,
 * so a page may come back short, with a cursor, once ACTIVITY_SCAN_BUDGET items were examined.
 */
export async function listActivity(
  kv: KeyValueStore,
  caller: { organizationId: string; applicationId: string | null },
  q: ActivityQuery,
  options: { limit: number; after?: string; now: number },
): Promise<{ items: ActivityRecord[]; after: string | null }> {
  const { limit, after, now } = options;
  // Nothing older than the hot retention exists, nothing newer than now (plus skew): bound the days to read.
  const fromMs = Math.max(q.from, now - ACTIVITY_RETENTION_MS - DAY_MS);
  let toMs = Math.min(q.to - 1, now + CLOCK_SKEW_MS);
  let hi = `${pad15(q.to - 1)}#\uffff`;
  if (after !== undefined) {
    toMs = Math.min(toMs, atMsOfSortKey(after));
    if (after < hi) hi = after;
  }
  const lo = pad15(fromMs);
  const out: KvItem[] = [];
  if (fromMs > toMs || lo > hi) return { items: [], after: null };

  const partitions: { pk: string; index?: 'gsi1' }[] = [];
  if (q.file_sha256) partitions.push({ pk: activityFilePartition(caller.organizationId, q.file_sha256), index: 'gsi1' });
  else {
    for (let day = Date.parse(activityDay(toMs)); day >= Date.parse(activityDay(fromMs)); day -= DAY_MS) {
      partitions.push({ pk: activityPartition(caller.organizationId, activityDay(day)) });
    }
  }
  const kinds = q.kinds ? new Set<string>(q.kinds) : null;
  const filtering = kinds !== null || caller.applicationId !== null;
  let examined = 0;
  let last: string | null = null;

  for (const partition of partitions) {
    let cursor: string | undefined;
    do {
      const page = await kv.query({
        ...partition,
        sk: { between: [lo, hi] },
        descending: true,
        limit: filtering ? Math.min(500, ACTIVITY_SCAN_BUDGET - examined) : limit + 1 - out.length,
        cursor,
      });
      for (const item of page.items) {
        if (item.sk === after) continue;
        examined++;
        last = item.sk;
        const visible = (!kinds || kinds.has(String(item.kind))) && (caller.applicationId === null || item.application_id === caller.applicationId);
        if (visible) out.push(item);
        if (out.length > limit) return { items: out.slice(0, limit).map(activityRecordOf), after: out[limit - 1].sk };
        if (examined >= ACTIVITY_SCAN_BUDGET) return { items: out.map(activityRecordOf), after: last };
      }
      cursor = page.cursor;
    } while (cursor);
  }
  return { items: out.map(activityRecordOf), after: null };
}
