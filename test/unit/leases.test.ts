/**
 * The leases block (lambdas/shared/leases.ts) on the real embedded engine: two engines on one SQLite
 * file stand for two worker processes, a manual clock makes leases lapse.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine, KvItem } from '../../lambdas/engine/ports.js';
import { addHold, claimSlots, liveHolds, refreshSlots, releaseHold, releaseSlots, slotOwners, type SlotClaim, type SlotPool } from '../../lambdas/shared/leases.js';

let dir: string;
let clock: ManualClock;
let one: Engine;
let two: Engine;
let seq = 0;
const uniq = (p: string) => `${p}_${seq++}`;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'leases-'));
  clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
  one = createEmbeddedEngine({ dataDir: dir, clock });
  two = createEmbeddedEngine({ dataDir: dir, clock });
});
afterAll(async () => {
  await Promise.all([one?.close(), two?.close()]);
  rmSync(dir, { recursive: true, force: true });
});

const seconds = () => Math.floor(clock.now() / 1000);
const inSeconds = (n: number) => () => seconds() + n;
const pool = (size: number, width = 1): SlotPool => ({ pk: uniq('pool'), size, width });
const taken = (claim: SlotClaim) => ('slots' in claim ? claim.slots : undefined);

describe('named slots with an owner', () => {
  it('concurrent claimers across two processes never hold more than the smaller pool, each slot once', async () => {
    const wide = pool(5);
    const narrow = pool(3, 2);
    const claims = await Promise.all(
      Array.from({ length: 24 }, (_, i) => claimSlots((i % 2 ? two : one).kv, [wide, narrow], `owner-${i}`, inSeconds(60)).then((claim) => ({ owner: `owner-${i}`, claim }))),
    );
    const winners = claims.filter((c) => taken(c.claim));
    expect(winners.length).toBeGreaterThanOrEqual(1);
    expect(winners.length).toBeLessThanOrEqual(3);
    for (const { claim } of claims) if (!taken(claim)) expect('busy' in claim || ('full' in claim && claim.full === narrow)).toBe(true);
    // What the store holds is exactly what the winners were told, one owner per slot.
    const owners = winners.map((w) => w.owner).sort();
    expect((await slotOwners(one.kv, narrow.pk, 10)).sort()).toEqual(owners);
    expect((await slotOwners(two.kv, wide.pk, 10)).sort()).toEqual(owners);
    for (const w of winners) expect(taken(w.claim)!.map((k) => k.pk)).toEqual([wide.pk, narrow.pk]);
    expect(new Set(winners.map((w) => taken(w.claim)![1].sk)).size).toBe(winners.length);
    // In turn, the narrow pool fills to exactly its size, then answers full.
    for (let i = winners.length; i < 3; i++) expect(taken(await claimSlots(one.kv, [wide, narrow], `late-${i}`, inSeconds(60)))).toBeDefined();
    expect(await claimSlots(two.kv, [wide, narrow], 'one-too-many', inSeconds(60))).toEqual({ full: narrow });
    expect(await slotOwners(one.kv, narrow.pk, 10)).toHaveLength(3);
  });

  it("a lapsed slot is taken by the next claimer; its first owner can then neither refresh nor release it", async () => {
    const p = pool(1);
    const first = taken(await claimSlots(one.kv, [p], 'crashed', inSeconds(60)))!;
    expect(await claimSlots(two.kv, [p], 'next', inSeconds(60))).toEqual({ full: p });
    clock.advance(61_000);
    expect(await slotOwners(one.kv, p.pk, 10)).toEqual([]);
    const second = taken(await claimSlots(two.kv, [p], 'next', inSeconds(60)))!;
    expect(second).toEqual(first);
    expect(await refreshSlots(one.kv, first, 'crashed', seconds() + 60)).toBe(false);
    await releaseSlots(one.kv, first, 'crashed');
    expect(await slotOwners(one.kv, p.pk, 10)).toEqual(['next']);
  });

  it("releasing someone else's slot does nothing; its owner's release frees it", async () => {
    const p = pool(2);
    const slots = taken(await claimSlots(one.kv, [p], 'a', inSeconds(60)))!;
    await releaseSlots(two.kv, slots, 'b');
    expect(await slotOwners(one.kv, p.pk, 10)).toEqual(['a']);
    await releaseSlots(two.kv, slots, 'a');
    expect(await slotOwners(one.kv, p.pk, 10)).toEqual([]);
  });

  it('a refreshed slot outlives its first expiry', async () => {
    const p = pool(1);
    const slots = taken(await claimSlots(one.kv, [p], 'a', inSeconds(60)))!;
    clock.advance(50_000);
    expect(await refreshSlots(two.kv, slots, 'a', seconds() + 60)).toBe(true);
    clock.advance(50_000);
    expect(await slotOwners(one.kv, p.pk, 10)).toEqual(['a']);
    expect(await claimSlots(two.kv, [p], 'b', inSeconds(60))).toEqual({ full: p });
  });
});

describe('counted holds in deadline buckets', () => {
  const key = () => ({ pk: uniq('holds'), sk: 'conc' });

  it('concurrent holds across two processes never pass the limit, and come back on release', async () => {
    const k = key();
    const limit = 4;
    const results = await Promise.all(
      Array.from({ length: 30 }, (_, i) => addHold((i % 2 ? two : one).kv, k, 1, clock.now() + 90_000, clock.now(), (_item, live) => live <= limit)),
    );
    const held = results.flatMap((r) => ('hold' in r ? [r.hold] : []));
    expect(held.length).toBeGreaterThanOrEqual(1);
    expect(held.length).toBeLessThanOrEqual(limit);
    expect(liveHolds(await one.kv.get(k), clock.now()).live).toBe(held.length);
    await Promise.all(held.map((h, i) => releaseHold((i % 2 ? two : one).kv, h)));
    expect(liveHolds(await one.kv.get(k), clock.now()).live).toBe(0);
  });

  it("a crashed holder's hold stops counting once its deadline's minute has ended, and is dropped by the next release", async () => {
    const k = key();
    const fitsOne = (_item: KvItem, live: number) => live <= 1;
    const crashed = await addHold(one.kv, k, 1, clock.now() + 90_000, clock.now(), fitsOne);
    expect('hold' in crashed).toBe(true);
    expect('refused' in (await addHold(two.kv, k, 1, clock.now() + 90_000, clock.now(), fitsOne))).toBe(true);
    clock.advance(3 * 60_000);
    const next = await addHold(two.kv, k, 1, clock.now() + 90_000, clock.now(), fitsOne);
    if (!('hold' in next)) throw new Error('the lapsed hold still counted');
    expect(next.hold.lapsed).toHaveLength(1);
    await releaseHold(two.kv, next.hold);
    expect(liveHolds(await one.kv.get(k), clock.now())).toEqual({ live: 0, lapsed: [] });
  });
});
