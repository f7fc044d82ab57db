/**
 * Data API throughput through the local platform (`bin/local.ts`, a child process), against raw
 * better-sqlite3 doing the equivalent storage work in this process, measured in the same run.
 *
 * Setup: database `bench`, collection `items` with a unique text field `sku` and an indexed integer
 * field `n`, seeded with 20,000 records over 1,000 values of n (20 each) through the batch route, 33
 * creates per call (the most that fit one transaction, see BATCH). The baseline database gets the same rows.
 *
 *   creates  ours: `POST .../collections/items/records` with a new sku each request; 201s count.
 *            baseline: one write transaction inserting 3 rows (record, unique guard, index entry).
 *   lists    ours: `GET .../records?filter[n]=<v>&limit=20`, v cycling over the seeded values (each
 *            answer holds 20 records); 200s count.
 *            baseline: one read transaction, an index range query of 20 rows + 20 record point reads.
 *
 * Rounds run baseline, ours for creates, then the same for lists; the tables' figures are medians of
 * the rounds.
 *
 * Targets, same-run ratios in every round: ours' creates/s >= 0.5x the baseline's creates tx/s of that
 * round, and lists/s >= 0.5x its lists tx/s. Each round prints both with PASS or FAIL; the verdict is
 * PASS only if every round meets both. The earlier absolute figures (5,000 creates/s and lists/s,
 * medians) are printed as information, not part of the verdict: what they meant depends on the
 * machine's speed that day, which the baseline measures. PocketBase publishes about 2,000 creates/s
 * on 2 vCPU.
 *
 * Knobs (environment): BENCH_ROUNDS (3), BENCH_WARMUP_S (5), BENCH_DURATION_S (10), BENCH_CONNECTIONS
 * (32), BENCH_PROFILE_DIR (run the platform under `node --cpu-prof`; its profile goes to platform/ there).
 */
import Database from 'better-sqlite3';
import { mkdirSync, writeFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { RequestParams } from 'autocannon';
import { ulid } from '../lambdas/shared/ids.js';
import { loadSettings } from './support/env.js';
import { load, median, type LoadResult } from './support/load.js';
import { machineCpu, makeTempDir, type ServerProcess } from './support/processes.js';
import { startLocalPlatform } from './support/platform.js';
import { fmt, fmtInt, type Table } from './support/table.js';
import type { Benchmark, BenchReport, Figure } from './support/types.js';

/** Ours / raw better-sqlite3 in the same round, for creates and for lists, in every round. */
const TARGET_RATIO = 0.5;
/** The earlier absolute targets (medians), printed as information. */
const ABSOLUTE_CREATES = 5_000;
const ABSOLUTE_LISTS = 5_000;
const verdictWord = (pass: boolean) => (pass ? 'PASS' : 'FAIL');
const SEED_RECORDS = 20_000;
const N_VALUES = 1_000;
const PAGE = 20;
/**
 * Creates per batch call: a create here is 3 storage writes (record, sku guard, n entry) and a batch
 * adds one schema check, within the 100 writes of one transaction (the route's 100 ops fit only
 * collections without unique or indexed fields).
 */
const BATCH = 33;
/** Created records take n values the lists never ask for, so every list answer stays 20 records. */
const CREATED_N_BASE = 1_000_000;

const COLLECTION = { fields: [{ name: 'sku', type: 'text', unique: true }, { name: 'n', type: 'integer', indexed: true }] };

/** One measurement of either target: operations per second and where the CPU went. */
interface Sample {
  opsPerSecond: number;
  latencyP50Ms?: number;
  latencyP99Ms?: number;
  /** CPU of the process doing the work (the server, or this process for the baseline) per operation. */
  cpuUsPerOp?: number;
  cpuShare?: number;
  clientCpuShare?: number;
  othersBusy?: number;
}

const fromLoad = (r: LoadResult): Sample => ({
  opsPerSecond: r.rps,
  latencyP50Ms: r.latencyP50Ms,
  latencyP99Ms: r.latencyP99Ms,
  cpuUsPerOp: r.serverCpuUsPerRequest,
  cpuShare: r.serverCpuShare,
  clientCpuShare: r.clientCpuShare,
  othersBusy: r.othersBusy,
});

export const benchmark: Benchmark = {
  name: 'data',
  title: 'Data API creates and lists: local platform vs raw better-sqlite3',
  async run(progress): Promise<BenchReport> {
    const { rounds, warmup, duration, connections, profileDir } = loadSettings();

    const temp = makeTempDir('bench-data-');
    let server: ServerProcess | undefined;
    let baseline: SqliteBaseline | undefined;
    try {
      const platform = await startLocalPlatform(temp.path, profileDir);
      server = platform.server;
      const auth = { authorization: `Bearer ${platform.credentials.secret_key}` };
      const call = async (method: string, path: string, expectStatus: number, body?: unknown) => {
        const res = await fetch(`${platform.dataUrl}${path}`, {
          method,
          headers: { ...auth, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
        const text = await res.text();
        if (res.status !== expectStatus) throw new Error(`${method} ${path} answered ${res.status} (expected ${expectStatus}): ${text}`);
        return JSON.parse(text);
      };

      const db = '/v1/databases/bench';
      const records = `${db}/collections/items/records`;
      await call('PUT', db, 201);
      await call('PUT', `${db}/collections/items`, 201, COLLECTION);
      const seedStarted = Date.now();
      for (let start = 0; start < SEED_RECORDS; start += BATCH) {
        const ops = Array.from({ length: Math.min(BATCH, SEED_RECORDS - start) }, (_, i) => ({ op: 'create', collection: 'items', data: seedValues(start + i) }));
        await call('POST', `${db}/batch`, 200, { ops });
      }
      progress(`platform ${platform.dataUrl}: seeded ${fmtInt(SEED_RECORDS)} records over ${fmtInt(N_VALUES)} values of n in ${fmt((Date.now() - seedStarted) / 1000)} s (batches of ${BATCH})`);

      // The answers are what the benchmark claims they are.
      const page = (await call('GET', `${records}?filter[n]=7&limit=${PAGE}`, 200)) as { records: { n: number; sku: string }[] };
      if (page.records.length !== PAGE || page.records.some((r) => r.n !== 7)) throw new Error(`a list for n=7 gave ${JSON.stringify(page).slice(0, 300)}`);
      const created = (await call('POST', records, 201, { sku: 'check', n: CREATED_N_BASE })) as { sku: string };
      if (created.sku !== 'check') throw new Error(`a create answered ${JSON.stringify(created)}`);
      await call('POST', records, 409, { sku: 'check', n: CREATED_N_BASE });

      baseline = new SqliteBaseline(join(temp.path, 'baseline.db'));
      baseline.seed();

      // Unique skus across warm-ups and rounds; list values cycle over the seeded ones.
      let nextSku = 0;
      const createRequest = (r: RequestParams): RequestParams => {
        const i = nextSku++;
        return { ...r, body: `{"sku":"bench-${i}","n":${CREATED_N_BASE + (i % N_VALUES)}}` };
      };
      let nextList = 0;
      const listRequest = (r: RequestParams): RequestParams => ({ ...r, path: `${records}?filter[n]=${nextList++ % N_VALUES}&limit=${PAGE}` });

      const kinds = [
        {
          name: 'creates',
          absolute: ABSOLUTE_CREATES,
          baseline: (seconds: number) => baseline!.run('creates', seconds),
          ours: (seconds: number) =>
            load({
              url: `${platform.dataUrl}${records}`,
              method: 'POST',
              headers: { ...auth, 'content-type': 'application/json' },
              setupRequest: createRequest,
              expectStatus: 201,
              connections,
              duration: seconds,
              serverPgid: server!.pgid,
            }),
          results: { baseline: [] as Sample[], ours: [] as Sample[] },
        },
        {
          name: 'lists',
          absolute: ABSOLUTE_LISTS,
          baseline: (seconds: number) => baseline!.run('lists', seconds),
          ours: (seconds: number) =>
            load({ url: `${platform.dataUrl}${records}`, headers: auth, setupRequest: listRequest, expectStatus: 200, connections, duration: seconds, serverPgid: server!.pgid }),
          results: { baseline: [] as Sample[], ours: [] as Sample[] },
        },
      ];

      const phases: { name: string; startUs: number; endUs: number }[] = [];
      progress(`${rounds} rounds, each target: ${warmup} s warm-up (discarded) then ${duration} s; HTTP: ${connections} keep-alive connections`);
      for (let round = 1; round <= rounds; round++) {
        for (const k of kinds) {
          k.baseline(warmup);
          const b = k.baseline(duration);
          k.results.baseline.push(b);
          progress(`round ${round}/${rounds} ${k.name.padEnd(7)} baseline ${fmtInt(b.opsPerSecond).padStart(7)} tx/s   ${fmt(b.cpuUsPerOp)} µs CPU/tx`);
          await k.ours(warmup);
          const startUs = monotonicUs();
          const o = fromLoad(await k.ours(duration));
          phases.push({ name: k.name, startUs, endUs: monotonicUs() });
          k.results.ours.push(o);
          progress(
            `round ${round}/${rounds} ${k.name.padEnd(7)} ours     ${fmtInt(o.opsPerSecond).padStart(7)} req/s  p50 ${o.latencyP50Ms} ms  p99 ${o.latencyP99Ms} ms  ` +
              `server ${fmt(o.cpuUsPerOp)} µs CPU/req (${fmt((o.cpuShare ?? NaN) * 100, 0)}% of a core), client ${fmt((o.clientCpuShare ?? NaN) * 100, 0)}%, others ${fmt((o.othersBusy ?? NaN) * 100, 0)}%`,
          );
          const ratio = o.opsPerSecond / b.opsPerSecond;
          progress(
            `round ${round}/${rounds} ${k.name.padEnd(7)} target: ours ${fmtInt(o.opsPerSecond)}/s / baseline ${fmtInt(b.opsPerSecond)} tx/s = ${ratio.toFixed(2)}, >= ${TARGET_RATIO} ${verdictWord(ratio >= TARGET_RATIO)}`,
          );
        }
      }

      const med = (samples: Sample[], f: (s: Sample) => number | undefined) => {
        const values = samples.map(f).filter((v): v is number => v !== undefined);
        return values.length ? median(values) : undefined;
      };
      const pct = (v: number | undefined) => (v === undefined ? '-' : `${fmt(v * 100, 0)}%`);
      const tables: Table[] = [];
      const summaryRows: string[][] = [];
      const absoluteRows: string[][] = [];
      const verdicts: string[] = [];
      const figures: Figure[] = [];
      let pass = true;
      for (const k of kinds) {
        const rows: [string, Sample[]][] = [
          ['baseline (better-sqlite3 in-process)', k.results.baseline],
          ['ours (bin/local.ts over HTTP)', k.results.ours],
        ];
        tables.push({
          title: `${k.name} per second`,
          headers: ['target', ...k.results.ours.map((_, i) => `round ${i + 1}`), 'median /s', 'p50 ms', 'p99 ms', 'CPU µs/op', 'CPU', 'client CPU', 'others'],
          align: ['l', ...k.results.ours.map(() => 'r' as const), 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
          rows: rows.map(([label, samples]) => [
            label,
            ...samples.map((s) => fmtInt(s.opsPerSecond)),
            fmtInt(med(samples, (s) => s.opsPerSecond)!),
            fmt(med(samples, (s) => s.latencyP50Ms), 0).replace('n/a', '-'),
            fmt(med(samples, (s) => s.latencyP99Ms), 0).replace('n/a', '-'),
            fmt(med(samples, (s) => s.cpuUsPerOp)),
            pct(med(samples, (s) => s.cpuShare)),
            pct(med(samples, (s) => s.clientCpuShare)),
            pct(med(samples, (s) => s.othersBusy)),
          ]),
        });
        const ours = med(k.results.ours, (s) => s.opsPerSecond)!;
        const base = med(k.results.baseline, (s) => s.opsPerSecond)!;
        const ratios = k.results.ours.map((o, i) => o.opsPerSecond / k.results.baseline[i].opsPerSecond);
        const worst = Math.min(...ratios);
        pass &&= ratios.every((r) => r >= TARGET_RATIO);
        verdicts.push(`${k.name} ${ratios.map((r) => r.toFixed(2)).join(', ')}`);
        k.results.ours.forEach((o, i) =>
          summaryRows.push([String(i + 1), k.name, fmtInt(o.opsPerSecond), fmtInt(k.results.baseline[i].opsPerSecond), ratios[i].toFixed(2), `>= ${TARGET_RATIO}`, verdictWord(ratios[i] >= TARGET_RATIO)]),
        );
        absoluteRows.push([k.name, fmtInt(ours), `>= ${fmtInt(k.absolute)}/s`, ours >= k.absolute ? 'yes' : 'no']);
        figures.push(
          { name: `${k.name} /s`, value: ours },
          { name: `raw SQLite ${k.name} tx/s`, value: base },
          { name: `${k.name}: ratio to raw SQLite`, value: ours / base, digits: 2 },
          { name: `${k.name}: worst round's ratio to raw SQLite`, value: worst, digits: 2 },
          { name: `${k.name}: server CPU µs/op`, value: med(k.results.ours, (s) => s.cpuUsPerOp) ?? NaN },
        );
      }
      tables.push(
        {
          title: `targets per round: ours / raw better-sqlite3 of the same round >= ${TARGET_RATIO}, creates and lists (the verdict)`,
          headers: ['round', 'operation', 'ours /s', 'baseline tx/s', 'ratio', 'target', 'verdict'],
          align: ['l', 'l', 'r', 'r', 'r', 'l', 'l'],
          rows: summaryRows.sort((a, b) => Number(a[0]) - Number(b[0])),
        },
        {
          title: 'the earlier absolute targets, medians (information, not in the verdict)',
          headers: ['operation', 'ours median /s', 'earlier target', 'met'],
          align: ['l', 'r', 'l', 'l'],
          rows: absoluteRows,
        },
      );

      if (profileDir) {
        mkdirSync(profileDir, { recursive: true });
        writeFileSync(join(profileDir, 'data-phases.json'), JSON.stringify(phases));
      }
      const worstOthers = Math.max(0, ...kinds.flatMap((k) => k.results.ours.map((s) => s.othersBusy ?? 0)));
      return {
        tables,
        notes: [
          'ours: requests per second answered 201 (creates) or 200 (lists) by the local server, CPU µs/op and CPU: the server process group; client CPU: the load generator (this process)',
          'baseline: transactions per second of raw better-sqlite3 in this process (WAL, synchronous=NORMAL, a WITHOUT ROWID table of JSON items); CPU: this process, one core',
          "others: share of the whole machine used by other processes meanwhile (noise); the ratio, the target, is what the HTTP, auth and record layers leave of SQLite's floor on this machine",
          ...(worstOthers > 0.1 ? [`warning: other processes used over 10% of the machine during some runs (up to ${fmt(worstOthers * 100, 0)}%); the figures are noisy`] : []),
          `${fmtInt(SEED_RECORDS)} seeded records over ${fmtInt(N_VALUES)} values of n; list pages of ${PAGE}; ${warmup} s warm-up + ${duration} s per run; medians of ${rounds} rounds; PocketBase publishes ~2,000 creates/s on 2 vCPU`,
          ...(profileDir
            ? [
                `CPU profile of the platform written under ${join(profileDir, 'platform')} when it stops; the measured windows are in ${join(profileDir, 'data-phases.json')}:`,
                `  tsx bench/support/profile-summary.ts ${join(profileDir, 'platform')}/<file>.cpuprofile ${join(profileDir, 'data-phases.json')} creates|lists`,
              ]
            : []),
        ],
        figures,
        verdict: { pass, summary: `ours / raw better-sqlite3 per round: ${verdicts.join('; ')} (target >= ${TARGET_RATIO} in every round for both)` },
      };
    } finally {
      baseline?.close();
      await server?.stop();
      temp.remove();
    }
  },
};

/** The monotonic clock in µs: the clock of V8 CPU profiles' timestamps. */
const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

const seedValues = (i: number) => ({ sku: `seed-${i}`, n: i % N_VALUES });

/**
 * Raw better-sqlite3 doing what the platform's storage does for the same calls, laid out like the
 * platform's keys: records, unique guards and index entries as JSON items in one WITHOUT ROWID table.
 */
class SqliteBaseline {
  private readonly db: Database.Database;
  private readonly create: (sku: string, n: number) => void;
  private readonly list: (n: number) => number;
  private nextSku = 0;
  private nextList = 0;

  constructor(file: string) {
    this.db = new Database(file);
    this.db.pragma('journal_mode = WAL');
    this.db.pragma('synchronous = NORMAL');
    this.db.exec('CREATE TABLE kv (pk TEXT NOT NULL, sk TEXT NOT NULL, item TEXT NOT NULL, PRIMARY KEY (pk, sk)) WITHOUT ROWID');
    const insert = this.db.prepare<[string, string, string]>('INSERT INTO kv (pk, sk, item) VALUES (?, ?, ?)');
    const range = this.db.prepare<[string, string, string, number], { sk: string; item: string }>('SELECT sk, item FROM kv WHERE pk = ? AND sk BETWEEN ? AND ? ORDER BY sk LIMIT ?');
    const point = this.db.prepare<[string, string], { item: string }>('SELECT item FROM kv WHERE pk = ? AND sk = ?');
    const [rec, uniq, idx] = ['rec#org#bench#items', 'uniq#org#bench#items#sku@1', 'idx#org#bench#items#n@1'];

    // A record (INSERT fails on an existing id), its sku's guard (fails on a taken sku), its n's entry.
    this.create = this.db.transaction((sku: string, n: number) => {
      const id = `rec_${ulid()}`;
      const at = new Date().toISOString();
      insert.run(rec, id, JSON.stringify({ pk: rec, sk: id, id, version: 1, created_at: at, updated_at: at, sv: 1, values: { sku, n } }));
      insert.run(uniq, sku, JSON.stringify({ pk: uniq, sk: sku, record_id: id }));
      insert.run(idx, `${nKey(n)}\u0001${id}`, JSON.stringify({ pk: idx, sk: `${nKey(n)}\u0001${id}`, id }));
    }).immediate;
    // One page: the index range (one row past the page tells whether more follow), then each record.
    this.list = this.db.transaction((n: number) => {
      const entries = range.all(idx, `${nKey(n)}\u0001`, `${nKey(n)}\u0002`, PAGE + 1);
      let found = 0;
      for (const e of entries.slice(0, PAGE)) if (point.get(rec, e.sk.slice(e.sk.indexOf('\u0001') + 1))) found++;
      return found;
    }).deferred;
  }

  seed(): void {
    const batch = this.db.transaction((start: number) => {
      for (let i = start; i < Math.min(start + BATCH, SEED_RECORDS); i++) {
        const v = seedValues(i);
        this.create(v.sku, v.n);
      }
    });
    for (let start = 0; start < SEED_RECORDS; start += BATCH) batch(start);
    if (this.list(7) !== PAGE) throw new Error('the baseline list does not find a full page');
  }

  /** Runs one kind of transaction back to back for `seconds`. */
  run(kind: 'creates' | 'lists', seconds: number): Sample {
    const machineBefore = machineCpu();
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const deadline = started + seconds * 1000;
    let ops = 0;
    while (performance.now() < deadline) {
      for (let i = 0; i < 32; i++, ops++) {
        if (kind === 'creates') {
          const s = this.nextSku++;
          this.create(`bench-${s}`, CREATED_N_BASE + (s % N_VALUES));
        } else if (this.list(this.nextList++ % N_VALUES) !== PAGE) {
          throw new Error('the baseline list lost records');
        }
      }
    }
    const wall = (performance.now() - started) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    const cpuSeconds = (cpu.user + cpu.system) / 1e6;
    const machineAfter = machineCpu();
    const machineBusy = machineBefore && machineAfter ? (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total) : undefined;
    return {
      opsPerSecond: ops / wall,
      cpuUsPerOp: (cpuSeconds / ops) * 1e6,
      cpuShare: cpuSeconds / wall,
      othersBusy: machineBusy === undefined ? undefined : Math.max(0, machineBusy - cpuSeconds / wall / availableParallelism()),
    };
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}

/** n as a fixed-width sortable key (n >= 0 here), as the platform's index keys sort numbers. */
const nKey = (n: number) => n.toString(16).padStart(16, '0');
