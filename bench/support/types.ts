/** What a benchmark module (bench/<name>.ts) exports as `benchmark`; bench/run.ts runs them all. */
import type { Table } from './table.js';

export interface Verdict {
  pass: boolean;
  /** One line: the figure against its target. */
  summary: string;
}

export interface BenchReport {
  tables: Table[];
  notes?: string[];
  verdict?: Verdict;
}

export interface Benchmark {
  /** Short name, used to pick benchmarks: `npm run bench -- models`. */
  name: string;
  title: string;
  /** Throws when something broke (not when the target is missed). `progress` prints one line. */
  run(progress: (line: string) => void): Promise<BenchReport>;
}
