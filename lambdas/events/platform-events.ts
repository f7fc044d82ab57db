/**
 * Platform events (docs/events/platform-events.md): the Data API's writes published into the writing
 * credential's workspace as `record.created`, `record.updated`, `record.deleted`, `blob.created` and
 * `blob.deleted`. The Data module writes each transaction's changes into an outbox item inside that
 * transaction (data/change-outbox.ts); this module decides whether anyone wants them (one cached
 * read of the workspace's subscriptions), publishes them through the API's own publish path after the
 * commit, and sweeps the items a crash left behind.
 */
import type { Engine } from '../engine/ports.js';
import type { CredentialKind, Principal } from '../auth/principal.js';
import { log } from '../shared/log.js';
import { staleChangeEntries, type ChangeEntry, type ChangeFeed, type ChangeType } from '../data/change-outbox.js';
import { publish } from './publish.js';
import { Subscriptions, subscriptionMatches, type Subscription } from './subscriptions.js';

/** How long a worker trusts its read of a workspace's subscriptions (as a collection is cached for a second). */
export const SUBSCRIPTION_CACHE_MS = 1000;
const MAX_CACHED_WORKSPACES = 10_000;

const caches = new WeakMap<Engine, Map<string, { at: number; list: Promise<Subscription[]> }>>();

/** The workspace's subscriptions, read at most once a second per worker. */
function cachedSubscriptions(engine: Engine, workspaceId: string): Promise<Subscription[]> {
  let cache = caches.get(engine);
  if (!cache) caches.set(engine, (cache = new Map()));
  const now = engine.clock.now();
  const hit = cache.get(workspaceId);
  if (hit && now - hit.at < SUBSCRIPTION_CACHE_MS && now >= hit.at) return hit.list;
  if (cache.size >= MAX_CACHED_WORKSPACES) cache.clear();
  const list = new Subscriptions(engine).list(workspaceId);
  cache.set(workspaceId, { at: now, list });
  list.catch(() => cache.delete(workspaceId));
  return list;
}

/** Forgets a workspace's cached subscriptions (this worker's subscription changes; tests). */
export function forgetCachedSubscriptions(engine: Engine, workspaceId?: string): void {
  if (workspaceId === undefined) caches.delete(engine);
  else caches.get(engine)?.delete(workspaceId);
}

/** The writer as the publish path knows a credential: the tenant and `source` come from it. */
function writerPrincipal(entry: ChangeEntry): Principal {
  const w = entry.writer;
  return {
    kind: w.credential_kind as CredentialKind,
    credentialId: w.credential_id,
    organizationId: w.organization_id,
    applicationId: w.application_id,
    workspaceId: w.workspace_id,
    capabilities: null,
    userId: null,
    claims: null,
    origins: null,
    permissions: null,
  };
}

/** Publishes an outbox entry's changes, in order, each with its deterministic idempotency key. */
export async function publishChanges(engine: Engine, entry: ChangeEntry): Promise<void> {
  if (!entry.changes.length) return;
  const events = entry.changes.map((c) => ({ type: c.type, data: JSON.parse(c.data) as unknown, idempotency_key: c.idempotency_key }));
  const answer = await publish(engine, writerPrincipal(entry), entry.writer.workspace_id, { events });
  // Never expected (the data is kept under 16 KiB, the keys are valid): logged, not retried forever.
  if (answer.rejected.length) log.error('platform events rejected', { outbox: entry.key.sk, rejected: JSON.stringify(answer.rejected) });
}

/** The feed the Data module writes through (bound in http/hook-bindings.ts). */
export const platformEventFeed: ChangeFeed = {
  async target(scope, types: ChangeType[]) {
    const workspaceId = scope.principal.workspaceId;
    // An organization-wide credential belongs to no workspace: its writes publish nothing.
    if (!workspaceId) return undefined;
    const subscriptions = await cachedSubscriptions(scope.engine, workspaceId);
    return subscriptions.some((s) => types.some((t) => subscriptionMatches(s, t))) ? { workspaceId } : undefined;
  },
  publish: publishChanges,
};

/**
 * Publishes the outbox items a crash left between a write's commit and its publish (older than the
 * grace period), then deletes them; returns how many. A re-publish of an event that did go out is a
 * duplicate by its idempotency key: nothing is delivered twice. Runs beside the webhook outbox's
 * sweeper (local/queue-workers.ts).
 */
export async function sweepPlatformEvents(engine: Engine): Promise<number> {
  let swept = 0;
  for (const entry of await staleChangeEntries(engine)) {
    try {
      await publishChanges(engine, entry);
      await engine.kv.delete(entry.key);
      swept++;
    } catch (error) {
      log.error('platform events: sweep failed; kept for the next sweep', { outbox: entry.key.sk, error: String(error) });
    }
  }
  return swept;
}
