/** Ids: ULIDs in lowercase Crockford base32, sortable by time; the monotonic ones keep a millisecond's order. */
import { describe, expect, it } from 'vitest';
import { monotonicUlid, ulid } from '../../lambdas/shared/ids.js';

const ULID = /^[0-9a-hjkmnp-tv-z]{26}$/;

describe('ids', () => {
  it('encode the millisecond first, so ids sort by time', () => {
    const a = ulid(1_700_000_000_000);
    const b = ulid(1_700_000_000_001);
    expect(a).toMatch(ULID);
    expect(a < b).toBe(true);
    expect(a.slice(0, 10)).toBe(ulid(1_700_000_000_000).slice(0, 10));
  });

  it('monotonic ones made in one millisecond sort in the order they were made, and stay unique', () => {
    const ms = 1_700_000_000_123;
    const ids = Array.from({ length: 1000 }, () => monotonicUlid(ms));
    for (const id of ids) expect(id).toMatch(ULID);
    expect(new Set(ids).size).toBe(ids.length);
    expect([...ids].sort()).toEqual(ids);
    expect(monotonicUlid(ms + 1) > ids.at(-1)!).toBe(true);
  });
});

describe('pooledRandomBytes', () => {
  it('gives fresh bytes of the length asked, copied out of the pool', async () => {
    const { pooledRandomBytes } = await import('../../lambdas/shared/ids.js');
    const seen = new Set<string>();
    for (let i = 0; i < 2000; i++) {
      const b = pooledRandomBytes(12);
      expect(b).toHaveLength(12);
      seen.add(b.toString('hex'));
    }
    expect(seen.size).toBe(2000);
    const kept = pooledRandomBytes(8);
    const copy = Buffer.from(kept);
    for (let i = 0; i < 600; i++) pooledRandomBytes(16); // the pool refills under it
    expect(kept.equals(copy)).toBe(true);
    expect(() => pooledRandomBytes(0)).toThrow(RangeError);
    expect(() => pooledRandomBytes(65)).toThrow(RangeError);
  });
});
