/** What a benchmark module (bench/<name>.ts) exports as `benchmark`; bench/run.ts runs them all. */
import type { Table } from './table.js';

export interface Verdict {
  pass: boolean;
  /** One line: the figure against its target. */
  summary: string;
}

/** One headline figure of a run, so runs can be set side by side (`npm run bench -- --workers 1,2`). */
export interface Figure {
  /** What was measured, with its unit: "creates /s", "raw SQLite creates tx/s". */
  name: string;
  value: number;
  /** Digits after the point when printed (default 0). */
  digits?: number;
}

export interface BenchReport {
  tables: Table[];
  notes?: string[];
  verdict?: Verdict;
  /** The run's headline figures, its own baselines among them (medians of its rounds). */
  figures?: Figure[];
}

export interface Benchmark {
  /** Short name, used to pick benchmarks: `npm run bench -- models`. */
  name: string;
  title: string;
  /** Throws when something broke (not when the target is missed). `progress` prints one line. */
  run(progress: (line: string) => void): Promise<BenchReport>;
}
