/**
 * Pull and ack (spec 4.21, 3): a pull or stream subscription's messages wait in its inbox, oldest
 * first. A pull leases up to `max` visible messages for `lease_seconds` (each lease is a conditional
 * update on the lease it saw, so two pullers never lease one message), counting `delivery_count`; an
 * unacknowledged message is visible again once its lease ends. An ack deletes the message.
 */
import type { Engine, KvItem } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { inboxKey, inboxPartition } from './keys.js';
import { count } from './stats.js';

export const PULL_MAX = { min: 1, max: 100, default: 10 };
export const LEASE_SECONDS = { min: 5, max: 300, default: 30 };
export const MAX_ACK_IDS = 100;
/** Most inbox entries one pull looks at (leased ones are passed over). */
const MAX_SCANNED = 1000;
const EVENT_ID_PATTERN = /^evt_[0-9a-z]{26}$/;

export type PullMessage = Record<string, unknown> & { event_id: string; delivery_count: number };

const invalidLimit = (message: string, param: string) => new PlatformError('invalid_limit', message, param);

function whole(value: unknown, range: { min: number; max: number; default: number }, param: string): number {
  if (value === undefined) return range.default;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < range.min || value > range.max) {
    throw invalidLimit(`${param} is a whole number from ${range.min} to ${range.max}.`, param);
  }
  return value;
}

export function parsePull(body: unknown): { max: number; leaseSeconds: number } {
  const b = body === undefined || body === null ? {} : body;
  if (typeof b !== 'object' || Array.isArray(b)) throw new PlatformError('invalid_body', 'The body is {"max"?, "lease_seconds"?}.');
  const { max, lease_seconds, ...rest } = b as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw new PlatformError('unknown_field', `Unknown field "${unknown}".`, unknown);
  return { max: whole(max, PULL_MAX, 'max'), leaseSeconds: whole(lease_seconds, LEASE_SECONDS, 'lease_seconds') };
}

export function parseAck(body: unknown): string[] {
  if (!body || typeof body !== 'object' || Array.isArray(body)) throw new PlatformError('invalid_body', 'The body is {"ids": [...]}.');
  const { ids, ...rest } = body as Record<string, unknown>;
  const unknown = Object.keys(rest)[0];
  if (unknown !== undefined) throw new PlatformError('unknown_field', `Unknown field "${unknown}".`, unknown);
  if (!Array.isArray(ids) || ids.length < 1 || ids.length > MAX_ACK_IDS) throw new PlatformError('invalid_body', `ids is an array of 1 to ${MAX_ACK_IDS} event ids.`, 'ids');
  if (ids.some((id) => typeof id !== 'string' || !EVENT_ID_PATTERN.test(id))) throw new PlatformError('invalid_id', 'An event id is "evt_" and 26 characters.', 'ids');
  return [...new Set(ids as string[])];
}

/** Leases up to `max` visible messages, oldest first. */
export async function pull(engine: Engine, subscriptionId: string, max: number, leaseSeconds: number): Promise<PullMessage[]> {
  const out: PullMessage[] = [];
  let scanned = 0;
  let cursor: string | undefined;
  do {
    const now = engine.clock.now();
    const page = await engine.kv.query({ pk: inboxPartition(subscriptionId), limit: Math.min(100, max * 2), cursor });
    for (const item of page.items) {
      if (out.length >= max) break;
      scanned++;
      if (typeof item.visible_at === 'number' && item.visible_at > now) continue;
      const leased = await lease(engine, item, now + leaseSeconds * 1000);
      if (leased) out.push({ ...(JSON.parse(String(leased.envelope)) as Record<string, unknown>), delivery_count: Number(leased.delivery_count) } as PullMessage);
    }
    cursor = page.cursor;
  } while (cursor && out.length < max && scanned < MAX_SCANNED);
  return out;
}

async function lease(engine: Engine, item: KvItem, until: number): Promise<KvItem | undefined> {
  try {
    return await engine.kv.update({ key: { pk: item.pk, sk: item.sk }, set: { visible_at: until }, add: { delivery_count: 1 }, condition: { ifEquals: { visible_at: item.visible_at ?? 0 } } });
  } catch (error) {
    // Another puller leased it, or it was acked, meanwhile.
    if (error instanceof ConditionFailedError) return undefined;
    throw error;
  }
}

/** Deletes the named messages of this subscription; ids of other subscriptions, or acked already, count 0. */
export async function ack(engine: Engine, workspaceId: string, subscriptionId: string, ids: string[]): Promise<number> {
  const results = await Promise.all(
    ids.map(async (id) => {
      try {
        await engine.kv.delete(inboxKey(subscriptionId, id), { ifExists: true });
        return 1;
      } catch (error) {
        if (error instanceof ConditionFailedError) return 0;
        throw error;
      }
    }),
  );
  const acked = results.reduce<number>((a, b) => a + b, 0);
  await count(engine, workspaceId, { completed: acked, depth: -acked });
  return acked;
}
