/**
 * `bin/local.ts` as a child process, as a user starts it: for the tests of `npm start` itself (its
 * lifecycle, its worker processes, a crash). It runs in a process group of its own, so a crash can be
 * made of all its processes at once.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { Api } from '../../lambdas/shared/api.js';
import { registerApiOrigins } from './platform-origins.js';

const ROOT = join(import.meta.dirname, '..', '..');

export interface LocalProcess {
  child: ChildProcess;
  urls: Record<Api, string>;
  /** Everything it printed so far, stdout and stderr. */
  output(): string;
}

/**
 * Starts `bin/local.ts` with `env` over the defaults (free ports, silent logs) and resolves once it
 * printed the Events API's URL. `via: 'tsx'` runs it through the tsx CLI (which runs the server in a
 * child and relays SIGINT/SIGTERM); `'node'` (default) runs it as `npm start` does, node with tsx's
 * loader: the server itself is the child, so a signal reaches it and not a CLI in front of it.
 */
export async function startLocalProcess(env: Record<string, string>, options: { via?: 'node' | 'tsx' } = {}): Promise<LocalProcess> {
  const [command, args] =
    options.via === 'tsx' ? [join(ROOT, 'node_modules', '.bin', 'tsx'), ['bin/local.ts']] : [process.execPath, ['--import', 'tsx', 'bin/local.ts']];
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, AI_PORT: '0', DATA_PORT: '0', EVENTS_PORT: '0', OPS_PORT: '0', CONSOLE_PORT: '0', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start within 30 s: ${out}`)), 30_000);
    child.stdout!.on('data', () => {
      if (/Events API\s+http:\S+/.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`exited ${code ?? signal}: ${out}`));
    });
  });
  const url = (name: string) => new RegExp(`${name} API\\s+(http:\\S+)`).exec(out)![1];
  const urls = { ai: url('AI'), data: url('Data'), events: url('Events') };
  registerApiOrigins(urls);
  return { child, urls, output: () => out };
}

/** Sends `signal` to the started process only; resolves with its exit code. */
export function stopLocalProcess(p: LocalProcess, signal: NodeJS.Signals): Promise<number | null> {
  return new Promise((resolve) => {
    if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve(p.child.exitCode);
    p.child.once('exit', (code) => resolve(code));
    p.child.kill(signal);
  });
}

/** A crash: SIGKILL to every process of its group at once (primary and workers). */
export function crashLocalProcess(p: LocalProcess): Promise<void> {
  return new Promise((resolve) => {
    if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
    p.child.once('exit', () => resolve());
    try {
      process.kill(-p.child.pid!, 'SIGKILL');
    } catch {
      resolve();
    }
  });
}

/** A started `npm start` for a test file, with the tenant it bootstrapped. */
export interface UsedLocalProcess {
  dataDir: string;
  local: LocalProcess;
  /** The bootstrapped organization and its secret key (credentials.json). */
  org: string;
  key: string;
}

/**
 * For the tests of a file (or describe block): `startLocalProcess(env)` on a fresh data dir before them,
 * a crash of all its processes and the dir removed after. The returned object is filled in before the
 * block's own beforeAll hooks run (hooks run in the order they are registered), so they can use it.
 */
export function useLocalProcess(prefix: string, env: Record<string, string> = {}): UsedLocalProcess {
  const used = {} as UsedLocalProcess;
  beforeAll(async () => {
    used.dataDir = mkdtempSync(join(tmpdir(), prefix));
    used.local = await startLocalProcess({ DATA_DIR: used.dataDir, LOG_LEVEL: 'warn', ...env });
    const credentials = JSON.parse(readFileSync(join(used.dataDir, 'credentials.json'), 'utf8'));
    used.org = credentials.organization_id;
    used.key = credentials.secret_key;
  }, 60_000);
  afterAll(async () => {
    if (used.local) await crashLocalProcess(used.local);
    if (used.dataDir) rmSync(used.dataDir, { recursive: true, force: true });
  });
  return used;
}

/**
 * The primary's children running bin/local.ts (tsx also starts an esbuild service beside them): the
 * workers serving the APIs and the background processes, with their nice value.
 */
export function localChildren(p: LocalProcess): { pid: number; nice: number; background: boolean }[] {
  return execFileSync('ps', ['-o', 'pid=,ni=,args=', '--ppid', String(p.child.pid)], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes('bin/local.ts'))
    .map((line) => {
      const [pid, nice] = line.trim().split(/\s+/);
      return { pid: Number(pid), nice: Number(nice), background: line.includes('--platform-background') };
    });
}

/** The pids of the workers serving the APIs, sorted. */
export const servingPids = (p: LocalProcess) =>
  localChildren(p)
    .filter((c) => !c.background)
    .map((c) => c.pid)
    .sort();
