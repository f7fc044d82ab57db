/** The benchmark knobs read from the environment. */
import { resolve } from 'node:path';

/** A positive number from `name`, or `fallback` when unset. */
export function envNumber(name: string, fallback: number): number {
  const v = Number(process.env[name] ?? fallback);
  if (!Number.isFinite(v) || v <= 0) throw new Error(`${name} must be a positive number`);
  return v;
}

/** BENCH_PROFILE_DIR, absolute: where servers write CPU profiles (none when unset). */
export const profileDirFromEnv = () => (process.env.BENCH_PROFILE_DIR ? resolve(process.env.BENCH_PROFILE_DIR) : undefined);

/** The knobs every load benchmark reads. */
export function loadSettings() {
  return {
    rounds: envNumber('BENCH_ROUNDS', 3),
    warmup: envNumber('BENCH_WARMUP_S', 5),
    duration: envNumber('BENCH_DURATION_S', 10),
    connections: envNumber('BENCH_CONNECTIONS', 32),
    profileDir: profileDirFromEnv(),
  };
}
