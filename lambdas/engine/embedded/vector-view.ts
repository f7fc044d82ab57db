/**
 * One vector index as this process holds it in memory: every entry's normalized vector (one growing
 * Float32Array), its filterable metadata with postings per key and value, and an HNSW graph
 * (hnswlib-node, inner product = cosine on unit vectors) that catches up with new entries in small
 * slices off the request path. Derived from SQLite (vectors.ts) and disposable: nothing here is the
 * only copy of anything.
 *
 * A query is planned by how many entries can match: at most SCAN_MAX, an exact scan over just those;
 * more, the graph (with the filter as its callback) merged with an exact scan of the entries not yet
 * in it (the tail). A result shorter than it could be is redone by exact scan, so `topK` is always
 * full when that many match.
 */
import hnswlib from 'hnswlib-node';
import { writeFile } from 'node:fs/promises';
import type { VectorFilter, VectorMetadata } from '../ports.js';

type Graph = InstanceType<typeof hnswlib.HierarchicalNSW>;

/** HNSW build parameters (docs/decisions/vector-index-embedded.md: measured there). */
const M = 16;
const EF_CONSTRUCTION = 128;
/** ef for a plain query (recall@10 0.9945 measured; 64 gave 0.87), and with a filter callback, which widens the search itself. */
const EF_PLAIN = 256;
const EF_FILTERED = 64;
/**
 * The ef for a walk whose filter keeps `share` of the entries: a filter widens the walk by about
 * 1/share, so a narrow one needs less ef (EF_FILTERED at 10 %, measured) and a broad one (a scope
 * kept by every entry) as much as a plain query.
 */
const efFor = (share: number) => Math.min(EF_PLAIN, Math.max(EF_FILTERED, Math.ceil(EF_PLAIN * share * 2.5)));
/**
 * At most this many candidates, an exact scan over them beats the graph's filter callback (the
 * measured crossover is ~5,000 at 384 dimensions). A plain walk is cheaper than a filtered one, so
 * without a filter the graph wins from far fewer entries (5,000: scan 2.3 ms, graph 0.33 ms).
 */
export const SCAN_MAX = 5000;
const PLAIN_SCAN_MAX = 1000;
/** Longest stretch of graph inserts before the event loop gets a turn (an insert costs ~0.7 ms at 384 dimensions). */
const SLICE_MS = 8;

const FREE = 0;
const PENDING = 1;
const GRAPHED = 2;
/** Removed while still queued for the graph: its slot is freed when the queue reaches it. */
const DEAD_QUEUED = 3;

export interface Hit {
  id: number;
  score: number;
}

/** The filter as a predicate on metadata: every key holds, a scalar or `$in` equals the value or any element of an array value. */
export function matches(meta: VectorMetadata, filter: VectorFilter): boolean {
  for (const key in filter) {
    const value = meta[key];
    if (value === undefined) return false;
    const cond = filter[key];
    const wanted = typeof cond === 'object' ? cond.$in : [cond];
    const hit = Array.isArray(value) ? value.some((v) => wanted.includes(v)) : wanted.includes(value);
    if (!hit) return false;
  }
  return true;
}

const align8 = (n: number) => Math.ceil(n / 8) * 8;

/** A typed term, so 1, "1" and true stay apart. */
const term = (value: string | number | boolean) => JSON.stringify(value);

/** The best `k` so far, best first: small sorted arrays (k ≤ 100), cheap to keep in a tight loop. */
class Best {
  readonly scores: Float64Array;
  readonly slots: Int32Array;
  length = 0;
  constructor(readonly k: number) {
    this.scores = new Float64Array(k);
    this.slots = new Int32Array(k);
  }
  get floor() {
    return this.length < this.k ? -Infinity : this.scores[this.k - 1];
  }
  offer(slot: number, score: number) {
    if (score <= this.floor) return;
    let p = this.length < this.k ? this.length++ : this.k - 1;
    while (p > 0 && this.scores[p - 1] < score) {
      this.scores[p] = this.scores[p - 1];
      this.slots[p] = this.slots[p - 1];
      p--;
    }
    this.scores[p] = score;
    this.slots[p] = slot;
  }
}

export class IndexView {
  /** The change sequence this view reflects (vectors.ts applies the changes after it). */
  seq = 0;
  private vectors: Float32Array;
  private state: Uint8Array;
  private ids: Float64Array;
  private meta: (VectorMetadata | undefined)[] = [];
  private capacity = 0;
  private highWater = 0;
  private readonly free: number[] = [];
  private readonly slotOf = new Map<number, number>();
  /** key → term → slots holding it. */
  private readonly postings = new Map<string, Map<string, Set<number>>>();
  /** Slots waiting for the graph, oldest first, from `queueHead`. */
  private queue: number[] = [];
  private queueHead = 0;
  private pendingCount = 0;
  private graph: Graph | undefined;
  private graphed = 0;
  /** While a snapshot is written from another thread the graph must not change: removals wait here. */
  private frozen = false;
  private deferredRemovals: number[] = [];
  private scheduled = false;
  private closed = false;
  private readonly idleWaiters: (() => void)[] = [];

  constructor(
    readonly indexId: number,
    readonly dimensions: number,
    private readonly onCaughtUp: () => void = () => undefined,
    /** Candidates up to which a query scans exactly (tests lower it to exercise the graph on small indexes). */
    private readonly scanMax = SCAN_MAX,
  ) {
    this.vectors = new Float32Array(0);
    this.state = new Uint8Array(0);
    this.ids = new Float64Array(0);
  }

  get size() {
    return this.slotOf.size;
  }
  get pending() {
    return this.pendingCount;
  }
  get inGraph() {
    return this.graphed;
  }

  /** Makes room for `count` entries at once (a load knows how many it reads). */
  reserve(count: number): void {
    if (count > this.capacity) this.grow(count);
  }

  /** Adds an entry (its vector already normalized); an id already held is ignored. */
  add(id: number, vector: Float32Array, filterable: VectorMetadata): void {
    if (this.slotOf.has(id)) return;
    const slot = this.free.pop() ?? this.highWater++;
    if (slot >= this.capacity) this.grow(slot + 1);
    this.vectors.set(vector, slot * this.dimensions);
    this.state[slot] = PENDING;
    this.ids[slot] = id;
    this.meta[slot] = filterable;
    this.slotOf.set(id, slot);
    this.post(slot, filterable, true);
    this.queue.push(slot);
    this.pendingCount++;
  }

  /** Removes an entry; an id not held is ignored. */
  remove(id: number): void {
    const slot = this.slotOf.get(id);
    if (slot === undefined) return;
    this.slotOf.delete(id);
    this.post(slot, this.meta[slot]!, false);
    this.meta[slot] = undefined;
    if (this.state[slot] === PENDING) {
      this.state[slot] = DEAD_QUEUED;
      this.pendingCount--;
      return;
    }
    this.state[slot] = FREE;
    this.free.push(slot);
    this.graphed--;
    if (this.frozen) this.deferredRemovals.push(id);
    else this.unlink(id);
  }

  /**
   * Takes a graph loaded from a snapshot: its labels still held are in it; labels no longer held
   * are marked deleted (their slots are reused by later inserts). Only the rest stay queued.
   */
  attachGraph(graph: Graph): void {
    this.graph = graph;
    for (const label of graph.getIdsList()) {
      const slot = this.slotOf.get(label);
      if (slot !== undefined && this.state[slot] === PENDING) {
        this.state[slot] = GRAPHED;
        this.pendingCount--;
        this.graphed++;
      } else if (slot === undefined) this.unlink(label);
    }
    this.queue = this.queue.slice(this.queueHead).filter((s) => this.state[s] === PENDING || this.state[s] === DEAD_QUEUED);
    this.queueHead = 0;
  }

  /** The `k` entries most similar to `query` (normalized) among those `filter` keeps, best first. */
  search(query: Float32Array, k: number, filter?: VectorFilter): Hit[] {
    if (this.size === 0) return [];
    let filtered = filter !== undefined && Object.keys(filter).length > 0;
    let share = 1;
    if (filtered) {
      const sources = this.candidates(filter!);
      const estimate = sources.reduce((n, s) => n + s.size, 0);
      if (estimate === 0) return [];
      if (estimate <= this.scanMax) return this.hits(this.scanSets(query, k, sources, (slot) => matches(this.meta[slot]!, filter!)));
      share = Math.min(1, estimate / this.size);
      // One value every entry holds (a scope the whole index shares): no filter at all.
      if (Object.keys(filter!).length === 1 && sources.length === 1 && estimate === this.size) filtered = false;
    }
    const keep = filtered ? (slot: number) => matches(this.meta[slot]!, filter!) : undefined;
    if (!filtered && this.size <= Math.min(this.scanMax, PLAIN_SCAN_MAX)) return this.hits(this.scanAll(query, k));
    const best = new Best(k);
    this.searchGraph(query, k, keep, best, share);
    this.scanQueue(query, keep, best);
    // The graph can come back short (a filter it walks around, entries marked deleted): redo exactly.
    if (best.length < k && (filtered || best.length < this.size)) return this.hits(this.scanAll(query, k, keep));
    return this.hits(best);
  }

  /** Resolves once every entry held is in the graph (for tests and the benchmark). */
  caughtUp(): Promise<void> {
    if (this.pendingCount === 0 || this.closed) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Builds the graph in slices of SLICE_MS, one event-loop turn each. */
  scheduleCatchUp(): void {
    if (this.scheduled || this.closed || this.frozen) return;
    if (this.pendingCount === 0) {
      this.queue = [];
      this.queueHead = 0;
      return;
    }
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.closed || this.frozen) return;
      const until = performance.now() + SLICE_MS;
      while (this.queueHead < this.queue.length && performance.now() < until) this.insertNext();
      if (this.queueHead > 4096 && this.queueHead * 2 > this.queue.length) {
        this.queue = this.queue.slice(this.queueHead);
        this.queueHead = 0;
      }
      if (this.pendingCount > 0) this.scheduleCatchUp();
      else this.settle();
    });
  }

  /**
   * Writes a snapshot: the entries held (`viewFile`, see `restore`) and the graph over exactly them
   * (`graphFile`, from hnswlib's worker thread). The graph is frozen meanwhile (no inserts; removals
   * deferred, and skipped in walks by the label check), so the file is one state of it. False when
   * there is nothing whole to write (no graph, or entries not yet in it).
   */
  async writeSnapshot(graphFile: string, viewFile: string): Promise<boolean> {
    if (!this.graph || this.pendingCount > 0 || this.frozen) return false;
    this.frozen = true;
    try {
      const entries = this.serialize();
      await Promise.all([this.graph.writeIndex(graphFile), writeFile(viewFile, entries)]);
      return true;
    } finally {
      this.frozen = false;
      for (const id of this.deferredRemovals.splice(0)) this.unlink(id);
      this.scheduleCatchUp();
    }
  }

  /** Takes the entries of a snapshot's view file; throws when it is not one of this index's. */
  restore(file: Buffer): void {
    const headerBytes = file.readUInt32LE(0);
    const header = JSON.parse(file.toString('utf8', 4, 4 + headerBytes)) as { dimensions: number; count: number };
    if (header.dimensions !== this.dimensions) throw new Error('the snapshot has other dimensions');
    const { count } = header;
    let at = align8(4 + headerBytes);
    const ids = new Float64Array(file.buffer.slice(file.byteOffset + at, file.byteOffset + at + count * 8));
    at += count * 8;
    const vectors = new Float32Array(file.buffer.slice(file.byteOffset + at, file.byteOffset + at + count * this.dimensions * 4));
    at += count * this.dimensions * 4;
    const metas = JSON.parse(file.toString('utf8', at)) as VectorMetadata[];
    if (ids.length !== count || metas.length !== count) throw new Error('the snapshot is cut short');
    this.reserve(this.size + count);
    for (let i = 0; i < count; i++) this.add(ids[i], vectors.subarray(i * this.dimensions, (i + 1) * this.dimensions), metas[i]);
  }

  /** The entries held, for `restore`: a header, the ids, the vectors, the metadata as JSON. */
  private serialize(): Buffer {
    const count = this.size;
    const d = this.dimensions;
    const ids = new Float64Array(count);
    const vectors = new Float32Array(count * d);
    const metas: VectorMetadata[] = [];
    let n = 0;
    for (let slot = 0; slot < this.highWater; slot++) {
      const st = this.state[slot];
      if (st !== PENDING && st !== GRAPHED) continue;
      ids[n] = this.ids[slot];
      vectors.set(this.vectors.subarray(slot * d, (slot + 1) * d), n * d);
      metas.push(this.meta[slot]!);
      n++;
    }
    const header = Buffer.from(JSON.stringify({ dimensions: d, count }));
    const head = Buffer.alloc(align8(4 + header.length));
    head.writeUInt32LE(header.length, 0);
    header.copy(head, 4);
    return Buffer.concat([head, Buffer.from(ids.buffer), Buffer.from(vectors.buffer), Buffer.from(JSON.stringify(metas))]);
  }

  close(): void {
    this.closed = true;
    this.settle();
  }

  private settle() {
    for (const resolve of this.idleWaiters.splice(0)) resolve();
    if (!this.closed) this.onCaughtUp();
  }

  private insertNext(): void {
    const slot = this.queue[this.queueHead++];
    if (this.state[slot] === DEAD_QUEUED) {
      this.state[slot] = FREE;
      this.free.push(slot);
      return;
    }
    if (this.state[slot] !== PENDING) return;
    const graph = (this.graph ??= this.newGraph());
    const count = graph.getCurrentCount();
    // Deleted elements' places are reused first (allowReplaceDeleted); grow only when none is left.
    if (count >= graph.getMaxElements() && count === this.graphed) graph.resizeIndex(Math.max(1024, count * 2));
    const at = slot * this.dimensions;
    const point = Array.from(this.vectors.subarray(at, at + this.dimensions));
    try {
      graph.addPoint(point, this.ids[slot], true);
    } catch {
      // Full after all (a place counted as deleted that was not): grow and try once more.
      graph.resizeIndex(Math.max(1024, graph.getMaxElements() * 2));
      graph.addPoint(point, this.ids[slot], true);
    }
    this.state[slot] = GRAPHED;
    this.pendingCount--;
    this.graphed++;
  }

  private newGraph(): Graph {
    const graph = new hnswlib.HierarchicalNSW('ip', this.dimensions);
    graph.initIndex({ maxElements: Math.max(1024, this.size), m: M, efConstruction: EF_CONSTRUCTION, randomSeed: 100, allowReplaceDeleted: true });
    return graph;
  }

  private unlink(id: number) {
    try {
      this.graph?.markDelete(id);
    } catch {
      // Not in the graph, or already marked (a snapshot's stale label): nothing to undo.
    }
  }

  private grow(min: number) {
    const capacity = Math.max(min, this.capacity * 2, 256);
    const vectors = new Float32Array(capacity * this.dimensions);
    vectors.set(this.vectors);
    const state = new Uint8Array(capacity);
    state.set(this.state);
    const ids = new Float64Array(capacity);
    ids.set(this.ids);
    this.vectors = vectors;
    this.state = state;
    this.ids = ids;
    this.capacity = capacity;
  }

  private post(slot: number, filterable: VectorMetadata, add: boolean) {
    for (const key in filterable) {
      const value = filterable[key];
      for (const v of Array.isArray(value) ? value : [value]) {
        let byTerm = this.postings.get(key);
        if (!byTerm) this.postings.set(key, (byTerm = new Map()));
        const t = term(v);
        let slots = byTerm.get(t);
        if (add) {
          if (!slots) byTerm.set(t, (slots = new Set()));
          slots.add(slot);
        } else if (slots) {
          slots.delete(slot);
          if (slots.size === 0) byTerm.delete(t);
        }
      }
    }
  }

  /** The postings of the filter's most selective key: every kept entry is in one of them. */
  private candidates(filter: VectorFilter): Set<number>[] {
    let best: Set<number>[] | undefined;
    let bestCount = Infinity;
    for (const key in filter) {
      const cond = filter[key];
      const byTerm = this.postings.get(key);
      const sets = (typeof cond === 'object' ? cond.$in : [cond]).map((v) => byTerm?.get(term(v))).filter((s): s is Set<number> => s !== undefined);
      const count = sets.reduce((n, s) => n + s.size, 0);
      if (count < bestCount) {
        best = sets;
        bestCount = count;
      }
    }
    return best ?? [];
  }

  private searchGraph(query: Float32Array, k: number, keep: ((slot: number) => boolean) | undefined, best: Best, share: number) {
    const graph = this.graph;
    if (!graph || this.graphed === 0) return;
    graph.setEf(Math.max(efFor(share), k));
    // A label this view no longer holds (removal deferred during a snapshot) is skipped in the walk.
    const check = keep || this.deferredRemovals.length > 0
      ? (label: number) => {
          const slot = this.slotOf.get(label);
          return slot !== undefined && this.state[slot] === GRAPHED && (!keep || keep(slot));
        }
      : undefined;
    const { neighbors, distances } = graph.searchKnn(Array.from(query), Math.min(k, graph.getMaxElements()), check);
    for (let i = 0; i < neighbors.length; i++) {
      const slot = this.slotOf.get(neighbors[i]);
      if (slot !== undefined) best.offer(slot, 1 - distances[i]);
    }
  }

  private dot(query: Float32Array, slot: number): number {
    const v = this.vectors;
    const d = this.dimensions;
    let s = 0;
    for (let j = 0, o = slot * d; j < d; j++, o++) s += v[o] * query[j];
    return s;
  }

  private scanAll(query: Float32Array, k: number, keep?: (slot: number) => boolean): Best {
    const best = new Best(k);
    for (let slot = 0; slot < this.highWater; slot++) {
      const st = this.state[slot];
      if ((st === PENDING || st === GRAPHED) && (!keep || keep(slot))) best.offer(slot, this.dot(query, slot));
    }
    return best;
  }

  private scanSets(query: Float32Array, k: number, sets: Set<number>[], keep: (slot: number) => boolean): Best {
    const best = new Best(k);
    // An array value can sit under two of the wanted terms: score it once.
    const seen = sets.length > 1 ? new Set<number>() : undefined;
    for (const set of sets) {
      for (const slot of set) {
        if (seen) {
          if (seen.has(slot)) continue;
          seen.add(slot);
        }
        if (keep(slot)) best.offer(slot, this.dot(query, slot));
      }
    }
    return best;
  }

  /** The tail: entries not yet in the graph, scanned exactly. */
  private scanQueue(query: Float32Array, keep: ((slot: number) => boolean) | undefined, best: Best) {
    if (this.pendingCount === 0) return;
    for (let i = this.queueHead; i < this.queue.length; i++) {
      const slot = this.queue[i];
      if (this.state[slot] === PENDING && (!keep || keep(slot))) best.offer(slot, this.dot(query, slot));
    }
  }

  private hits(best: Best): Hit[] {
    const out: Hit[] = [];
    for (let i = 0; i < best.length; i++) out.push({ id: this.ids[best.slots[i]], score: best.scores[i] });
    return out;
  }
}
