/**
 * The counters contract: atomic counters and sliding rate windows (lambdas/shared/counters.ts) over
 * each key-value adapter. What passes here limits the same on SQLite (worker processes sharing one
 * file) and on DynamoDB (Lambda instances sharing one table).
 */
import { describe, expect, it, beforeEach, afterEach } from 'vitest';
import type { KeyValueStore } from '../../lambdas/engine/ports.js';
import type { ManualClock } from '../../lambdas/engine/clock.js';
import { Counters, counterKey, rateWindowKey, windowExpiry, type TakeResult } from '../../lambdas/shared/counters.js';

export interface CountersFixture {
  kv: KeyValueStore;
  /** Shared by every store of the fixture; starts on a whole minute. */
  clock: ManualClock;
  /** Another store over the same data through its own connection, as another worker process or Lambda instance has. */
  another(): KeyValueStore;
  cleanup(): Promise<void>;
}

const MINUTE = 60_000;
const allowedCount = (results: TakeResult[]) => results.filter((r) => r.allowed).length;

export function countersContract(name: string, makeKv: () => Promise<CountersFixture>) {
  describe(`counters contract: ${name}`, () => {
    let f: CountersFixture;
    let counters: Counters;
    let id: string;
    let n = 0;
    beforeEach(async () => {
      f = await makeKv();
      counters = new Counters(f.kv, f.clock);
      id = `t${Date.now()}-${n++}`; // fresh names per test, so adapters may share a table
    });
    afterEach(async () => f.cleanup());

    /** `count` calls in a row (not concurrently), each from the given Counters. */
    const inTurn = async (c: Counters, name: string, count: number, limit: number, windowMs = MINUTE) => {
      const out: TakeResult[] = [];
      for (let i = 0; i < count; i++) out.push(await c.take(name, { limit, windowMs }));
      return out;
    };

    it('sums 200 concurrent adds exactly, each seeing a distinct total', async () => {
      const totals = await Promise.all(Array.from({ length: 200 }, () => counters.add(`${id}-c`, 1)));
      expect([...totals].sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      expect(await counters.get(`${id}-c`)).toBe(200);
      expect(await counters.add(`${id}-c`, -50)).toBe(150);
      expect(await counters.get(`${id}-never`)).toBe(0);
    });

    it('expires a counter at expiresAt and starts it again from 0', async () => {
      const expiresAt = Math.floor(f.clock.now() / 1000) + 10;
      expect(await counters.add(`${id}-budget`, 5, { expiresAt })).toBe(5);
      expect((await f.kv.get(counterKey(`${id}-budget`)))?.expires_at).toBe(expiresAt);
      f.clock.advance(11_000);
      expect(await counters.get(`${id}-budget`)).toBe(0);
      expect(await counters.add(`${id}-budget`, 1)).toBe(1);
    });

    it('allows exactly `limit` of 300 concurrent calls in one window, none lost and none extra', async () => {
      const key = `${id}-burst`;
      const results = await Promise.all(Array.from({ length: 300 }, () => counters.take(key, { limit: 100, windowMs: MINUTE })));
      expect(allowedCount(results)).toBe(100);
      // Every allowed call holds its own place among the 100.
      const places = results.filter((r) => r.allowed).map((r) => r.count);
      expect(places.sort((a, b) => a - b)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
      for (const r of results.filter((r) => !r.allowed)) expect(r.retryAfterMs).toBeGreaterThan(0);
      // Refused calls are taken back out: the window holds the allowed ones only.
      const start = f.clock.now() - (f.clock.now() % MINUTE);
      expect((await f.kv.get(rateWindowKey(key, MINUTE, start)))?.n).toBe(100);
      expect((await counters.take(key, { limit: 100, windowMs: MINUTE })).allowed).toBe(false);
    });

    it('shares one limit between two stores over the same data (two processes or instances)', async () => {
      const other = new Counters(f.another(), f.clock);
      const key = `${id}-shared`;
      // Taken in turn, alternating stores: the 7th call is refused whichever store makes it.
      const pattern: boolean[] = [];
      for (let i = 0; i < 10; i++) pattern.push((await (i % 2 ? other : counters).take(key, { limit: 6, windowMs: MINUTE })).allowed);
      expect(pattern).toEqual([true, true, true, true, true, true, false, false, false, false]);

      // And concurrently: 150 calls on each store, 100 allowed in all.
      const both = `${id}-shared-burst`;
      const results = await Promise.all(
        Array.from({ length: 300 }, (_, i) => (i % 2 ? other : counters).take(both, { limit: 100, windowMs: MINUTE })),
      );
      expect(allowedCount(results)).toBe(100);
      const start = f.clock.now() - (f.clock.now() % MINUTE);
      expect((await f.another().get(rateWindowKey(both, MINUTE, start)))?.n).toBe(100);
    });

    it('rolls the window over, weighing the previous window so a boundary burst is refused', async () => {
      const key = `${id}-slide`;
      const take = () => counters.take(key, { limit: 10, windowMs: MINUTE });
      f.clock.advance(50_000); // the last 10 s of a window
      expect(allowedCount(await inTurn(counters, key, 10, 10))).toBe(10);
      const full = await take();
      expect(full).toMatchObject({ allowed: false, count: 10 });
      // Not in this window; in the next one once the previous 10 weigh at most 9: 10 s + 6 s.
      expect(full.retryAfterMs).toBe(16_000);

      f.clock.advance(10_000); // the next window starts: a plain fixed window would allow 10 more now
      const boundary = await take();
      expect(boundary).toMatchObject({ allowed: false, count: 10, retryAfterMs: 6_000 });
      const start = f.clock.now();
      expect(boundary.resetAt).toBe(start + MINUTE);
      expect((await f.kv.get(rateWindowKey(key, MINUTE, start)))?.n).toBe(0); // refused, so not counted
      f.clock.advance(5_999);
      expect(await take()).toMatchObject({ allowed: false, retryAfterMs: 1 });
      f.clock.advance(1);
      expect(await take()).toMatchObject({ allowed: true, count: 10, retryAfterMs: 0 });

      // Halfway through, the previous 10 weigh 5: with the 1 taken, 4 more fit.
      f.clock.advance(24_000);
      const half = await inTurn(counters, key, 5, 10);
      expect(half.map((r) => r.allowed)).toEqual([true, true, true, true, false]);
      expect(half[3].count).toBe(10);

      // The window after: this window's 5 weigh fully at its start.
      f.clock.advance(30_000);
      expect(allowedCount(await inTurn(counters, key, 7, 10))).toBe(5);
      // Two quiet windows later nothing is weighed in any more.
      f.clock.advance(2 * MINUTE);
      expect(allowedCount(await inTurn(counters, key, 12, 10))).toBe(10);
    });

    it('answers retryAfterMs 0 when allowed, and when refused a positive wait within the window that is exact', async () => {
      const key = `${id}-retry`;
      f.clock.advance(20_000);
      const allowed = await inTurn(counters, key, 5, 5);
      expect(allowed.map((r) => [r.allowed, r.retryAfterMs])).toEqual(Array.from({ length: 5 }, () => [true, 0]));
      const refused = await counters.take(key, { limit: 5, windowMs: MINUTE });
      expect(refused.allowed).toBe(false);
      expect(refused.retryAfterMs).toBeGreaterThan(0);
      expect(refused.retryAfterMs).toBeLessThanOrEqual(MINUTE);
      expect(refused.resetAt).toBe(f.clock.now() - 20_000 + MINUTE);
      // One millisecond early is still refused; on time is allowed.
      f.clock.advance(refused.retryAfterMs - 1);
      expect((await counters.take(key, { limit: 5, windowMs: MINUTE })).allowed).toBe(false);
      f.clock.advance(1);
      expect((await counters.take(key, { limit: 5, windowMs: MINUTE })).allowed).toBe(true);
    });

    it('spends a cost of several units, and refuses a cost over the limit', async () => {
      const key = `${id}-cost`;
      const take = (cost: number) => counters.take(key, { limit: 10, windowMs: MINUTE, cost });
      expect((await take(4)).count).toBe(4);
      expect((await take(4)).count).toBe(8);
      expect(await take(4)).toMatchObject({ allowed: false, count: 8 });
      expect(await take(2)).toMatchObject({ allowed: true, count: 10 });
      await expect(take(11)).rejects.toBeInstanceOf(RangeError);
      await expect(take(0)).rejects.toBeInstanceOf(RangeError);
    });

    it('keeps the names of two credentials, names with #, and window lengths apart', async () => {
      const names = ['a', 'a#', 'a#b', '#', `w#${MINUTE}#0`, 'a#w#60000', ''].map((s) => `${id}${s}`);
      expect(allowedCount(await inTurn(counters, names[0], 4, 3))).toBe(3);
      for (const other of names.slice(1)) expect(allowedCount(await inTurn(counters, other, 4, 3))).toBe(3);
      // The same name over another window length is another limit (a minute's and a day's budgets).
      expect(allowedCount(await inTurn(counters, names[0], 4, 3, 86_400_000))).toBe(3);

      // Counters too: `x#ctr` is not the sort key of `x`.
      await counters.add(`${id}x`, 1);
      await counters.add(`${id}x#ctr`, 10);
      await counters.add(`${id}x#`, 100);
      expect([await counters.get(`${id}x`), await counters.get(`${id}x#ctr`), await counters.get(`${id}x#`)]).toEqual([1, 10, 100]);
    });

    it('takes prototype-like names as plain names', async () => {
      const names = ['__proto__', 'constructor', 'prototype', 'hasOwnProperty', 'toString', '__defineGetter__'];
      // Unprefixed on purpose: the exact names must work. Fresh stores per test keep them apart across tests.
      const before = await Promise.all(names.map((name) => counters.get(name)));
      await Promise.all(names.map((name, i) => counters.add(name, i + 1)));
      expect(await Promise.all(names.map((name) => counters.get(name)))).toEqual(before.map((b, i) => b + i + 1));
      expect(allowedCount(await inTurn(counters, '__proto__', 3, 2))).toBe(2);
      expect(allowedCount(await inTurn(counters, 'constructor', 3, 2))).toBe(2);
      expect(({} as Record<string, unknown>).n).toBeUndefined();
      expect(Object.getPrototypeOf({})).toBe(Object.prototype);
    });

    it('sets expires_at on each window so it disappears after the window that reads it', async () => {
      const key = `${id}-ttl`;
      const start = f.clock.now() - (f.clock.now() % MINUTE);
      await counters.take(key, { limit: 2, windowMs: MINUTE });
      await counters.take(key, { limit: 2, windowMs: MINUTE });
      const item = await f.kv.get(rateWindowKey(key, MINUTE, start));
      expect(item).toMatchObject({ n: 2, expires_at: windowExpiry(start, MINUTE) });
      // It must outlive the next window, which weighs it in...
      expect(windowExpiry(start, MINUTE) * 1000).toBeGreaterThanOrEqual(start + 2 * MINUTE);
      // ...and not by much.
      expect(windowExpiry(start, MINUTE) * 1000).toBeLessThanOrEqual(start + 2 * MINUTE + 5_000);

      f.clock.advance(MINUTE); // next window: still there, and weighed in (2 at full weight)
      expect(await f.kv.get(rateWindowKey(key, MINUTE, start))).toBeDefined();
      expect((await counters.take(key, { limit: 2, windowMs: MINUTE })).allowed).toBe(false);

      f.clock.advance(windowExpiry(start, MINUTE) * 1000 - f.clock.now());
      expect(await f.kv.get(rateWindowKey(key, MINUTE, start))).toBeUndefined();
      expect((await f.kv.get(rateWindowKey(key, MINUTE, start + MINUTE)))?.n).toBe(0); // its one call was refused, so taken back
      expect(allowedCount(await inTurn(counters, key, 3, 2))).toBe(2);
    });
  });
}
