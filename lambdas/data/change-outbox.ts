/**
 * The platform event outbox of the Data API (docs/events/platform-events.md). A write whose changes
 * someone wants as events puts ONE outbox item into its own key-value transaction, holding every
 * change of the transaction (one record, a batch of 100, a file's metadata) as a list. After the
 * commit the changes are handed to the bound feed (the Events API publishes them, each with a
 * deterministic idempotency key) and the item is deleted; a crash in between leaves the item, which
 * the sweeper publishes once it is older than CHANGE_OUTBOX_GRACE_MS (a re-publish is deduplicated
 * by the idempotency keys). So a crash loses neither the write nor its events.
 *
 * The Data module does not know the Events API (docs/architecture.md: events imports data, never the
 * reverse): the feed is bound from outside (http/hook-bindings.ts), and without one nothing is written.
 *
 *   dchg#<shard> / <ulid>#<random>   a transaction's changes not yet published (expire after 7 days)
 */
import { createHash } from 'node:crypto';
import type { Engine, KvItem, KvWrite } from '../engine/ports.js';
import { LIMITS } from '../engine/limits.js';
import { monotonicUlid, pooledRandomBytes, ulidTimeMs } from '../shared/ids.js';
import { log } from '../shared/log.js';
import type { DataScope } from './hooks.js';

export type ChangeType = 'record.created' | 'record.updated' | 'record.deleted' | 'blob.created' | 'blob.deleted';

/** One change as it will be published: its type, its idempotency key and its data as JSON text. */
export interface Change {
  type: ChangeType;
  idempotency_key: string;
  data: string;
}

/** Who wrote, as the event's envelope needs it (the sweeper has no credential to ask). */
export interface ChangeWriter {
  organization_id: string;
  workspace_id: string;
  application_id: string | null;
  credential_id: string;
  credential_kind: string;
}

export interface ChangeEntry {
  key: { pk: string; sk: string };
  writer: ChangeWriter;
  changes: Change[];
}

export interface ChangeFeed {
  /**
   * Whether the writer's changes of these types are wanted as events, and where: the workspace, or
   * undefined (nothing is written, no extra cost). Called once per write; expected to be cached.
   */
  target(scope: DataScope, types: ChangeType[]): Promise<{ workspaceId: string } | undefined>;
  /** Publishes an entry's changes; must be idempotent (a crash makes it run again). */
  publish(engine: Engine, entry: ChangeEntry): Promise<void>;
}

export const CHANGE_OUTBOX_SHARDS = 16;
/** An item this old was left by a write that stopped between its commit and its publish. */
export const CHANGE_OUTBOX_GRACE_MS = 10_000;
/** As long as the Events API deduplicates an idempotency key (168 hours). */
const CHANGE_OUTBOX_TTL_SECONDS = 168 * 3600;
/** Spec 4.21: an event's data (basic tier) is at most 16 KiB of JSON. */
export const MAX_CHANGE_DATA_BYTES = 16 * 1024;
/** The outbox item stays well inside an item's 400 KB: past this, the largest records go truncated. */
const MAX_OUTBOX_BYTES = 300 * 1024;
/** The Events API's idempotency key: 1 to 256 printable ASCII characters. */
const MAX_KEY_CHARS = 256;

let feed: ChangeFeed | undefined;

/** Binds the feed (once per process, http/hook-bindings.ts); returns the unbinding. */
export function bindChangeFeed(f: ChangeFeed): () => void {
  const previous = feed;
  feed = f;
  return () => {
    if (feed === f) feed = previous;
  };
}

export const changeOutboxPartition = (shard: number) => `dchg#${shard}`;

/** A key the Events API accepts: as is when short enough, else its prefix and a hash. */
export function changeKey(parts: (string | number)[]): string {
  const key = parts.join(':');
  if (key.length <= MAX_KEY_CHARS && /^[\x21-\x7e]+$/.test(key)) return key;
  return `${String(parts[0])}:h:${createHash('sha256').update(key).digest('hex')}`;
}

/** The record change's data: the record as answered, or a reference when it is over 16 KiB. */
export function recordChangeData(database: string, collection: string, record: Record<string, unknown> & { id: string; version: number }): string {
  const full = JSON.stringify({ database, collection, record });
  if (Buffer.byteLength(full) <= MAX_CHANGE_DATA_BYTES) return full;
  return truncatedRecord(database, collection, record.id, record.version);
}

const truncatedRecord = (database: string, collection: string, id: string, version: number) => JSON.stringify({ database, collection, id, version, truncated: true });

/**
 * The changes as the outbox item holds them: whole while they fit MAX_OUTBOX_BYTES (an item is at
 * most 400 KB); past that, the largest records are sent truncated, as a record over 16 KiB is.
 */
function fitOutbox(changes: Change[]): Change[] {
  let total = changes.reduce((n, c) => n + Buffer.byteLength(c.data) + c.idempotency_key.length + 32, 0);
  if (total <= MAX_OUTBOX_BYTES) return changes;
  const out = changes.map((c) => ({ ...c }));
  const bySize = out.map((c, i) => i).sort((a, b) => out[b].data.length - out[a].data.length);
  for (const i of bySize) {
    if (total <= MAX_OUTBOX_BYTES) break;
    const parsed = JSON.parse(out[i].data) as { database: string; collection?: string; record?: { id: string; version: number } };
    if (!parsed.record || parsed.collection === undefined) continue;
    const before = Buffer.byteLength(out[i].data);
    out[i].data = truncatedRecord(parsed.database, parsed.collection, parsed.record.id, parsed.record.version);
    total -= before - Buffer.byteLength(out[i].data);
  }
  return out;
}

/** A write's outbox, decided before its transaction. */
export interface PlannedOutbox {
  workspaceId: string;
  /** The outbox item's put, to add to the write's transaction. */
  write(changes: Change[]): { put: KvItem };
  entry(changes: Change[]): ChangeEntry;
}

/**
 * Whether this write's changes are wanted as events: one cached read (the feed's), no write. Undefined
 * when no feed is bound, the credential has no workspace, or nothing there subscribes to the types.
 */
export async function planChangeOutbox(scope: DataScope, types: ChangeType[]): Promise<PlannedOutbox | undefined> {
  if (!feed || !scope.principal.workspaceId) return undefined;
  let target: { workspaceId: string } | undefined;
  try {
    target = await feed.target(scope, types);
  } catch (error) {
    // Not knowing is not "nobody": record the changes, the publish decides.
    log.error('platform events: subscription lookup failed', { error: String(error) });
    target = { workspaceId: scope.principal.workspaceId };
  }
  if (!target) return undefined;
  const now = scope.engine.clock.now();
  const id = `${monotonicUlid(now)}#${pooledRandomBytes(4).toString('hex')}`;
  const key = { pk: changeOutboxPartition(parseInt(id.slice(-2), 16) % CHANGE_OUTBOX_SHARDS), sk: id };
  const p = scope.principal;
  const writer: ChangeWriter = {
    organization_id: p.organizationId,
    workspace_id: target.workspaceId,
    application_id: p.applicationId,
    credential_id: p.credentialId,
    credential_kind: p.kind,
  };
  const entry = (changes: Change[]): ChangeEntry => ({ key, writer, changes: fitOutbox(changes) });
  return { workspaceId: target.workspaceId, entry, write: (changes) => ({ put: outboxItem(entry(changes), now) }) };
}

/** Whether a transaction of `writes` writes still has room for the outbox item. */
export const roomForOutbox = (writes: number) => writes + 1 <= LIMITS.transactionItems;

/**
 * After the commit: publishes the entry's changes, then deletes the outbox item. Never rejects (the
 * write has committed): a failure leaves the item to the sweeper. `written: false` is a write whose
 * own writes filled its transaction (no room for the item): its item is written only if the publish
 * fails, so the sweeper still retries it (docs/events/platform-events.md, "The one exception").
 */
export async function settleChangeOutbox(engine: Engine, entry: ChangeEntry, options: { written: boolean }): Promise<void> {
  if (!entry.changes.length) return;
  try {
    if (!feed) throw new Error('no change feed bound');
    await feed.publish(engine, entry);
    if (options.written) await engine.kv.delete(entry.key);
  } catch (error) {
    log.error('platform events: publish after commit failed; the sweeper will retry', { error: String(error), outbox: entry.key.sk });
    if (!options.written) {
      await engine.kv.put(outboxItem(entry, engine.clock.now())).catch((e: unknown) => log.error('platform events: outbox write failed', { error: String(e) }));
    }
  }
}

function outboxItem(entry: ChangeEntry, now: number): KvItem {
  return { ...entry.key, writer: { ...entry.writer } as unknown as KvItem[string], changes: JSON.stringify(entry.changes), expires_at: Math.floor(now / 1000) + CHANGE_OUTBOX_TTL_SECONDS };
}

/** Reads an outbox item back. */
export function changeEntryOf(item: KvItem): ChangeEntry {
  return { key: { pk: String(item.pk), sk: String(item.sk) }, writer: item.writer as unknown as ChangeWriter, changes: JSON.parse(String(item.changes)) as Change[] };
}

/**
 * Outbox items older than the grace period (left by a crash between a commit and its publish), oldest
 * first, at most `limit` a shard. Items sort by time in their shard, so a shard's read stops at the first
 * young one.
 */
export async function staleChangeEntries(engine: Engine, limit = 100): Promise<ChangeEntry[]> {
  const cutoff = engine.clock.now() - CHANGE_OUTBOX_GRACE_MS;
  const out: ChangeEntry[] = [];
  for (let shard = 0; shard < CHANGE_OUTBOX_SHARDS; shard++) {
    const page = await engine.kv.query({ pk: changeOutboxPartition(shard), limit });
    for (const item of page.items) {
      if (ulidTimeMs(String(item.sk).split('#')[0]) > cutoff) break;
      out.push(changeEntryOf(item));
    }
  }
  return out.sort((a, b) => (a.key.sk < b.key.sk ? -1 : 1));
}
