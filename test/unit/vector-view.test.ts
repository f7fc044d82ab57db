/**
 * The embedded vector index's in-memory view, alone: its plan and its guarantee of a full top-k
 * whatever the graph answers.
 */
import { describe, expect, it } from 'vitest';
import { IndexView, matches } from '../../lambdas/engine/embedded/vector-view.js';

const unit = (...xs: number[]) => {
  const n = Math.hypot(...xs);
  return Float32Array.from(xs, (x) => x / n);
};

/** A graph that holds every label but whose walk comes back with one neighbour at most. */
function shortGraph(labels: number[]) {
  return {
    getIdsList: () => labels,
    markDelete: () => undefined,
    setEf: () => undefined,
    getMaxElements: () => 1 << 20,
    searchKnn: (_q: number[], _k: number, filter?: (label: number) => boolean) => {
      const first = labels.find((l) => !filter || filter(l));
      return first === undefined ? { neighbors: [], distances: [] } : { neighbors: [first], distances: [0.5] };
    },
  };
}

describe('vector index view', () => {
  const view = () => {
    const v = new IndexView(1, 2, undefined, 0); // no exact-scan threshold: always the graph path
    for (let id = 1; id <= 20; id++) v.add(id, unit(Math.cos(id / 10), Math.sin(id / 10)), { kind: id % 2 ? 'odd' : 'even' });
    v.attachGraph(shortGraph(Array.from({ length: 20 }, (_, i) => i + 1)) as never);
    return v;
  };

  it('redoes a short graph answer by exact scan, plain or filtered', () => {
    const v = view();
    expect(v.pending).toBe(0);
    const plain = v.search(unit(1, 0), 5);
    expect(plain.map((h) => h.id)).toEqual([1, 2, 3, 4, 5]);
    const filtered = v.search(unit(1, 0), 5, { kind: 'even' });
    expect(filtered.map((h) => h.id)).toEqual([2, 4, 6, 8, 10]);
    expect(filtered[0].score).toBeCloseTo(Math.cos(0.2), 5);
  });

  it('walks the graph without a filter callback when the filter keeps every entry (a shared scope)', () => {
    const v = new IndexView(1, 2, undefined, 0);
    for (let id = 1; id <= 20; id++) v.add(id, unit(Math.cos(id / 10), Math.sin(id / 10)), { scope: 'ws', kind: id % 2 ? 'odd' : 'even' });
    const graph = shortGraph(Array.from({ length: 20 }, (_, i) => i + 1));
    const filters: unknown[] = [];
    const searchKnn = graph.searchKnn;
    graph.searchKnn = (q, k, filter) => (filters.push(filter), searchKnn(q, k, filter));
    v.attachGraph(graph as never);
    expect(v.search(unit(1, 0), 3, { scope: 'ws' }).map((h) => h.id)).toEqual([1, 2, 3]);
    expect(filters.pop()).toBeUndefined();
    expect(v.search(unit(1, 0), 3, { scope: 'ws', kind: 'odd' }).map((h) => h.id)).toEqual([1, 3, 5]);
    expect(filters.pop()).toBeTypeOf('function');
  });

  it('merges the entries not yet in the graph (the tail) with its answer', () => {
    const v = view();
    v.add(100, unit(1, 0), { kind: 'even' });
    expect(v.pending).toBe(1);
    expect(v.search(unit(1, 0), 2, { kind: 'even' }).map((h) => h.id)).toEqual([100, 2]);
  });

  it('matches filters as the port says: every key, any element of an array, $in, typed equality', () => {
    const meta = { scope: 's', tag: ['a', 'b'], n: 1, flag: true };
    expect(matches(meta, { scope: 's', tag: 'b' })).toBe(true);
    expect(matches(meta, { tag: { $in: ['x', 'a'] } })).toBe(true);
    expect(matches(meta, { n: '1' })).toBe(false);
    expect(matches(meta, { flag: 'true' })).toBe(false);
    expect(matches(meta, { n: { $in: [2, 1] }, flag: true })).toBe(true);
    expect(matches(meta, { missing: 's' })).toBe(false);
    expect(matches(meta, { scope: 's', missing: { $in: ['s'] } })).toBe(false);
  });
});
