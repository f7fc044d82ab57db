/**
 * The vector index contract. Every adapter runs it (see vector-index.*.test.ts); it tests only what
 * the `VectorIndex` port promises (lambdas/engine/ports.ts), so what passes here behaves the same on
 * the embedded engine and on S3 Vectors.
 */
import { describe, expect, it, beforeEach, afterEach } from 'vitest';
import { VECTOR_BATCH_MAX, VECTOR_TOP_K_MAX, type VectorEntry, type VectorFilter, type VectorIndex, type VectorMetadata } from '../../lambdas/engine/ports.js';

export interface VectorIndexFixture {
  vectors: VectorIndex;
  cleanup(): Promise<void>;
}

/** A seeded generator (mulberry32), so every run and every adapter sees the same vectors. */
export function seededRandom(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A vector of components in [-1, 1), not normalized: the index must compare directions, not lengths. */
function randomVector(random: () => number, dimensions: number): Float32Array {
  const v = new Float32Array(dimensions);
  for (let i = 0; i < dimensions; i++) v[i] = random() * 2 - 1;
  return v;
}

function cosine(a: Float32Array, b: Float32Array): number {
  let dot = 0, na = 0, nb = 0;
  for (let i = 0; i < a.length; i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return dot / Math.sqrt(na * nb);
}

/** The brute-force answer: every kept entry scored, best first. */
function exactTop(entries: VectorEntry[], query: Float32Array, topK: number, keep: (e: VectorEntry) => boolean = () => true) {
  return entries
    .filter(keep)
    .map((e) => ({ key: e.key, score: cosine(e.vector, query) }))
    .sort((a, b) => b.score - a.score)
    .slice(0, topK);
}

const entry = (key: string, vector: Float32Array, filterable: VectorMetadata = {}, payload = JSON.stringify({ id: key })): VectorEntry => ({ key, vector, filterable, payload });

async function putAll(vectors: VectorIndex, index: string, entries: VectorEntry[]) {
  for (let i = 0; i < entries.length; i += VECTOR_BATCH_MAX) await vectors.put(index, entries.slice(i, i + VECTOR_BATCH_MAX));
}

const keysOf = (hits: { key: string }[]) => hits.map((h) => h.key);

export function vectorIndexContract(name: string, makeIndex: () => Promise<VectorIndexFixture>) {
  describe(`vector index contract: ${name}`, () => {
    let f: VectorIndexFixture;
    let n = 0;
    let index: string;
    beforeEach(async () => {
      f = await makeIndex();
      index = `contract-${Date.now().toString(36)}-${n++}`; // fresh index per test, so adapters may share a store
    });
    afterEach(async () => f.cleanup());

    it('creates an index idempotently; the same name with other dimensions is an Error', async () => {
      await f.vectors.createIndex(index, 8);
      await f.vectors.put(index, [entry('a', randomVector(seededRandom(1), 8))]);
      await f.vectors.createIndex(index, 8);
      expect(keysOf(await f.vectors.query(index, { vector: randomVector(seededRandom(2), 8), topK: 5 }))).toEqual(['a']);
      await expect(f.vectors.createIndex(index, 16)).rejects.toBeInstanceOf(Error);
    });

    it('keeps indexes apart', async () => {
      const other = `${index}-b`;
      await f.vectors.createIndex(index, 8);
      await f.vectors.createIndex(other, 8);
      const r = seededRandom(3);
      await f.vectors.put(index, [entry('in-a', randomVector(r, 8))]);
      await f.vectors.put(other, [entry('in-b', randomVector(r, 8))]);
      expect(keysOf(await f.vectors.query(index, { vector: randomVector(r, 8), topK: 10 }))).toEqual(['in-a']);
      expect(keysOf(await f.vectors.query(other, { vector: randomVector(r, 8), topK: 10 }))).toEqual(['in-b']);
      await f.vectors.deleteIndex(other);
    });

    it('answers best first by cosine similarity, with the scores a brute-force computation gives', async () => {
      await f.vectors.createIndex(index, 16);
      const r = seededRandom(4);
      const entries = Array.from({ length: 300 }, (_, i) => entry(`k${i}`, randomVector(r, 16)));
      await putAll(f.vectors, index, entries);
      for (let q = 0; q < 5; q++) {
        const query = randomVector(r, 16);
        const hits = await f.vectors.query(index, { vector: query, topK: 10 });
        const truth = exactTop(entries, query, 10);
        expect(keysOf(hits)).toEqual(keysOf(truth));
        hits.forEach((h, i) => expect(h.score).toBeCloseTo(truth[i].score, 4));
        for (let i = 1; i < hits.length; i++) expect(hits[i - 1].score).toBeGreaterThanOrEqual(hits[i].score);
      }
      // The same direction, at any length, scores 1; the opposite direction is found by its own opposite.
      const scaled = entries[7].vector.map((x) => x * 3.5);
      const [best] = await f.vectors.query(index, { vector: scaled, topK: 1 });
      expect(best.key).toBe('k7');
      expect(best.score).toBeCloseTo(1, 4);
      await f.vectors.put(index, [entry('opposite', entries[7].vector.map((x) => -x))]);
      const [back] = await f.vectors.query(index, { vector: entries[7].vector.map((x) => -x * 0.01), topK: 1 });
      expect(back.key).toBe('opposite');
      expect(back.score).toBeCloseTo(1, 4);
      expect(await f.vectors.query(index, { vector: entries[7].vector, topK: VECTOR_TOP_K_MAX, filter: {} })).toHaveLength(VECTOR_TOP_K_MAX);
    });

    it('returns topK hits, or every entry when there are fewer', async () => {
      await f.vectors.createIndex(index, 8);
      const r = seededRandom(5);
      await putAll(f.vectors, index, Array.from({ length: 150 }, (_, i) => entry(`k${i}`, randomVector(r, 8))));
      const query = randomVector(r, 8);
      expect(await f.vectors.query(index, { vector: query, topK: 1 })).toHaveLength(1);
      expect(await f.vectors.query(index, { vector: query, topK: 10 })).toHaveLength(10);
      const hundred = await f.vectors.query(index, { vector: query, topK: VECTOR_TOP_K_MAX });
      expect(new Set(keysOf(hundred)).size).toBe(VECTOR_TOP_K_MAX);

      const small = `${index}-small`;
      await f.vectors.createIndex(small, 8);
      expect(await f.vectors.query(small, { vector: query, topK: 10 })).toEqual([]);
      await f.vectors.put(small, Array.from({ length: 5 }, (_, i) => entry(`s${i}`, randomVector(r, 8))));
      expect(keysOf(await f.vectors.query(small, { vector: query, topK: 10 })).sort()).toEqual(['s0', 's1', 's2', 's3', 's4']);
      await f.vectors.deleteIndex(small);
    });

    it('replaces an entry put again under its key: vector, filterable metadata and payload', async () => {
      await f.vectors.createIndex(index, 8);
      const r = seededRandom(6);
      const before = randomVector(r, 8);
      const after = randomVector(r, 8);
      await f.vectors.put(index, [entry('k', before, { tag: 'old' }, 'first'), entry('other', randomVector(r, 8), { tag: 'old' })]);
      await f.vectors.put(index, [entry('k', after, { tag: 'new' }, 'second')]);
      const hits = await f.vectors.query(index, { vector: after, topK: 10 });
      expect(keysOf(hits).sort()).toEqual(['k', 'other']);
      expect(hits[0]).toMatchObject({ key: 'k', payload: 'second' });
      expect(hits[0].score).toBeCloseTo(1, 4);
      expect(keysOf(await f.vectors.query(index, { vector: before, topK: 10, filter: { tag: 'old' } }))).toEqual(['other']);
      expect(keysOf(await f.vectors.query(index, { vector: before, topK: 10, filter: { tag: 'new' } }))).toEqual(['k']);
    });

    it('deletes keys; missing keys are not an error', async () => {
      await f.vectors.createIndex(index, 8);
      const r = seededRandom(7);
      await f.vectors.put(index, ['a', 'b', 'c'].map((k) => entry(k, randomVector(r, 8))));
      await f.vectors.delete(index, ['b', 'never-stored']);
      await f.vectors.delete(index, []);
      expect(keysOf(await f.vectors.query(index, { vector: randomVector(r, 8), topK: 10 })).sort()).toEqual(['a', 'c']);
      await f.vectors.delete(index, ['a', 'c']);
      expect(await f.vectors.query(index, { vector: randomVector(r, 8), topK: 10 })).toEqual([]);
    });

    it('deletes an index with its entries: a put is then an Error, and creating it again gives an empty one', async () => {
      await f.vectors.createIndex(index, 8);
      const r = seededRandom(8);
      await f.vectors.put(index, [entry('a', randomVector(r, 8))]);
      await f.vectors.deleteIndex(index);
      await f.vectors.deleteIndex(index); // missing: not an error
      await f.vectors.delete(index, ['a']); // the index took its keys with it: nothing to delete
      await expect(f.vectors.put(index, [entry('b', randomVector(r, 8))])).rejects.toBeInstanceOf(Error);
      await f.vectors.createIndex(index, 16); // gone, so other dimensions are no clash
      expect(await f.vectors.query(index, { vector: randomVector(r, 16), topK: 10 })).toEqual([]);
      await f.vectors.put(index, [entry('c', randomVector(r, 16))]);
      expect(keysOf(await f.vectors.query(index, { vector: randomVector(r, 16), topK: 10 }))).toEqual(['c']);
    });

    it('lists every entry once, page by page, with its filterable metadata; a missing index lists nothing', async () => {
      await f.vectors.createIndex(index, 8);
      const r = seededRandom(10);
      const stored = Array.from({ length: 23 }, (_, i) => entry(`key-${String(i).padStart(2, '0')}-é`, randomVector(r, 8), { scope: `s${i % 3}`, tag: ['x', 'y'] }, `payload ${i}`));
      await f.vectors.put(index, stored);
      const listed: { key: string; filterable: VectorMetadata }[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await f.vectors.list(index, { limit: 5, cursor });
        expect(page.entries.length).toBeLessThanOrEqual(5);
        listed.push(...page.entries);
        cursor = page.cursor;
        pages += 1;
      } while (cursor && pages < 20);
      expect(cursor).toBeUndefined();
      expect(listed.map((e) => e.key).sort()).toEqual(stored.map((e) => e.key).sort());
      for (const e of listed) expect(e).toEqual({ key: e.key, filterable: stored.find((s) => s.key === e.key)!.filterable });
      // Deleted entries are gone from a listing; an entry put again is listed once.
      await f.vectors.delete(index, stored.slice(0, 20).map((e) => e.key));
      await f.vectors.put(index, [stored[21]]);
      expect((await f.vectors.list(index, { limit: 1000 })).entries.map((e) => e.key).sort()).toEqual(stored.slice(20).map((e) => e.key));
      expect(await f.vectors.list(`${index}-none`, { limit: 10 })).toEqual({ entries: [] });
      await expect(f.vectors.list(index, { limit: 0 })).rejects.toBeInstanceOf(Error);
    });

    it('a put into an index never created is an Error', async () => {
      await expect(f.vectors.put(`${index}-none`, [entry('a', randomVector(seededRandom(9), 8))])).rejects.toBeInstanceOf(Error);
    });

    describe('filters', () => {
      const r = seededRandom(10);
      const dims = 8;
      const meta: Record<string, VectorMetadata> = {
        a: { scope: 'ws1', kind: 'doc', created_at: 1700, language: 'en', tag: ['red', 'blue'] },
        b: { scope: 'ws1', kind: 'note', created_at: 1800, category: 'x', tag: ['green'] },
        c: { scope: 'ws2', kind: 'doc', created_at: 1700, source: 'web', tag: 'red' },
        d: { scope: 'ws2', kind: 'doc', created_at: true, language: 'fr' },
        e: { scope: 'ws1', kind: 'doc', created_at: false, category: 'y' },
      };
      const vectorsOf = Object.fromEntries(Object.keys(meta).map((k) => [k, randomVector(r, dims)]));
      const query = randomVector(r, dims);
      const matching = async (filter: VectorFilter) => keysOf(await f.vectors.query(index, { vector: query, topK: 10, filter })).sort();
      beforeEach(async () => {
        await f.vectors.createIndex(index, dims);
        await f.vectors.put(index, Object.entries(meta).map(([k, m]) => entry(k, vectorsOf[k], m)));
      });

      it('equality on a string, a number and a boolean', async () => {
        expect(await matching({ scope: 'ws1' })).toEqual(['a', 'b', 'e']);
        expect(await matching({ created_at: 1700 })).toEqual(['a', 'c']);
        expect(await matching({ created_at: true })).toEqual(['d']);
        expect(await matching({ created_at: false })).toEqual(['e']);
        expect(await matching({ scope: 'ws3' })).toEqual([]);
        expect(await matching({})).toEqual(['a', 'b', 'c', 'd', 'e']);
      });

      it('an array value is matched by any of its elements', async () => {
        expect(await matching({ tag: 'red' })).toEqual(['a', 'c']);
        expect(await matching({ tag: 'blue' })).toEqual(['a']);
        expect(await matching({ tag: { $in: ['green', 'blue'] } })).toEqual(['a', 'b']);
      });

      it('$in is equality with any of its values', async () => {
        expect(await matching({ kind: { $in: ['note'] } })).toEqual(['b']);
        expect(await matching({ language: { $in: ['en', 'fr', 'de'] } })).toEqual(['a', 'd']);
        expect(await matching({ created_at: { $in: [1800, true] } })).toEqual(['b', 'd']);
        expect(await matching({ scope: { $in: ['nowhere'] } })).toEqual([]);
      });

      it('every key must hold', async () => {
        expect(await matching({ scope: 'ws1', kind: 'doc' })).toEqual(['a', 'e']);
        expect(await matching({ scope: 'ws2', kind: 'doc', tag: 'red' })).toEqual(['c']);
        expect(await matching({ scope: { $in: ['ws1', 'ws2'] }, kind: 'doc', created_at: 1700 })).toEqual(['a', 'c']);
        expect(await matching({ scope: 'ws1', kind: 'note', tag: 'red' })).toEqual([]);
      });

      it('a key the entry lacks never matches', async () => {
        expect(await matching({ category: 'x' })).toEqual(['b']);
        expect(await matching({ source: { $in: ['web', 'mail'] } })).toEqual(['c']);
        expect(await matching({ language: 'en', scope: 'ws1' })).toEqual(['a']);
        expect(await matching({ missing_key: 'x' })).toEqual([]);
      });

      it('ranks the kept entries by similarity', async () => {
        const hits = await f.vectors.query(index, { vector: query, topK: 2, filter: { kind: 'doc' } });
        const truth = exactTop(Object.keys(meta).map((k) => entry(k, vectorsOf[k], meta[k])), query, 2, (e) => e.filterable.kind === 'doc');
        expect(keysOf(hits)).toEqual(keysOf(truth));
      });
    });

    it('a selective filter still finds every kept entry (3 of 500)', async () => {
      await f.vectors.createIndex(index, 16);
      const r = seededRandom(11);
      const kept = new Set([17, 250, 499]);
      const entries = Array.from({ length: 500 }, (_, i) => entry(`k${i}`, randomVector(r, 16), { scope: kept.has(i) ? 'rare' : 'common' }));
      await f.vectors.put(index, entries);
      for (let q = 0; q < 3; q++) {
        const hits = await f.vectors.query(index, { vector: randomVector(r, 16), topK: 10, filter: { scope: 'rare' } });
        expect(keysOf(hits).sort()).toEqual(['k17', 'k250', 'k499']);
      }
    });

    it('a filter keeping 30 of 2,000 returns exactly the exact-scan top 10', async () => {
      await f.vectors.createIndex(index, 16);
      const r = seededRandom(12);
      const entries = Array.from({ length: 2000 }, (_, i) => entry(`k${i}`, randomVector(r, 16), { category: i % 200 < 3 ? 'kept' : 'other', tag: [`t${i % 7}`] }));
      await putAll(f.vectors, index, entries);
      for (let q = 0; q < 5; q++) {
        const query = randomVector(r, 16);
        const hits = await f.vectors.query(index, { vector: query, topK: 10, filter: { category: 'kept' } });
        const truth = exactTop(entries, query, 10, (e) => e.filterable.category === 'kept');
        expect(keysOf(hits)).toEqual(keysOf(truth));
        hits.forEach((h, i) => expect(h.score).toBeCloseTo(truth[i].score, 4));
      }
    });

    it('returns the payload intact, unicode and a long text included', async () => {
      await f.vectors.createIndex(index, 8);
      const r = seededRandom(13);
      const unicode = JSON.stringify({ id: 'u', text: 'naïve café, 東京, emoji 🙂🚀, "quotes" \\ back\nline', metadata: { ä: 'ö' } });
      const long = JSON.stringify({ id: 'l', text: 'é🙂x'.repeat(3000) }); // about 24 KiB of UTF-8
      const v1 = randomVector(r, 8), v2 = randomVector(r, 8);
      await f.vectors.put(index, [entry('u', v1, {}, unicode), entry('l', v2, {}, long)]);
      expect((await f.vectors.query(index, { vector: v1, topK: 1 }))[0]).toMatchObject({ key: 'u', payload: unicode });
      expect((await f.vectors.query(index, { vector: v2, topK: 1 }))[0]).toMatchObject({ key: 'l', payload: long });
    });

    it('takes keys of 1 to 1,024 bytes, any characters', async () => {
      await f.vectors.createIndex(index, 8);
      const r = seededRandom(14);
      const keys = ['v', `v${'0'.repeat(1023)}`, 'v01J2 ÿ/🙂:#?', 'é'.repeat(512)];
      const entries = keys.map((k) => entry(k, randomVector(r, 8)));
      await f.vectors.put(index, entries);
      for (const e of entries) expect((await f.vectors.query(index, { vector: e.vector, topK: 1 }))[0].key).toBe(e.key);
      await f.vectors.delete(index, keys.slice(1));
      expect(keysOf(await f.vectors.query(index, { vector: entries[0].vector, topK: 10 }))).toEqual(['v']);
    });

    it(`puts and deletes batches of ${VECTOR_BATCH_MAX}`, async () => {
      await f.vectors.createIndex(index, 8);
      const r = seededRandom(15);
      const entries = Array.from({ length: VECTOR_BATCH_MAX }, (_, i) => entry(`k${i}`, randomVector(r, 8), { kind: i % 2 ? 'odd' : 'even' }));
      await f.vectors.put(index, entries);
      const query = randomVector(r, 8);
      const hits = await f.vectors.query(index, { vector: query, topK: VECTOR_TOP_K_MAX, filter: { kind: 'odd' } });
      expect(keysOf(hits)).toEqual(keysOf(exactTop(entries, query, VECTOR_TOP_K_MAX, (e) => e.filterable.kind === 'odd')));
      await f.vectors.delete(index, entries.map((e) => e.key));
      expect(await f.vectors.query(index, { vector: query, topK: 10 })).toEqual([]);
    });

    it('works at 384 dimensions', async () => {
      await f.vectors.createIndex(index, 384);
      const r = seededRandom(16);
      const entries = Array.from({ length: 50 }, (_, i) => entry(`k${i}`, randomVector(r, 384), { scope: i < 25 ? 'a' : 'b' }));
      await f.vectors.put(index, entries);
      const [best] = await f.vectors.query(index, { vector: entries[30].vector, topK: 1 });
      expect(best.key).toBe('k30');
      expect(best.score).toBeCloseTo(1, 4);
      const query = randomVector(r, 384);
      const hits = await f.vectors.query(index, { vector: query, topK: 5, filter: { scope: 'a' } });
      expect(keysOf(hits)).toEqual(keysOf(exactTop(entries, query, 5, (e) => e.filterable.scope === 'a')));
    });
  });
}
