/**
 * Leases: claims on a limited resource, kept in the key-value store so a limit holds across every
 * process and Lambda instance, each claim lapsing on its own when its holder crashes. Two shapes, for
 * two kinds of limit:
 *
 * - **Named slots with an owner** (`claimSlots`): a pool is a partition of `size` slot items
 *   (`slot#<n>`); a claim puts one free slot of each pool it needs in one transaction, each put only
 *   if the slot is absent (an expired item counts as absent), so concurrent claimers never pass a
 *   pool's size. A slot names its owner, who may list (`slotOwners`), refresh and release it; a slot
 *   that expired and was taken by another is no longer the first owner's. Used where the holders
 *   themselves matter (the Events streams: which sockets a subscription has open).
 * - **Counted holds in deadline buckets** (`addHold`): an amount added to one attribute of one item,
 *   `d<minute of the deadline>`, with one atomic update whose returned item decides; buckets whose
 *   minute has ended no longer count (`liveHolds`). One write to take, one to give back; no holder is
 *   named. Used where only the total matters (the AI calls at once and budget holds).
 *
 * Both leave a crashed holder's claim to lapse: a slot at its `expires_at`, a hold at its deadline.
 */
import type { KeyValueStore, KvCondition, KvItem, KvKey } from '../engine/ports.js';
import { ConditionFailedError, TransactionCanceledError } from '../engine/errors.js';

// ---------- named slots with an owner ----------

/** A pool of slots: the partition `pk`, holding at most `size` slots `slot#<n>` (n zero-padded to `width` digits). */
export interface SlotPool {
  pk: string;
  size: number;
  width: number;
}

/** What a claim got: one slot per pool (in the pools' order), or which pool was full, or `busy` after retries lost to other claimers. */
export type SlotClaim = { slots: KvKey[] } | { full: SlotPool } | { busy: true };

const slotName = (n: number, width: number) => `slot#${String(n).padStart(width, '0')}`;
/** Claims retried when another claimer took a chosen slot first. */
const CLAIM_ATTEMPTS = 5;

async function freeSlot(kv: KeyValueStore, pool: SlotPool): Promise<string | undefined> {
  const taken = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await kv.query({ pk: pool.pk, limit: 100, cursor });
    for (const item of page.items) taken.add(item.sk);
    cursor = page.cursor;
  } while (cursor);
  const free: string[] = [];
  for (let n = 0; n < pool.size; n++) if (!taken.has(slotName(n, pool.width))) free.push(slotName(n, pool.width));
  // A random free slot: two claimers at once rarely try the same one.
  return free.length ? free[Math.floor(Math.random() * free.length)] : undefined;
}

/**
 * Takes a free slot of every pool for `owner` in one transaction, the slots living until `expiresAt`
 * (Unix seconds). A pool without a free slot answers `full` (the first such pool, in the given order).
 */
export async function claimSlots(kv: KeyValueStore, pools: readonly SlotPool[], owner: string, expiresAt: () => number): Promise<SlotClaim> {
  for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
    const names = await Promise.all(pools.map((pool) => freeSlot(kv, pool)));
    const full = pools.find((_pool, i) => names[i] === undefined);
    if (full) return { full };
    const slots = pools.map((pool, i) => ({ pk: pool.pk, sk: names[i]! }));
    const expires_at = expiresAt();
    try {
      await kv.transact(slots.map((key) => ({ put: { ...key, owner, expires_at }, condition: { ifAbsent: true } })));
      return { slots };
    } catch (error) {
      // Another claimer took one of them meanwhile: look again.
      if (!(error instanceof TransactionCanceledError)) throw error;
    }
  }
  return { busy: true };
}

/** The owners of a pool's live slots (at most `limit`). */
export async function slotOwners(kv: KeyValueStore, pk: string, limit: number): Promise<string[]> {
  const page = await kv.query({ pk, limit });
  return page.items.map((item) => String(item.owner));
}

/** Extends the slots' life to `expiresAt`; false when one is no longer `owner`'s (it expired and was taken). */
export async function refreshSlots(kv: KeyValueStore, slots: readonly KvKey[], owner: string, expiresAt: number): Promise<boolean> {
  try {
    await Promise.all(slots.map((key) => kv.update({ key, set: { expires_at: expiresAt }, condition: { ifEquals: { owner } } })));
    return true;
  } catch (error) {
    if (error instanceof ConditionFailedError) return false;
    throw error;
  }
}

/** Frees the slots still `owner`'s; another owner's slot (this one's lapsed and was taken) is left alone. */
export async function releaseSlots(kv: KeyValueStore, slots: readonly KvKey[], owner: string): Promise<void> {
  await Promise.all(
    slots.map((key) =>
      kv.delete(key, { ifEquals: { owner } }).catch((error) => {
        if (!(error instanceof ConditionFailedError)) throw error;
      }),
    ),
  );
}

// ---------- counted holds in deadline buckets ----------

/** Holds are grouped by the minute their deadline falls in: one attribute per minute, `d<minute>`. */
const BUCKET_MS = 60_000;
const BUCKET_ATTR = /^d(\d+)$/;
/** The attribute of the bucket a hold until `deadlineMs` is counted in (a hold moved to a later deadline is moved to its bucket). */
export const bucketAttr = (deadlineMs: number) => `d${Math.ceil(deadlineMs / BUCKET_MS)}`;

/** A hold taken: what to give back, and the buckets seen lapsed (dropped when it is given back). */
export interface Hold {
  key: KvKey;
  attr: string;
  amount: number;
  lapsed: string[];
}

/** The sum of the live buckets of an item (those whose minute has not ended), and the names of the lapsed ones. */
export function liveHolds(item: KvItem | undefined, now: number): { live: number; lapsed: string[] } {
  let live = 0;
  const lapsed: string[] = [];
  for (const [name, value] of Object.entries(item ?? {})) {
    const m = BUCKET_ATTR.exec(name);
    if (!m || typeof value !== 'number') continue;
    if (Number(m[1]) * BUCKET_MS > now) live += value;
    else lapsed.push(name);
  }
  return { live, lapsed };
}

/**
 * Adds `amount` to the bucket of `deadline` (ms) with one atomic update, then decides on the item it
 * returns: every hold added before this one is in it, so of concurrent callers only those whose add
 * still fits are let through, and the held total never passes the limit `fits` checks. A refused
 * hold is taken back; the answer then carries the item and the live total without it.
 */
export async function addHold(
  kv: KeyValueStore,
  key: KvKey,
  amount: number,
  deadline: number,
  now: number,
  fits: (item: KvItem, live: number) => boolean,
): Promise<{ hold: Hold } | { refused: KvItem; live: number }> {
  const attr = bucketAttr(deadline);
  const item = await kv.update({ key, add: { [attr]: amount } });
  const { live, lapsed } = liveHolds(item, now);
  if (fits(item, live)) return { hold: { key, attr, amount, lapsed } };
  await releaseHold(kv, { key, attr, amount, lapsed }).catch(() => undefined);
  return { refused: item, live: live - amount };
}

/** Gives a hold back (with any other changes to the item, e.g. a spent cost), dropping the buckets seen lapsed. */
export function releaseHold(kv: KeyValueStore, hold: Hold, add: Record<string, number> = {}): Promise<KvItem> {
  const lapsed = hold.lapsed.filter((a) => a !== hold.attr && !(a in add));
  return kv.update({ key: hold.key, add: { ...add, [hold.attr]: -hold.amount }, remove: lapsed.length ? lapsed : undefined });
}

// ---------- a claim's lease renewed while its work runs ----------

/** A lease kept alive (keepRenewing): `signal` aborts and `lost` turns true once the claim is no longer the holder's. */
export interface Renewal {
  readonly signal: AbortSignal;
  readonly lost: boolean;
  stop(): void;
}

/**
 * Renews a claim written on an item (its `lease_until` or the like) every `everyMs` while its holder
 * works, each renewal conditioned on the claim still being the holder's (`condition`): once it fails,
 * the work's `signal` aborts with `why` (the item was deleted, cancelled or taken over). Used by a
 * collection item's processor and a knowledge job's step.
 */
export function keepRenewing(kv: KeyValueStore, options: { key: KvKey; set: () => Record<string, number>; condition: KvCondition; everyMs: number; why: string }): Renewal {
  const controller = new AbortController();
  let lost = false;
  const timer = setInterval(() => {
    kv.update({ key: options.key, set: options.set(), condition: options.condition }).catch((error) => {
      if (error instanceof ConditionFailedError) {
        lost = true;
        controller.abort(new Error(options.why));
      }
    });
  }, options.everyMs);
  timer.unref();
  return {
    signal: controller.signal,
    get lost() {
      return lost;
    },
    stop: () => clearInterval(timer),
  };
}
