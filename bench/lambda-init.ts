/**
 * `npm run bench -- lambda-init`: each function's bundle, built with the stack's esbuild settings, imported
 * alone by a fresh `node` as Lambda's init does (test/helpers/lambda-bundles.ts runAlone), against a
 * bare bundle holding one DynamoDB document client (bench/support/bare-lambda.ts), built the same way
 * and measured in the same run. Target: every function's import ≤ 1.5× the bare bundle's, in
 * every round.
 *
 * After ten imports to warm up, each round takes, for every function in a new random order, BENCH_SAMPLES imports of the bare bundle and of the
 * function alternated, and compares their medians: a burst of load hits both sides of a pair. The
 * import time is what the runner measures around `await import()` (reading, compiling and evaluating
 * the module), not the process's start, which is the same for both.
 *
 * Knobs: BENCH_ROUNDS (3), BENCH_SAMPLES (3), BENCH_LAMBDA_FUNCTIONS (comma-separated names: some only,
 * then there is no verdict).
 */
import { join } from 'node:path';
import { envNumber } from './support/env.js';
import { makeTempDir, ROOT } from './support/processes.js';
import { fmt } from './support/table.js';
import type { Benchmark, BenchReport } from './support/types.js';
import { buildBundles, runAlone, stackFunctions, type StackFunction } from '../test/helpers/lambda-bundles.js';

const keyOf = (f: StackFunction) => `${f.kind}:${f.name}`;

const TARGET_RATIO = 1.5;
const BARE = 'bare (one DynamoDB document client)';

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

async function importMs(file: string, environment: Record<string, string>): Promise<number> {
  const outcome = await runAlone(file, { environment });
  if (outcome.loadError || outcome.loadMs === undefined) throw new Error(`${file} did not load: ${outcome.loadError}\n${outcome.output}`);
  return outcome.loadMs;
}

export const benchmark: Benchmark = {
  name: 'lambda-init',
  title: "Lambda functions' import time and size, against a bare bundle with one DynamoDB document client",
  async run(progress): Promise<BenchReport> {
    const rounds = envNumber('BENCH_ROUNDS', 3);
    const samples = envNumber('BENCH_SAMPLES', 3);
    const only = process.env.BENCH_LAMBDA_FUNCTIONS?.split(',').filter(Boolean);
    const { functions: all } = stackFunctions();
    const functions = only ? all.filter((f) => only.includes(f.name)) : all;
    const temp = makeTempDir('bench-lambda-init-');
    try {
      const bundles = await buildBundles(
        [...functions.map((f) => ({ key: keyOf(f), entry: f.entry, define: f.define })), { key: BARE, entry: join(ROOT, 'bench/support/bare-lambda.ts') }],
        temp.path,
      );
      const bare = bundles.get(BARE)!;
      progress(`${functions.length} functions built; bare bundle ${fmt(bare.bytes / 1024, 0)} KiB`);

      // ratios[function][round], and the medians behind them.
      const ratios = new Map<string, number[]>();
      const ms = new Map<string, number[]>();
      const bareMs: number[] = [];
      // The first imports after the build run slower (page cache, the build's processes winding down).
      for (let i = 0; i < 10; i++) await importMs(bare.file, {});
      for (let round = 1; round <= rounds; round++) {
        // A new order each round: a slow spell of the machine does not always land on the same functions.
        const order = [...functions].sort(() => Math.random() - 0.5);
        for (const f of order) {
          const own: number[] = [];
          const floor: number[] = [];
          for (let i = 0; i < samples; i++) {
            floor.push(await importMs(bare.file, { TABLE_NAME: 'placeholder' }));
            own.push(await importMs(bundles.get(keyOf(f))!.file, f.environment));
          }
          const ratio = median(own) / median(floor);
          (ratios.get(keyOf(f)) ?? ratios.set(keyOf(f), []).get(keyOf(f))!).push(ratio);
          (ms.get(keyOf(f)) ?? ms.set(keyOf(f), []).get(keyOf(f))!).push(median(own));
          bareMs.push(median(floor));
        }
        const worst = Math.max(...[...ratios.values()].map((r) => r[round - 1]));
        progress(`round ${round}/${rounds}: worst ratio ${fmt(worst, 2)}, bare median ${fmt(median(bareMs.slice(-functions.length)), 1)} ms`);
      }

      const rows = functions
        .map((f) => {
          const r = ratios.get(keyOf(f))!;
          const worst = Math.max(...r);
          return { f, r, worst, bytes: bundles.get(keyOf(f))!.bytes };
        })
        .sort((a, b) => b.worst - a.worst)
        .map(({ f, r, worst, bytes }) => [
          f.name,
          f.kind,
          fmt(bytes / 1024, 0),
          fmt(median(ms.get(keyOf(f))!), 1),
          r.map((x) => fmt(x, 2)).join(' / '),
          worst <= TARGET_RATIO ? 'pass' : 'FAIL',
        ]);
      rows.push([BARE, 'baseline', fmt(bare.bytes / 1024, 0), fmt(median(bareMs), 1), '1', '']);
      const failing = functions.filter((f) => Math.max(...ratios.get(keyOf(f))!) > TARGET_RATIO);
      const worstAll = Math.max(...[...ratios.values()].flat());
      const sizes = functions.map((f) => bundles.get(keyOf(f))!.bytes);
      return {
        tables: [
          {
            title: `Import time alone, as Lambda's init (median of ${samples} alternated imports a round; ratio to the bare bundle, per round)`,
            headers: ['function', 'kind', 'KiB', 'import ms', 'ratio per round', `≤ ${TARGET_RATIO}×`],
            rows,
            align: ['l', 'l', 'r', 'r', 'r', 'l'],
          },
        ],
        notes: [
          `bundle sizes: ${fmt(Math.min(...sizes) / 1024, 0)} to ${fmt(Math.max(...sizes) / 1024, 0)} KiB (bare ${fmt(bare.bytes / 1024, 0)} KiB)`,
          `node ${process.version}; the bundles target node22 as Lambda runs them`,
        ],
        verdict: only
          ? undefined
          : {
              pass: failing.length === 0,
              summary: `worst import ${fmt(worstAll, 2)}× the bare bundle's (target ≤ ${TARGET_RATIO}× in every round)${failing.length ? `; over it: ${failing.map((f) => f.name).join(', ')}` : ''}`,
            },
      };
    } finally {
      temp.remove();
    }
  },
};
