/**
 * The embedded vector index (`engine.vectors` of a fresh embedded engine) and the platform's query
 * path, with and without HTTP, against an exact scan and hnswlib-node called directly, measured in the
 * same run (docs/decisions/vector-index-embedded.md, docs/benchmarks.md).
 *
 * Data: BENCH_N (100,000; `npm run bench -- vector --n 5000` for a smoke run) passages of 384
 * dimensions with a low intrinsic dimension (`latentDataSet`: a random 32-dimensional direction
 * through one fixed 384x32 map plus noise, normalized; a uniform set defeats every index), 200 queries
 * of the same recipe, and a label 0-99 per passage: the 10 % filter keeps labels 0-9, the 1 % filter
 * label 0 (as `tag: 'p10'` / `tag: 'p1'` in the filterable metadata, beside a `scope` every entry has).
 *
 * Measured subjects (`subjects` in `run`), data and types in bench/support/vector-data.ts:
 *   exact scan         a tight loop over one Float32Array (its top-10 is the ground truth);
 *   hnswlib-node       the library alone: M 16, efConstruction 128, ef 256 plain, filter callback at ef 64;
 *   adapter            the embedded engine's VectorIndex: puts of 500, then queries through `query()`;
 *   platform (no HTTP) a workspace's vector database: commits of 100 passages through the ledger, then
 *                      `searchVectors` (bench/support/vector-platform.ts);
 *   platform (HTTP)    `POST /v1/vector/query` on the local server over that database, one loopback
 *                      embeddings call a query included. Its misses are reported, not failed.
 * Ingest counts the adapter's puts (the platform's commits) until the graph holds every entry
 * (`caughtUp`), so the figure is the rate at which it answers from the graph, not from the tail
 * scan. Restart: a new engine on the same directory, the time to its first answer (from the snapshot
 * written when ingest went quiet), against a rebuild (reading the stored vectors plus inserting them
 * all, the raw library's build time).
 *
 * Targets (every round): plain p50 <= 0.1x exact and <= 2x the raw library, p99 <= 0.3x exact,
 * recall@10 >= 0.95; filtered: full top-k, recall >= 0.95, p50 <= 0.2x the exact scan's plain p50;
 * ingest >= 0.5x the raw library's insert rate; restart <= 0.5x the rebuild. Rounds: BENCH_ROUNDS (3)
 * of the query measurements, the subjects' order rotated each round; building happens once.
 */
import Database from 'better-sqlite3';
import hnswlib from 'hnswlib-node';
import { renameSync, rmSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../lambdas/engine/embedded/index.js';
import { envNumber } from './support/env.js';
import { DIMENSIONS, exactTop, FILTERS, K, latentDataSet, QUERIES, type FilterName, type IngestFigures, type VectorDataSet, type VectorSubject } from './support/vector-data.js';
import { makeTempDir } from './support/processes.js';
import { platformSubjects } from './support/vector-platform.js';
import { settledSnapshot, type SnapshotOrigin } from './support/vector-snapshot.js';
import { fmt, fmtInt, type Table } from './support/table.js';
import type { Benchmark, BenchReport, Figure } from './support/types.js';

const WARMUP = 20;
const INDEX = 'bench-passages';

const now = () => performance.now();
const FILTER_TITLES: Record<FilterName, string> = { none: 'none', p10: '10 %', p1: '1 %', all: 'scope (keeps all)' };

function exactSubject(): VectorSubject & { data?: VectorDataSet } {
  const s: VectorSubject & { data?: VectorDataSet } = {
    name: 'exact scan',
    async setup(data) {
      s.data = data;
    },
    query: (i, filter) => exactTop(s.data!, s.data!.query(i), filter),
    async close() {},
  };
  return s;
}

function hnswlibSubject(): VectorSubject & IngestFigures {
  let graph: InstanceType<typeof hnswlib.HierarchicalNSW>;
  let data: VectorDataSet;
  const s: VectorSubject & IngestFigures = {
    name: 'hnswlib-node alone',
    async setup(d, progress) {
      data = d;
      graph = new hnswlib.HierarchicalNSW('ip', d.dimensions);
      graph.initIndex({ maxElements: d.n, m: 16, efConstruction: 128, randomSeed: 100, allowReplaceDeleted: true });
      const started = now();
      for (let i = 0; i < d.n; i++) {
        graph.addPoint(Array.from(d.vector(i)), i);
        if (i % 20_000 === 19_999) progress(`hnswlib-node: ${fmtInt(i + 1)} inserted`);
      }
      s.buildS = (now() - started) / 1000;
      s.insertsPerS = d.n / s.buildS;
    },
    query(i, filter) {
      graph.setEf(filter === 'none' || filter === 'all' ? 256 : 64);
      const keep = filter === 'none' || filter === 'all' ? undefined : (label: number) => data.keeps(filter, label);
      return graph.searchKnn(Array.from(data.query(i)), K, keep).neighbors;
    },
    async close() {},
  };
  return s;
}

interface AdapterFigures extends IngestFigures {
  dir?: string;
  snapshot?: SnapshotOrigin;
  restart?: { firstQueryMs: number; coldFirstQueryMs: number; readStoredMs: number }[];
  rssMB?: number;
}

function adapterSubject(): VectorSubject & AdapterFigures {
  let engine: EmbeddedEngine;
  let temp: ReturnType<typeof makeTempDir>;
  let data: VectorDataSet;
  const position = (key: string) => Number(key.slice(1));
  const s: VectorSubject & AdapterFigures = {
    name: 'adapter (engine.vectors)',
    async setup(d, progress) {
      data = d;
      temp = makeTempDir('bench-vector-');
      s.dir = temp.path;
      engine = createEmbeddedEngine({ dataDir: temp.path });
      const rss0 = process.memoryUsage().rss;
      await engine.vectors.createIndex(INDEX, d.dimensions);
      const started = now();
      for (let from = 0; from < d.n; from += 500) {
        const entries = [];
        for (let i = from; i < Math.min(d.n, from + 500); i++) {
          entries.push({ key: `v${i}`, vector: d.vector(i), filterable: d.filterable(i), payload: JSON.stringify({ id: `v${i}`, text: `passage ${i}` }) });
        }
        await engine.vectors.put(INDEX, entries);
        if (from === 0) await engine.vectors.query(INDEX, { vector: d.query(0), topK: K }); // opens this process's view
        if (from % 20_000 === 19_500) progress(`adapter: ${fmtInt(from + 500)} put, ${fmtInt((await engine.vectors.stats(INDEX)).inGraph)} in the graph`);
      }
      const putS = (now() - started) / 1000;
      await engine.vectors.caughtUp(INDEX);
      s.buildS = (now() - started) / 1000;
      s.insertsPerS = d.n / s.buildS;
      s.rssMB = (process.memoryUsage().rss - rss0) / 2 ** 20;
      progress(`adapter: puts took ${fmt(putS)} s, the graph was whole after ${fmt(s.buildS)} s`);
      s.snapshot = await settledSnapshot(engine, temp.path, INDEX);
      s.restart = [];
    },
    async query(i, filter) {
      const hits = await engine.vectors.query(INDEX, { vector: data.query(i), topK: K, filter: FILTERS[filter] });
      return hits.map((h) => position(h.key));
    },
    async close() {
      await engine.close();
      temp.remove();
    },
  };
  return s;
}

/** A new engine on the same directory: the time to its first answer, with the snapshot and without one. */
async function measureRestart(adapter: AdapterFigures, data: VectorDataSet) {
  const dir = adapter.dir!;
  let started = now();
  const warm = createEmbeddedEngine({ dataDir: dir });
  await warm.vectors.query(INDEX, { vector: data.query(1), topK: K });
  const firstQueryMs = now() - started;
  await warm.close();
  // Without its snapshot (moved aside): the stored entries read back, then an exact scan.
  const snapshots = join(dir, 'vector-snapshots');
  const aside = join(dir, 'aside');
  rmSync(aside, { recursive: true, force: true });
  renameSync(snapshots, aside);
  started = now();
  const cold = createEmbeddedEngine({ dataDir: dir });
  await cold.vectors.query(INDEX, { vector: data.query(1), topK: K });
  const coldFirstQueryMs = now() - started;
  await cold.close();
  rmSync(snapshots, { recursive: true, force: true });
  renameSync(aside, snapshots);
  // Reading the stored vectors back, the first half of a rebuild.
  started = now();
  const db = new Database(join(dir, 'vectors.db'), { readonly: true });
  const out = new Float32Array(data.n * data.dimensions);
  let i = 0;
  for (const row of db.prepare('SELECT vector FROM vector_entries ORDER BY id').raw().iterate() as Iterable<[Buffer]>) {
    out.set(new Float32Array(row[0].buffer, row[0].byteOffset, data.dimensions), i++ * data.dimensions);
  }
  db.close();
  adapter.restart!.push({ firstQueryMs, coldFirstQueryMs, readStoredMs: now() - started });
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

interface Measured {
  p50: number;
  p99: number;
  recall: number;
  full: number;
}

async function measure(subject: VectorSubject, filter: FilterName, truth: number[][]): Promise<Measured> {
  for (let i = 0; i < WARMUP; i++) await subject.query(i % QUERIES, filter);
  const latencies: number[] = [];
  let hit = 0;
  let full = 0;
  for (let i = 0; i < truth.length; i++) {
    const started = now();
    const got = await subject.query(i, filter);
    latencies.push(now() - started);
    const want = new Set(truth[i]);
    hit += got.filter((x) => want.has(x)).length;
    if (got.length === Math.min(K, truth[i].length)) full++;
  }
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), recall: hit / truth.reduce((n, t) => n + t.length, 0), full };
}

export const benchmark: Benchmark = {
  name: 'vector',
  title: 'Vector index: the embedded adapter and the platform\'s query path (with and without HTTP) vs an exact scan and hnswlib-node alone',
  async run(progress): Promise<BenchReport> {
    const n = envNumber('BENCH_N', 100_000);
    const rounds = envNumber('BENCH_ROUNDS', 3);
    let started = now();
    const data = latentDataSet(n);
    progress(`data set: ${fmtInt(n)} x ${DIMENSIONS} (latent), ${QUERIES} queries, made in ${fmt((now() - started) / 1000)} s; ${cpus().length} CPUs, load ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);

    const filters: FilterName[] = ['none', 'p10', 'p1', 'all'];
    started = now();
    const truth = Object.fromEntries(filters.map((f) => [f, Array.from({ length: QUERIES }, (_, i) => exactTop(data, data.query(i), f))])) as Record<FilterName, number[][]>;
    progress(`ground truth (exact scan, ${filters.length} x ${QUERIES} queries): ${fmt((now() - started) / 1000)} s`);

    const exact = exactSubject();
    const raw = hnswlibSubject();
    const adapter = adapterSubject();
    const platform = platformSubjects();
    /** The measured rows, in order. The HTTP row runs on the database the no-HTTP row builds. */
    const subjects: VectorSubject[] = [exact, raw, adapter, platform.direct, platform.overHttp];
    /** The rows the targets are checked on (the baselines are what they are compared with). */
    const checked: VectorSubject[] = [adapter, platform.direct, platform.overHttp];
    /** Rows whose misses are reported, not failed: the HTTP row carries a request and an embeddings call the library rows do not. */
    const reportedOnly = new Set<VectorSubject>([platform.overHttp]);
    try {
      for (const subject of subjects) {
        progress(`building: ${subject.name}`);
        await subject.setup(data, progress);
      }
      const results: { round: number; subject: string; filter: FilterName; m: Measured }[] = [];
      for (let round = 1; round <= rounds; round++) {
        const order = subjects.map((_, i) => subjects[(i + round - 1) % subjects.length]);
        for (const subject of order) {
          for (const filter of filters) {
            if (subject.filters && !subject.filters.includes(filter)) continue;
            results.push({ round, subject: subject.name, filter, m: await measure(subject, filter, truth[filter]) });
          }
        }
        await measureRestart(adapter, data);
        const at = (subject: string, filter: FilterName) => results.find((r) => r.round === round && r.subject === subject && r.filter === filter)!.m;
        progress(
          `round ${round}/${rounds}: p50 ms exact ${fmt(at(exact.name, 'none').p50, 2)}, hnswlib ${fmt(at(raw.name, 'none').p50, 2)}, ` +
            checked.map((s) => `${s.name} ${fmt(at(s.name, 'none').p50, 2)} / p10 ${fmt(at(s.name, 'p10').p50, 2)} / p1 ${fmt(at(s.name, 'p1').p50, 2)}`).join(', ') +
            `; restart ${fmt(adapter.restart!.at(-1)!.firstQueryMs, 0)} ms`,
        );
      }

      // Verdict per round and row.
      const rebuildMs = adapter.restart![0].readStoredMs + raw.buildS! * 1000;
      const checks: string[] = [];
      const httpMisses = new Set<string>();
      const roundRows: string[][] = [];
      for (let round = 1; round <= rounds; round++) {
        const at = (subject: string, filter: FilterName) => results.find((r) => r.round === round && r.subject === subject && r.filter === filter)!.m;
        const ex = at(exact.name, 'none');
        const rw = at(raw.name, 'none');
        for (const subject of checked) {
          const ad = at(subject.name, 'none');
          const ok = (cond: boolean, what: string) => {
            if (!cond && reportedOnly.has(subject)) httpMisses.add(what);
            else if (!cond) checks.push(`round ${round}, ${subject.name}: ${what}`);
            return cond ? 'ok' : 'MISS';
          };
          const restart = subject === adapter ? adapter.restart![round - 1] : undefined;
          roundRows.push([
            String(round),
            subject.name,
            `${fmt(ad.p50 / ex.p50, 3)} ${ok(ad.p50 <= 0.1 * ex.p50, 'plain p50 > 0.1x exact')}`,
            `${fmt(ad.p50 / rw.p50, 2)} ${ok(ad.p50 <= 2 * rw.p50, 'plain p50 > 2x hnswlib-node')}`,
            `${fmt(ad.p99 / ex.p99, 3)} ${ok(ad.p99 <= 0.3 * ex.p99, 'plain p99 > 0.3x exact')}`,
            `${fmt(ad.recall, 4)} ${ok(ad.recall >= 0.95, 'recall@10 < 0.95')}`,
            ...(['p10', 'p1'] as const).map((f) => {
              const m = at(subject.name, f);
              return `${fmt(m.p50 / ex.p50, 3)}, ${fmt(m.recall, 4)}, ${m.full}/${QUERIES} ${ok(m.p50 <= 0.2 * ex.p50 && m.recall >= 0.95 && m.full === QUERIES, `${f}: p50 > 0.2x exact, recall < 0.95 or not full`)}`;
            }),
            restart ? `${fmt(restart.firstQueryMs / rebuildMs, 4)} ${ok(restart.firstQueryMs <= 0.5 * rebuildMs, 'restart > 0.5x rebuild')}` : '-',
          ]);
        }
      }
      const ingestRatio = adapter.insertsPerS! / raw.insertsPerS!;
      if (ingestRatio < 0.5) checks.push(`adapter ingest ${fmt(ingestRatio, 2)}x the raw library`);
      const platformIngestRatio = platform.direct.insertsPerS! / raw.insertsPerS!;
      if (platformIngestRatio < 0.5) checks.push(`platform ingest ${fmt(platformIngestRatio, 2)}x the raw library`);

      const queryTable: Table = {
        title: `Top-${K} queries, ${fmtInt(n)} passages (ms; recall@${K} against the exact scan; full = answers with ${K} hits; the HTTP row includes one loopback embeddings call a query)`,
        headers: ['round', 'subject', 'filter', 'p50 ms', 'p99 ms', 'recall', 'full'],
        align: ['r', 'l', 'l', 'r', 'r', 'r', 'r'],
        rows: results.map((r) => [String(r.round), r.subject, FILTER_TITLES[r.filter], fmt(r.m.p50, 3), fmt(r.m.p99, 3), fmt(r.m.recall, 4), `${r.m.full}/${QUERIES}`]),
      };
      const ratioTable: Table = {
        title: 'Targets by round (ratios to the same round\'s exact scan or hnswlib-node; the HTTP row\'s misses are reported, not failed)',
        headers: ['round', 'subject', 'p50/exact (<=0.1)', 'p50/hnswlib (<=2)', 'p99/exact (<=0.3)', 'recall (>=0.95)', '10 %: p50/exact (<=0.2), recall, full', '1 %: p50/exact, recall, full', 'restart/rebuild (<=0.5)'],
        align: ['r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
        rows: roundRows,
      };
      const buildTable: Table = {
        title: 'Ingest and restart',
        headers: ['figure', 'value'],
        align: ['l', 'r'],
        rows: [
          ['hnswlib-node alone: insert rate (entries/s)', fmtInt(raw.insertsPerS!)],
          ['adapter: puts of 500 until the graph holds every entry (entries/s)', fmtInt(adapter.insertsPerS!)],
          ['adapter ingest / hnswlib-node (>= 0.5)', `${fmt(ingestRatio, 2)} ${ingestRatio >= 0.5 ? 'ok' : 'MISS'}`],
          ['platform: commits of 100 (commitPassages) until the graph holds every entry (entries/s)', fmtInt(platform.direct.insertsPerS!)],
          ['platform: the commits alone (s; the graph caught up after)', fmt(platform.direct.commitS!, 1)],
          ['platform ingest / hnswlib-node (>= 0.5)', `${fmt(platformIngestRatio, 2)} ${platformIngestRatio >= 0.5 ? 'ok' : 'MISS'}`],
          ...(['none', 'p10', 'p1'] as const).map((f) => {
            const b = platform.direct.breakdown?.[f];
            const med = (xs: number[] | undefined) => fmt(xs?.length ? percentile(xs, 50) : NaN, 3);
            return [`platform (no HTTP), ${FILTER_TITLES[f]}: median ms in the index search / the store reads / the whole query`, `${med(b?.index)} / ${med(b?.store)} / ${med(b?.total)}`];
          }),
          ['platform (HTTP): embeddings calls during its queries', fmtInt(platform.overHttp.embeddingsCalls ?? 0)],
          ['adapter: RSS growth over ingest (MB, this process)', fmtInt(adapter.rssMB!)],
          ['snapshot (adapter; platform)', `${adapter.snapshot!}; ${platform.direct.snapshot!}`],
          ['rebuild: stored vectors read back + the raw library\'s build (ms)', fmtInt(rebuildMs)],
          ...adapter.restart!.map((r, i) => [`round ${i + 1}: restart, first answer from the snapshot (ms)`, fmtInt(r.firstQueryMs)]),
          ...adapter.restart!.map((r, i) => [`round ${i + 1}: restart without a snapshot, first answer by exact scan (ms)`, fmtInt(r.coldFirstQueryMs)]),
        ],
      };
      const median = (xs: number[]) => percentile(xs, 50);
      const figure = (subject: string, filter: FilterName) => median(results.filter((r) => r.subject === subject && r.filter === filter).map((r) => r.m.p50));
      const figures: Figure[] = [
        { name: 'exact scan p50 ms', value: figure(exact.name, 'none'), digits: 2 },
        { name: 'hnswlib-node p50 ms', value: figure(raw.name, 'none'), digits: 2 },
        ...checked.flatMap((s): Figure[] => [
          { name: `${s.name} p50 ms`, value: figure(s.name, 'none'), digits: 2 },
          { name: `${s.name} 10 % filter p50 ms`, value: figure(s.name, 'p10'), digits: 2 },
          { name: `${s.name} 1 % filter p50 ms`, value: figure(s.name, 'p1'), digits: 2 },
        ]),
        { name: 'hnswlib-node inserts /s', value: raw.insertsPerS! },
        { name: 'adapter ingest /s', value: adapter.insertsPerS! },
        { name: 'platform ingest /s', value: platform.direct.insertsPerS! },
      ];
      const httpNote = httpMisses.size ? `; the HTTP row misses: ${[...httpMisses].join(', ')}` : '; the HTTP row meets them too';
      return {
        tables: [queryTable, ratioTable, buildTable],
        figures,
        verdict: {
          pass: checks.length === 0,
          summary: (checks.length ? checks.join('; ') : `every target met by the adapter and the platform (no HTTP) in ${rounds} rounds (ingest ${fmt(ingestRatio, 2)}x and ${fmt(platformIngestRatio, 2)}x the library)`) + httpNote,
        },
      };
    } finally {
      for (const subject of subjects) await subject.close();
    }
  },
};
