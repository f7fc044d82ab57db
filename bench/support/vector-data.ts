/**
 * The vector benchmark's data set, its filters, the exact scan (the ground truth) and what a measured
 * row is (bench/vector.ts; docs/benchmarks.md, "Vector index"): shared by the benchmark and the rows
 * in bench/support that measure the platform's own paths.
 */
import type { VectorFilter } from '../../lambdas/engine/ports.js';
export const DIMENSIONS = 384;
const LATENT = 32;
export const QUERIES = 200;
export const K = 10;

/** `all`: the scope every entry holds (a filter that keeps everything, as a workspace's scope may). */
export type FilterName = 'none' | 'p10' | 'p1' | 'all';
export const FILTERS: Record<FilterName, VectorFilter | undefined> = { none: undefined, p10: { tag: 'p10' }, p1: { tag: 'p1' }, all: { scope: 'bench' } };

export interface VectorDataSet {
  n: number;
  dimensions: number;
  /** n unit vectors, one after the other. */
  vectors: Float32Array;
  queries: Float32Array;
  /** 0-99 per passage: p10 keeps < 10, p1 keeps 0. */
  labels: Uint8Array;
  vector(i: number): Float32Array;
  query(i: number): Float32Array;
  keeps(filter: FilterName, i: number): boolean;
  /** The filterable metadata of passage i, as the adapter rows store it. */
  filterable(i: number): { scope: string; tag: string[] };
}

function seeded(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
function gaussianUnit(random: () => number, n: number): Float64Array {
  const out = new Float64Array(n);
  let s = 0;
  for (let j = 0; j < n; j++) {
    out[j] = Math.sqrt(-2 * Math.log(random() || 1e-12)) * Math.cos(2 * Math.PI * random());
    s += out[j] * out[j];
  }
  for (let j = 0; j < n; j++) out[j] /= Math.sqrt(s);
  return out;
}
/** n unit vectors from a 32-dimensional latent space through one fixed 384x32 map, plus noise of ~10 % (peak to peak) per component. */
function latentVectors(n: number, seed: number, dims = DIMENSIONS): Float32Array {
  const mapRandom = seeded(1234);
  const map = Array.from({ length: LATENT }, () => gaussianUnit(mapRandom, dims));
  const random = seeded(seed);
  const noise = seeded(seed + 1);
  const out = new Float32Array(n * dims);
  const x = new Float64Array(dims);
  for (let i = 0; i < n; i++) {
    const z = gaussianUnit(random, LATENT);
    x.fill(0);
    for (let l = 0; l < LATENT; l++) {
      const row = map[l];
      const zl = z[l];
      for (let j = 0; j < dims; j++) x[j] += row[j] * zl;
    }
    let s = 0;
    for (let j = 0; j < dims; j++) {
      x[j] += (0.1 * (noise() - 0.5)) / Math.sqrt(dims);
      s += x[j] * x[j];
    }
    const inv = 1 / Math.sqrt(s);
    for (let j = 0; j < dims; j++) out[i * dims + j] = x[j] * inv;
  }
  return out;
}

/** The benchmark's data set, reusable by other benchmarks and rows (seeded: the same every run). */
export function latentDataSet(n: number, options: { queries?: number; dimensions?: number } = {}): VectorDataSet {
  const dims = options.dimensions ?? DIMENSIONS;
  const vectors = latentVectors(n, 42, dims);
  const queries = latentVectors(options.queries ?? QUERIES, 7, dims);
  const labelRandom = seeded(99);
  const labels = Uint8Array.from({ length: n }, () => Math.floor(labelRandom() * 100));
  return {
    n,
    dimensions: dims,
    vectors,
    queries,
    labels,
    vector: (i) => vectors.subarray(i * dims, (i + 1) * dims),
    query: (i) => queries.subarray(i * dims, (i + 1) * dims),
    keeps: (filter, i) => filter === 'none' || filter === 'all' || (filter === 'p10' ? labels[i] < 10 : labels[i] === 0),
    filterable: (i) => ({ scope: 'bench', tag: labels[i] === 0 ? ['p10', 'p1'] : labels[i] < 10 ? ['p10'] : [] }),
  };
}

/** One row of the tables: how a subject is built and asked. Its answers are passage positions. */
export interface VectorSubject {
  name: string;
  /** Builds (ingests) the data set; a subject keeps figures of its own (ingest rate...) on itself. */
  setup(data: VectorDataSet, progress: (line: string) => void): Promise<void>;
  query(i: number, filter: FilterName): Promise<number[]> | number[];
  /** The filters it is measured with (all of FILTERS when absent). */
  filters?: readonly FilterName[];
  close(): Promise<void>;
}

/** The exact scan: the best K by a tight loop over one Float32Array (with the filter as a label check). */
export function exactTop(data: VectorDataSet, q: Float32Array, filter: FilterName, k = K): number[] {
  const scores = new Float64Array(k).fill(-Infinity);
  const ids = new Int32Array(k).fill(-1);
  const { vectors, dimensions: d, n } = data;
  for (let i = 0; i < n; i++) {
    if (filter !== 'none' && !data.keeps(filter, i)) continue;
    let s = 0;
    for (let j = 0, o = i * d; j < d; j++, o++) s += vectors[o] * q[j];
    if (s > scores[k - 1]) {
      let p = k - 1;
      while (p > 0 && scores[p - 1] < s) {
        scores[p] = scores[p - 1];
        ids[p] = ids[p - 1];
        p--;
      }
      scores[p] = s;
      ids[p] = i;
    }
  }
  return [...ids].filter((i) => i >= 0);
}

export interface IngestFigures {
  /** Entries a second into a graph that answers for them. */
  insertsPerS?: number;
  buildS?: number;
}
