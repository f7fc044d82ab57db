import { describe, expect, it } from 'vitest';
import { TtlCache } from '../../lambdas/shared/ttl-cache.js';

describe('TtlCache', () => {
  it('answers an entry until its deadline, and makes room by dropping the oldest', () => {
    const cache = new TtlCache<string>(2);
    cache.set('a', 'A', 100);
    cache.set('b', 'B', 200);
    expect(cache.get('a', 99)).toBe('A');
    expect(cache.get('a', 100)).toBeUndefined();
    cache.set('c', 'C', 300); // full: 'a', the oldest, goes
    expect(cache.get('a', 0)).toBeUndefined();
    expect([cache.get('b', 0), cache.get('c', 0)]).toEqual(['B', 'C']);
    cache.set('b', 'B2', 400); // a refreshed entry counts as new
    cache.set('d', 'D', 500);
    expect([cache.get('b', 0), cache.get('c', 0), cache.get('d', 0)]).toEqual(['B2', undefined, 'D']);
    cache.delete('b');
    expect(cache.get('b', 0)).toBeUndefined();
  });
});
