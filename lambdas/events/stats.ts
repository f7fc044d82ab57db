/**
 * Workspace statistics (spec 2, "Workspace statistics"), kept by atomic counters on one item per
 * workspace, never by scanning: every publish, delivery, retry and dead letter adds to them.
 */
import type { Engine } from '../engine/ports.js';
import { ulidTimeMs } from '../shared/ids.js';
import { inboxPartition } from './keys.js';

export type Counter = 'published' | 'completed' | 'depth' | 'retries' | 'failed_attempts' | 'dlq_inflow';

export const statsKey = (workspaceId: string) => ({ pk: `evstat#${workspaceId}`, sk: 'stats' });

/** Adds to the workspace's counters, one atomic update (a counter missing counts as 0). */
export async function count(engine: Engine, workspaceId: string, add: Partial<Record<Counter, number>>): Promise<void> {
  const nonZero = Object.fromEntries(Object.entries(add).filter(([, n]) => n));
  if (Object.keys(nonZero).length) await engine.kv.update({ key: statsKey(workspaceId), add: nonZero });
}

export interface WorkspaceStats {
  workspace_id: string;
  published: number;
  completed: number;
  depth: number;
  oldest_pending_age_seconds: number | null;
  retries: number;
  retry_rate: number;
  dlq_inflow: number;
}

/**
 * The counters, and the age of the oldest message still waiting: the head of each inbox (one
 * one-item read per pull or stream subscription, at most 50) and of the webhook deliveries pending.
 */
export async function workspaceStats(engine: Engine, workspaceId: string, inboxes: string[]): Promise<WorkspaceStats> {
  const item = await engine.kv.get(statsKey(workspaceId));
  const n = (k: Counter) => (typeof item?.[k] === 'number' ? Math.max(0, item[k] as number) : 0);
  const heads = await Promise.all(inboxes.map((id) => engine.kv.query({ pk: inboxPartition(id), limit: 1 })));
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
