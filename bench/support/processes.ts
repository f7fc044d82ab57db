/**
 * Child processes for the benchmarks: servers run in their own process group (tsx starts a second
 * node process under its own), so stopping one ends all of it, and nothing outlives the bench.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const ROOT = join(import.meta.dirname, '..', '..');
export const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

const live = new Set<ChildProcess>();
const tempDirs = new Set<string>();

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // the group is gone already
  }
}

// Last resort when the bench exits without cleaning up (Ctrl-C, a throw): no orphans, no temp dirs.
process.once('exit', () => {
  for (const child of live) signalGroup(child, 'SIGKILL');
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

/** A fresh directory under the OS temp dir, removed by `remove()` or, failing that, when the bench exits. */
export function makeTempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.add(path);
  return {
    path,
    remove: () => {
      rmSync(path, { recursive: true, force: true });
      tempDirs.delete(path);
    },
  };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export interface ServerProcess {
  name: string;
  /** The process group id (the tsx process's pid). */
  pgid: number;
  output(): string;
  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once the tsx process has exited. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Starts `tsx <script>` in its own process group and waits until its output matches `ready`. With
 * `nodeArgs` (flags NODE_OPTIONS refuses, such as --cpu-prof) it runs `node <nodeArgs> --import tsx <script>`.
 * With `plain` (a built JavaScript file, e.g. a package's server) it runs `node <nodeArgs> <script>`
 * without tsx; `args` go after the script either way.
 */
export async function startServer(
  name: string,
  script: string,
  env: Record<string, string>,
  ready: RegExp,
  options: { nodeArgs?: string[]; timeoutMs?: number; plain?: boolean; args?: string[] } = {},
): Promise<ServerProcess> {
  const timeoutMs = options.timeoutMs ?? 60_000;
  const scriptArgs = options.args ?? [];
  const [command, args] = options.plain
    ? [process.execPath, [...(options.nodeArgs ?? []), script, ...scriptArgs]]
    : options.nodeArgs
      ? [process.execPath, [...options.nodeArgs, '--import', 'tsx', script, ...scriptArgs]]
      : [TSX, [script, ...scriptArgs]];
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  let out = '';
  const collect = (d: Buffer) => {
    if (out.length < 64_000) out += d.toString();
  };
  child.stdout!.on('data', collect);
  child.stderr!.on('data', collect);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  exited.then(() => {
    live.delete(child);
    // tsx's own node child may still be running if tsx was killed hard.
    signalGroup(child, 'SIGKILL');
  });

  const stop = async (graceMs = 5_000) => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    signalGroup(child, 'SIGTERM');
    const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs);
    await exited;
    clearTimeout(timer);
  };

  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name} did not start within ${timeoutMs} ms`)), timeoutMs);
      const check = () => {
        if (ready.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      };
      child.stdout!.on('data', check);
      child.once('error', (e) => reject(e));
      exited.then(() => reject(new Error(`${name} exited (${child.exitCode ?? child.signalCode}) before it was ready`)));
    });
  } catch (error) {
    await stop(1_000);
    throw new Error(`${(error as Error).message}\n--- ${name} output ---\n${out}`);
  }
  return { name, pgid: child.pid!, output: () => out, stop };
}

/** Runs `tsx <script> ...args` to completion; returns stdout, throws with stderr on failure. */
export function runScript(script: string, args: string[], env: Record<string, string>): string {
  const r = spawnSync(TSX, [script, ...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8', timeout: 60_000 });
  if (r.status !== 0) throw new Error(`tsx ${script} ${args.join(' ')} exited ${r.status ?? r.signal}: ${r.stderr}`);
  return r.stdout;
}

let ticksPerSecond: number | undefined;

/**
 * CPU seconds used so far (user, system) by every live process in a process group, from /proc.
 * Undefined where /proc is not there (not Linux).
 */
export function groupCpuSeconds(pgid: number): { user: number; system: number } | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  ticksPerSecond ??= clockTicks();
  let user = 0;
  let system = 0;
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue;
    }
    // Fields after "(comm)": state ppid pgrp ... utime (14th field overall) stime (15th).
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== pgid) continue;
    user += Number(fields[11]);
    system += Number(fields[12]);
  }
  return { user: user / ticksPerSecond, system: system / ticksPerSecond };
}

/** Cumulative busy and total ticks of all cores, from the `cpu` line of /proc/stat. */
export function machineCpu(): { busy: number; total: number } | undefined {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
    const ticks = line.trim().split(/\s+/).slice(1).map(Number);
    const total = ticks.reduce((a, b) => a + b, 0);
    // idle and iowait are the 4th and 5th columns.
    return { busy: total - ticks[3] - (ticks[4] ?? 0), total };
  } catch {
    return undefined;
  }
}

export function clockTicks(): number {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
}

/** The process group of `pid` (this process by default), from /proc; undefined without /proc. */
export function processGroupOf(pid: number | 'self' = 'self'): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after "(comm)": state ppid pgrp ...
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
  } catch {
    return undefined;
  }
}
