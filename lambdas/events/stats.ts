/**
 * Workspace statistics (spec 2, "Workspace statistics"), kept by atomic counters, never by scanning.
 * Each counter moves in the same transaction as the state change it counts (docs/events/design.md
 * "Exact statistics"): a publish's in its event's transaction, an ack's with the message's delete, a
 * webhook delivery's outcome with a marker that it was counted (a duplicate attempt finds the marker
 * and counts nothing). So a crash or a duplicate never leaves them off. The counters are spread over
 * STAT_SHARDS items of one partition (no single item takes every write) and summed when read.
 */
import { createHash } from 'node:crypto';
import type { Engine, KvWrite } from '../engine/ports.js';
import { TransactionCanceledError } from '../engine/errors.js';
import { ulidTimeMs } from '../shared/ids.js';
import * as z from 'zod/mini';
import { onFirstUse } from '../shared/validate.js';
import { inboxPartition } from './keys.js';

export type Counter = 'published' | 'completed' | 'depth' | 'retries' | 'failed_attempts' | 'dlq_inflow';

export const STAT_SHARDS = 16;
/** Markers of counted webhook outcomes live as long as the events they name. */
const MARKER_SECONDS = 30 * 24 * 3600;

export const statsPartition = (workspaceId: string) => `evstat#${workspaceId}`;
/** The counters' item before they were sharded (still summed, so older counts are kept). */
export const statsKey = (workspaceId: string) => ({ pk: statsPartition(workspaceId), sk: 'stats' });
/** The counter shard a change about `id` (an event id) moves. */
export const statsShardKey = (workspaceId: string, id: string) => ({ pk: statsPartition(workspaceId), sk: `shard#${createHash('sha256').update(id).digest()[0] % STAT_SHARDS}` });
/** `evdone#<ws>` / `<event>#<sub>#<what>`: this outcome of this delivery is counted. */
export const countedKey = (workspaceId: string, marker: string) => ({ pk: `evdone#${workspaceId}`, sk: marker });

const nonZero = (add: Partial<Record<Counter, number>>) => Object.fromEntries(Object.entries(add).filter(([, n]) => n)) as Record<string, number>;

/** The write that adds to the counters, for a transaction (undefined when nothing moves). */
export function countWrite(workspaceId: string, id: string, add: Partial<Record<Counter, number>>): KvWrite | undefined {
  const n = nonZero(add);
  return Object.keys(n).length ? { update: statsShardKey(workspaceId, id), add: n } : undefined;
}

/**
 * Adds to the workspace's counters, one atomic update (a counter missing counts as 0); `also` are
 * writes of the same state change (the delivery log), made in the same transaction.
 */
export async function count(engine: Engine, workspaceId: string, add: Partial<Record<Counter, number>>, id = String(Math.random()), also: KvWrite[] = []): Promise<void> {
  const write = countWrite(workspaceId, id, add);
  if (also.length) await engine.kv.transact([...(write ? [write] : []), ...also]);
  else if (write && 'update' in write) await engine.kv.update({ key: write.update, add: write.add });
}

/**
 * Adds to the counters once per `marker` (an outcome of one delivery, e.g. `<event>#<sub>#done`): the
 * marker is written if absent in the same transaction, with `also` (the delivery log's write: so it too
 * is written once). False when it was counted already.
 */
export async function countOnce(engine: Engine, workspaceId: string, eventId: string, marker: string, add: Partial<Record<Counter, number>>, also: KvWrite[] = []): Promise<boolean> {
  const write = countWrite(workspaceId, eventId, add);
  const expires_at = Math.floor(engine.clock.now() / 1000) + MARKER_SECONDS;
  try {
    await engine.kv.transact([{ update: countedKey(workspaceId, marker), set: { expires_at }, condition: { ifAbsent: true } }, ...(write ? [write] : []), ...also]);
    return true;
  } catch (error) {
    if (error instanceof TransactionCanceledError && error.failed.includes(0)) return false;
    throw error;
  }
}

/** Workspace statistics (spec 2), GET .../stats' answer. */
export const workspaceStatsSchema = onFirstUse(() => {
  const counter = (description: string) => z.int().check(z.minimum(0), z.describe(description));
  return z.strictObject({
    workspace_id: z.string(),
    published: counter('Events accepted (duplicates not counted).'),
    completed: counter('Deliveries completed: webhook 2xx and acks, each delivery once. The metered unit.'),
    depth: counter('Deliveries waiting: in an inbox (leased or not), or a webhook delivery neither completed nor dead.'),
    oldest_pending_age_seconds: z.nullable(counter('Age of the oldest message waiting in a pull or stream inbox; null when none waits.')),
    retries: counter('Webhook attempts queued again.'),
    retry_rate: z.number().check(z.minimum(0), z.describe('Failed attempts per finished delivery (0 when none finished).')),
    dlq_inflow: counter('Deliveries that became dead letters.'),
  });
});
export type WorkspaceStats = z.output<ReturnType<typeof workspaceStatsSchema>>;

/**
 * The counters (one query of the workspace's counter items, at most STAT_SHARDS + 1), and the age of
 * the oldest message still waiting: the head of each inbox (one one-item read per pull or stream
 * subscription, at most 50).
 */
export async function workspaceStats(engine: Engine, workspaceId: string, inboxes: string[]): Promise<WorkspaceStats> {
  const [page, heads] = await Promise.all([
    engine.kv.query({ pk: statsPartition(workspaceId), limit: STAT_SHARDS + 1 }),
    Promise.all(inboxes.map((id) => engine.kv.query({ pk: inboxPartition(id), limit: 1 }))),
  ]);
  const n = (k: Counter) => Math.max(0, page.items.reduce((sum, item) => sum + (typeof item[k] === 'number' ? (item[k] as number) : 0), 0));
  const oldest = heads.flatMap((p) => p.items.map((i) => ulidTimeMs(String(i.sk)))).reduce((a, b) => Math.min(a, b), Infinity);
  const finished = n('completed') + n('dlq_inflow');
  return {
    workspace_id: workspaceId,
    published: n('published'),
    completed: n('completed'),
    depth: n('depth'),
    oldest_pending_age_seconds: oldest === Infinity ? null : Math.max(0, Math.floor((engine.clock.now() - oldest) / 1000)),
    retries: n('retries'),
    retry_rate: finished ? n('failed_attempts') / finished : 0,
    dlq_inflow: n('dlq_inflow'),
  };
}
