/** The worker-count comparison (`npm run bench -- --workers 1,2`): every run's headline figures side by side. */
import type { BenchReport } from './types.js';
import { median } from './load.js';
import { fmt, fmtInt, type Table } from './table.js';

export interface WorkerRun {
  bench: string;
  workers: number;
  round: number;
  /** Undefined when the run broke. */
  report?: BenchReport;
}

/**
 * One row per benchmark and figure; per worker count, the value of every round (in round order) and
 * their median; last, the median of the last count over the first's.
 */
export function workerCountTable(runs: WorkerRun[], counts: number[]): Table {
  const rows: string[][] = [];
  const benches = [...new Set(runs.map((r) => r.bench))];
  for (const bench of benches) {
    const names = [...new Set(runs.filter((r) => r.bench === bench).flatMap((r) => r.report?.figures?.map((f) => f.name) ?? []))];
    for (const name of names) {
      const cells: string[] = [];
      const medians: number[] = [];
      let digits = 0;
      const show = (v: number) => (digits ? fmt(v, digits) : Number.isFinite(v) ? fmtInt(v) : 'n/a');
      for (const workers of counts) {
        const values = runs
          .filter((r) => r.bench === bench && r.workers === workers)
          .sort((a, b) => a.round - b.round)
          .map((r) => {
            const f = r.report?.figures?.find((x) => x.name === name);
            digits = f?.digits ?? digits;
            return f?.value;
          });
        const known = values.filter((v): v is number => v !== undefined && Number.isFinite(v));
        const m = known.length ? median(known) : NaN;
        medians.push(m);
        cells.push(values.map((v) => (v === undefined ? '-' : show(v))).join(' / '), show(m));
      }
      const first = medians[0];
      const last = medians[medians.length - 1];
      rows.push([bench, name, ...cells, counts.length > 1 ? fmt(last / first, 2) : '']);
    }
  }
  return {
    title: `worker count: each figure per LOCAL_WORKERS value, every round (in order) and the median; last column: ${counts[counts.length - 1]} over ${counts[0]}`,
    headers: ['benchmark', 'figure', ...counts.flatMap((n) => [`${n} worker${n === 1 ? '' : 's'}, rounds`, 'median']), `${counts[counts.length - 1]} / ${counts[0]}`],
    align: ['l', 'l', ...counts.flatMap(() => ['r', 'r'] as const), 'r'],
    rows,
  };
}
