/**
 * `npm run bench [-- name ...]`: runs every benchmark module in bench/ (each `bench/<name>.ts`
 * exporting `benchmark`), in file-name order, and prints their tables and a summary. Missing a target
 * prints FAIL but still exits 0; a benchmark that breaks exits 1.
 *
 * The machine's load average is printed before and after. BENCH_QUIET_LOAD=<n> first waits (up to
 * BENCH_QUIET_WAIT_S, 300 s) until the 1-minute load average is below n, e.g. BENCH_QUIET_LOAD=1.
 *
 * `npm run bench -- --workers 1,2 [name ...]`: each benchmark once per LOCAL_WORKERS value, alternating
 * them (1, 2, then 2, 1 ...) for BENCH_WORKER_ROUNDS rounds (2), then one table of every run's headline
 * figures, the benchmarks' own baselines among them, side by side: the worker-count comparison of
 * docs/decisions/local-runtime.md in one command.
 *
 * Any other `--<name> <value>` sets the environment knob BENCH_<NAME>: `npm run bench -- vector --n 5000`.
 */
import { readdirSync } from 'node:fs';
import { loadavg } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { formatTable } from './support/table.js';
import type { Benchmark, BenchReport } from './support/types.js';
import { useSettings } from '../lambdas/shared/settings.js';
import { envNumber } from './support/env.js';
import { workerCountTable } from './support/worker-count.js';

const BENCH_DIR = import.meta.dirname;
const args = process.argv.slice(2);
const workersAt = args.indexOf('--workers');
const workerCounts = workersAt >= 0 ? args.splice(workersAt, 2)[1]?.split(',').map(Number) : undefined;
if (workerCounts && (!workerCounts.length || workerCounts.some((n) => !Number.isInteger(n) || n < 1))) {
  process.stderr.write('--workers takes worker counts separated by commas, e.g. --workers 1,2\n');
  process.exit(2);
}
// `--<name> <value>` (other than --workers) sets BENCH_<NAME> for the benchmarks: `-- vector --n 5000`.
for (let at = args.findIndex((a) => a.startsWith('--')); at >= 0; at = args.findIndex((a) => a.startsWith('--'))) {
  const [flag, value] = args.splice(at, 2);
  if (value === undefined) {
    process.stderr.write(`${flag} takes a value\n`);
    process.exit(2);
  }
  process.env[`BENCH_${flag.slice(2).toUpperCase().replace(/-/g, '_')}`] = value;
}
const wanted = args;

const files = readdirSync(BENCH_DIR)
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts') && f !== 'run.ts')
  .sort();
const benchmarks: Benchmark[] = [];
for (const file of files) {
  const mod = (await import(pathToFileURL(join(BENCH_DIR, file)).href)) as { benchmark?: Benchmark };
  if (!mod.benchmark) throw new Error(`bench/${file} exports no benchmark`);
  if (!wanted.length || wanted.includes(mod.benchmark.name)) benchmarks.push(mod.benchmark);
}
const unknown = wanted.filter((w) => !benchmarks.some((b) => b.name === w));
if (unknown.length) {
  process.stderr.write(`no benchmark named ${unknown.join(', ')}; there are: ${files.map((f) => f.replace(/\.ts$/, '')).join(', ')}\n`);
  process.exit(2);
}

// Ctrl-C / kill: exit through process.exit so the children's 'exit' safety net runs.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(130));

const loadText = () => loadavg().map((l) => l.toFixed(2)).join(' ');
const quietLoad = Number(process.env.BENCH_QUIET_LOAD ?? 0);
if (quietLoad > 0) {
  const waitS = Number(process.env.BENCH_QUIET_WAIT_S ?? 300);
  const started = Date.now();
  process.stdout.write(`waiting up to ${waitS} s for the 1-minute load average to drop below ${quietLoad} (now ${loadText()})\n`);
  while (loadavg()[0] >= quietLoad && Date.now() - started < waitS * 1000) await sleep(5_000);
  process.stdout.write(`${loadavg()[0] < quietLoad ? 'quiet' : 'still busy, running anyway'} after ${Math.round((Date.now() - started) / 1000)} s\n`);
}
process.stdout.write(`load average (1, 5, 15 min) at the start: ${loadText()}\n`);

const summary: string[][] = [];
let broken = false;
/** Runs one benchmark and prints its tables; undefined when it broke. */
async function runOne(b: Benchmark, label = ''): Promise<BenchReport | undefined> {
  process.stdout.write(`\n== ${b.name}${label}: ${b.title}\n`);
  const started = Date.now();
  try {
    const report = await b.run((line) => process.stdout.write(`   ${line}\n`));
    for (const table of report.tables) process.stdout.write(`\n${formatTable(table)}\n`);
    if (report.notes?.length) process.stdout.write(`\n${report.notes.map((n) => `   ${n}`).join('\n')}\n`);
    summary.push([`${b.name}${label}`, report.verdict ? (report.verdict.pass ? 'PASS' : 'FAIL') : '-', report.verdict?.summary ?? '', `${Math.round((Date.now() - started) / 1000)} s`]);
    return report;
  } catch (error) {
    broken = true;
    process.stderr.write(`\n${b.name}${label} broke: ${(error as Error)?.stack ?? error}\n`);
    summary.push([`${b.name}${label}`, 'BROKEN', String((error as Error)?.message ?? error).split('\n')[0], `${Math.round((Date.now() - started) / 1000)} s`]);
    return undefined;
  }
}

if (!workerCounts) {
  for (const b of benchmarks) await runOne(b);
} else {
  const rounds = envNumber('BENCH_WORKER_ROUNDS', 2);
  const runs: { bench: string; workers: number; round: number; report?: BenchReport }[] = [];
  for (let round = 1; round <= rounds; round++) {
    for (const b of benchmarks) {
      // Alternating the order: a machine that gets busier or quieter during the run favours neither.
      for (const workers of round % 2 ? workerCounts : [...workerCounts].reverse()) {
        process.env.LOCAL_WORKERS = String(workers);
        useSettings();
        runs.push({ bench: b.name, workers, round, report: await runOne(b, ` (LOCAL_WORKERS=${workers}, round ${round}/${rounds})`) });
      }
    }
  }
  process.stdout.write(`\n${formatTable(workerCountTable(runs, workerCounts))}\n`);
}

process.stdout.write(`\nload average (1, 5, 15 min) at the end: ${loadText()}\n`);
process.stdout.write(`\n${formatTable({ title: 'Summary', headers: ['benchmark', 'verdict', 'figure', 'took'], rows: summary })}\n`);
process.exitCode = broken ? 1 : 0;
