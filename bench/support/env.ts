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
