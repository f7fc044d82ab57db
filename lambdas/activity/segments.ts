/**
 * How the activity log is stored: in segments, one key-value item holding the events one process
 * recorded for one organization and day over a short span, not one item per event. Every call is
 * recorded, so the log is the busiest writer there is; a segment of up to 100 events costs one write
 * where one item per event cost a hundred (locally, a GET /v1/models spent a fifth of its time writing
 * its own activity item; on DynamoDB, fewer and fuller items cost fewer write units).
 *
 *   act#<org>#<yyyy-mm-dd UTC> / <newest event's sort key>     organization_id, columns, events, oldest_ms, expires_at
 *   gsi1: actfile#<org>#<sha256> / same sort key               an event about a file, alone in its segment
 *
 * An event is a row: its values in the order of the segment's `columns` (the names of the record's
 * fields but organization_id, which the segment holds once, plus application_id and usage), nulls included. Rows
 * without names store 195 bytes an event instead of 322, and need no object built per event; a segment
 * names its columns, so a later version may add some and still read the older segments.
 *
 * An event's sort key is `<at_ms, 15 digits>#<id>`. A segment spans at most SEGMENT_MAX_SPAN_MS between
 * its oldest and newest event: readers rely on it to merge the segments of several writers (processes,
 * function instances) into one newest-first order (listing.ts). Events about a file go alone in a
 * segment so the file index finds exactly them. Segments expire (TTL) 30 days after their newest event.
 *
 * `add` never slows or fails the call it records: it only appends to an open segment in memory.
 * A segment is written when it is full, or 100 ms after the first event buffered, whichever comes
 * first; failures are logged, never thrown. `flush()` writes everything and waits: the local platform
 * calls it on shutdown, and in Lambda the chain calls it after each call (nothing runs once the answer is
 * returned), so there a segment holds that call's events.
 *
 * `addDurable` is for an event a call's answer promises (an AI call's usage, docs/decisions/ai-usage.md):
 * it resolves once the segment holding the event is written. Every durable add of one event-loop turn
 * is written together on the next (setImmediate): one write per segment, with the events already
 * buffered for its partition, which the engine's group commit joins with the other writes of that turn.
 * A failed write is logged and resolves all the same: recording never fails the call.
 */
import type { KeyValueStore, KvItem, KvValue } from '../engine/ports.js';
import { log } from '../shared/log.js';

/** Events per segment. */
export const SEGMENT_MAX_EVENTS = 100;
/** Most time between a segment's oldest and newest event. */
export const SEGMENT_MAX_SPAN_MS = 1000;
/** Upper bound of a segment's size, summing its events' `bytes` estimates (DynamoDB items hold 400 KB). */
const SEGMENT_MAX_BYTES = 256 * 1024;
/** Hot retention: segments expire (TTL) this long after their newest event. */
export const ACTIVITY_RETENTION_MS = 30 * 24 * 3600 * 1000;

/** The columns of the segments written now; `activityEntry` (activity.ts) builds rows in this order. */
export const ACTIVITY_COLUMNS = [
  'id', 'at_ms', 'actor_kind', 'actor_id', 'source', 'kind', 'method', 'route', 'status', 'outcome', 'error_code',
  'latency_ms', 'file_id', 'file_sha256', 'file_size', 'content_type', 'file_name', 'related', 'bytes_in', 'bytes_out',
  'country', 'application_id', 'usage', 'request_id', 'operation_id',
] as const;

/** An event as written: its values in ACTIVITY_COLUMNS order. */
export type EventRow = KvValue[];
/** An event as read back: every field by name, organization_id included. */
export type StoredEvent = Record<string, KvValue>;

/** An event ready to be buffered: where it goes and what it weighs. */
export interface ActivityEntry {
  /** The day partition. */
  pk: string;
  /** `<at_ms, 15 digits>#<id>`. */
  key: string;
  at: number;
  organizationId: string;
  row: EventRow;
  /** The file index partition, for an event about a file. */
  filePk: string | null;
  /** An upper bound of the event's stored size (UTF-8 at most 3 bytes per UTF-16 unit). */
  bytes: number;
}

/** Unix ms as 15 digits: sort keys compare as strings. */
export const pad15 = (ms: number) => String(Math.max(0, ms)).padStart(15, '0');
export const activitySortKey = (atMs: number, id: string) => `${pad15(atMs)}#${id}`;
/** Every activity item's partition key starts with this (the stack limits the chain's writes to it). */
export const ACTIVITY_KEY_PREFIX = 'act#';
export const activityPartition = (org: string, day: string) => `${ACTIVITY_KEY_PREFIX}${org}#${day}`;
export const activityFilePartition = (org: string, sha256: string) => `actfile#${org}#${sha256}`;
export const atMsOfSortKey = (sk: string) => Number(sk.slice(0, 15));
/** The sort key of an event read back. */
export const eventKey = (e: StoredEvent) => activitySortKey(e.at_ms as number, e.id as string);

const DAY_MS = 24 * 3600 * 1000;
let dayStart = 0;
let dayText = '';
/** `yyyy-mm-dd` (UTC) of a time; the last day's text is kept, since nearly every event falls on it. */
export function activityDay(ms: number): string {
  if (ms < dayStart || ms >= dayStart + DAY_MS) {
    dayStart = ms - (((ms % DAY_MS) + DAY_MS) % DAY_MS);
    dayText = new Date(dayStart).toISOString().slice(0, 10);
  }
  return dayText;
}

interface Segment {
  pk: string;
  organizationId: string;
  filePk: string | null;
  events: ActivityEntry[];
  bytes: number;
  oldest: number;
  newest: number;
  /** Durable adds waiting for this segment's write (addDurable). */
  waiters?: (() => void)[];
}

/** The item of a segment: events newest first, keyed by the newest. */
export function segmentItem(segment: Segment): KvItem {
  const entries = segment.events.sort((a, b) => (a.key < b.key ? 1 : a.key > b.key ? -1 : 0));
  const sk = entries[0].key;
  const item: KvItem = {
    pk: segment.pk,
    sk,
    organization_id: segment.organizationId,
    columns: ACTIVITY_COLUMNS as unknown as string[],
    events: entries.map((e) => e.row),
    oldest_ms: segment.oldest,
    expires_at: Math.floor((segment.newest + ACTIVITY_RETENTION_MS) / 1000),
  };
  if (segment.filePk) {
    item.gsi1pk = segment.filePk;
    item.gsi1sk = sk;
  }
  return item;
}

/** The events of a segment item, newest first, each with every field by name. */
export function segmentEvents(item: KvItem): StoredEvent[] {
  const columns = item.columns as string[];
  return (item.events as EventRow[]).map((row) => {
    const event: StoredEvent = { organization_id: item.organization_id as string };
    for (let i = 0; i < columns.length; i++) event[columns[i]] = row[i] ?? null;
    return event;
  });
}

export interface ActivityRecorderOptions {
  /** Events per segment; a segment this full is written at once. */
  maxEvents?: number;
  /** Longest an event waits in memory. */
  intervalMs?: number;
}

interface StoreBuffer {
  /** Segments still taking events, by day partition. */
  open: Map<string, Segment>;
  /** Segments waiting for the next write. */
  closed: Segment[];
}

/** Buffers events per key-value store in segments and writes them in the background. */
export class ActivityRecorder {
  readonly maxEvents: number;
  readonly intervalMs: number;
  private readonly buffers = new Map<KeyValueStore, StoreBuffer>();
  private readonly inFlight = new Set<Promise<void>>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  /** Stores with durable adds to write on the next turn. */
  private durable = new Set<KeyValueStore>();
  private durableTurn: ReturnType<typeof setImmediate> | undefined;

  constructor(options: ActivityRecorderOptions = {}) {
    this.maxEvents = Math.min(SEGMENT_MAX_EVENTS, Math.max(1, options.maxEvents ?? SEGMENT_MAX_EVENTS));
    this.intervalMs = options.intervalMs ?? 100;
  }

  /** Events buffered and not yet handed to the store. */
  get pending(): number {
    let n = 0;
    for (const b of this.buffers.values()) for (const s of [...b.closed, ...b.open.values()]) n += s.events.length;
    return n;
  }

  add(kv: KeyValueStore, entry: ActivityEntry): void {
    this.buffer(kv, entry);
  }

  /**
   * Adds an event and resolves once the segment holding it is written (or its write failed, logged):
   * the durable adds of one turn share their segments' writes, made on the next turn.
   */
  addDurable(kv: KeyValueStore, entry: ActivityEntry): Promise<void> {
    return new Promise<void>((resolve) => {
      // A full segment is written at once, before the waiter is added: it waits on its own write then.
      const segment = this.buffer(kv, entry, resolve);
      if (segment) return;
      this.durable.add(kv);
      this.durableTurn ??= setImmediate(() => this.writeDurable());
    });
  }

  /** Buffers an event; returns the segment it closed by filling it (already being written), if any. */
  private buffer(kv: KeyValueStore, entry: ActivityEntry, waiter?: () => void): Segment | undefined {
    let buffer = this.buffers.get(kv);
    if (!buffer) this.buffers.set(kv, (buffer = { open: new Map(), closed: [] }));
    if (entry.filePk) {
      const alone: Segment = { pk: entry.pk, organizationId: entry.organizationId, filePk: entry.filePk, events: [entry], bytes: entry.bytes, oldest: entry.at, newest: entry.at };
      if (waiter) alone.waiters = [waiter];
      buffer.closed.push(alone);
    } else {
      let segment = buffer.open.get(entry.pk);
      if (
        segment &&
        (segment.bytes + entry.bytes > SEGMENT_MAX_BYTES ||
          Math.max(segment.newest, entry.at) - Math.min(segment.oldest, entry.at) > SEGMENT_MAX_SPAN_MS)
      ) {
        buffer.closed.push(segment);
        segment = undefined;
      }
      if (!segment) {
        segment = { pk: entry.pk, organizationId: entry.organizationId, filePk: null, events: [], bytes: 0, oldest: entry.at, newest: entry.at };
        buffer.open.set(entry.pk, segment);
      }
      segment.events.push(entry);
      segment.bytes += entry.bytes;
      if (entry.at < segment.oldest) segment.oldest = entry.at;
      if (entry.at > segment.newest) segment.newest = entry.at;
      if (waiter) (segment.waiters ??= []).push(waiter);
      if (segment.events.length >= this.maxEvents) {
        buffer.open.delete(entry.pk);
        buffer.closed.push(segment);
        this.start(kv, 'closed');
        return segment;
      }
    }
    this.timer ??= unref(setTimeout(() => this.tick(), this.intervalMs));
    return undefined;
  }

  /** The turn after durable adds: writes the segments they wait for (and the closed ones). */
  private writeDurable(): void {
    this.durableTurn = undefined;
    const stores = this.durable;
    this.durable = new Set();
    for (const kv of stores) this.start(kv, 'durable');
  }

  /** Writes what is buffered (for one store, or all) and waits for every write in flight. */
  async flush(kv?: KeyValueStore): Promise<void> {
    if (kv) this.start(kv, 'all');
    else for (const store of [...this.buffers.keys()]) this.start(store, 'all');
    while (this.inFlight.size) await Promise.all([...this.inFlight]);
  }

  private tick(): void {
    this.timer = undefined;
    for (const store of [...this.buffers.keys()]) this.start(store, 'all');
  }

  /** Writes the closed segments of a store, and of its open ones all, those durable adds wait for, or none. */
  private start(kv: KeyValueStore, open: 'all' | 'durable' | 'closed'): void {
    const buffer = this.buffers.get(kv);
    if (!buffer) return;
    const segments = buffer.closed;
    buffer.closed = [];
    if (open === 'all') {
      segments.push(...buffer.open.values());
      buffer.open.clear();
    } else if (open === 'durable') {
      for (const [pk, segment] of buffer.open) {
        if (!segment.waiters) continue;
        segments.push(segment);
        buffer.open.delete(pk);
      }
    }
    if (buffer.open.size === 0) this.buffers.delete(kv);
    if (this.buffers.size === 0 && this.timer) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    for (const segment of segments) {
      const write = this.write(kv, segment).finally(() => this.inFlight.delete(write));
      this.inFlight.add(write);
    }
  }

  private async write(kv: KeyValueStore, segment: Segment): Promise<void> {
    try {
      await kv.put(segmentItem(segment));
    } catch (error) {
      log.error('activity write failed; events dropped', { count: segment.events.length, error: String(error) });
    }
    if (segment.waiters) for (const done of segment.waiters) done();
  }
}

function unref<T>(timer: T): T {
  (timer as { unref?: () => void }).unref?.();
  return timer;
}
