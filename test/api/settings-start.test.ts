/**
 * A bad setting stops the start (docs/settings.md): `npm start` (bin/local.ts, one process or
 * several) and the admin CLI exit with code 1 and a message naming the variable, without a stack
 * trace, before opening anything or listening.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');
const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const emptyDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'settings-start-'));
  dirs.push(dir);
  return dir;
};

/** A process that is still running after this long has started anyway: it is stopped and reported so. */
const GIVE_UP_MS = 20_000;

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
  /** True when it had to be stopped (it did not exit by itself). */
  stopped: boolean;
}

/**
 * Runs a script of bin/ as a user does, in a process group of its own (so a server that did start,
 * workers included, can be stopped whole), and resolves once it exits; `until` stops it early once
 * its output matches (for the runs expected to start).
 */
function run(args: string[], env: Record<string, string>, options: { command?: string; until?: RegExp } = {}): Promise<Run> {
  const started = Date.now();
  const child = spawn(options.command ?? process.execPath, args, {
    cwd: ROOT,
    env: { ...process.env, AI_PORT: '0', DATA_PORT: '0', EVENTS_PORT: '0', OPS_PORT: '0', CONSOLE_PORT: '0', LOG_LEVEL: 'warn', ENGINE: 'embedded', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  let stdout = '';
  let stderr = '';
  let stopped = false;
  const stop = () => {
    if (stopped || child.exitCode !== null || child.signalCode !== null) return;
    stopped = true;
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  child.stdout!.on('data', (d) => {
    stdout += d;
    if (options.until?.test(stdout)) stop();
  });
  child.stderr!.on('data', (d) => (stderr += d));
  const timer = setTimeout(stop, GIVE_UP_MS);
  return new Promise((resolve) => {
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, ms: Date.now() - started, stopped });
    });
  });
}

const local = (env: Record<string, string>, options?: { command?: string; until?: RegExp }) =>
  run(options?.command ? ['bin/local.ts'] : ['--import', 'tsx', 'bin/local.ts'], env, options);
const admin = (env: Record<string, string>, ...args: string[]) => run(['--import', 'tsx', 'bin/admin.ts', ...args], env);

const API_URL = /API\s+http:\/\//;
/** A stack trace's frames, as node prints an uncaught error. */
const STACK_FRAME = /^\s+at \S/m;

/** What every refused start shows: exit 1 on its own, quickly, the variable named, no stack, nothing served or written. */
function expectRefused(r: Run, variables: string[], dataDir: string) {
  expect(r.stopped, `it kept running: ${r.stdout}${r.stderr}`).toBe(false);
  expect(r.code).toBe(1);
  expect(r.ms).toBeLessThan(15_000);
  for (const variable of variables) expect(r.stderr).toContain(`${variable}=`);
  expect(r.stderr).not.toMatch(STACK_FRAME);
  expect(r.stderr).not.toContain('SettingsError');
  expect(r.stdout + r.stderr).not.toMatch(API_URL);
  expect(readdirSync(dataDir)).toEqual([]); // no database opened, no tenant bootstrapped
}

describe('npm start with a bad setting', () => {
  it('starts and prints its URLs when the settings are valid (the harness itself)', async () => {
    const r = await local({ DATA_DIR: emptyDir(), LOCAL_WORKERS: '1', CREDENTIAL_CACHE_MS: '100' }, { until: /Events API\s+http:\S+/ });
    expect(r.stdout).toMatch(API_URL);
    expect(r.stopped).toBe(true);
  }, 30_000);

  it('CREDENTIAL_CACHE_MS=abc: exits with code 1 naming the variable, without a stack trace, never listening', async () => {
    const dataDir = emptyDir();
    const r = await local({ DATA_DIR: dataDir, LOCAL_WORKERS: '1', CREDENTIAL_CACHE_MS: 'abc' });
    expectRefused(r, ['CREDENTIAL_CACHE_MS'], dataDir);
    expect(r.stderr).toContain('CREDENTIAL_CACHE_MS="abc": must be a whole number');
  }, 30_000);

  it('with LOCAL_WORKERS=2: the primary refuses once, before forking any worker', async () => {
    const dataDir = emptyDir();
    const r = await local({ DATA_DIR: dataDir, LOCAL_WORKERS: '2', LOG_LEVEL: 'loud', AI_PORT: '70000' });
    expectRefused(r, ['LOG_LEVEL', 'AI_PORT'], dataDir);
    expect(r.stderr.match(/Invalid settings/g)).toHaveLength(1); // one message: no worker was started to repeat it
  }, 30_000);

  it('a bad LOCAL_WORKERS itself is refused', async () => {
    const dataDir = emptyDir();
    const r = await local({ DATA_DIR: dataDir, LOCAL_WORKERS: '0' });
    expectRefused(r, ['LOCAL_WORKERS'], dataDir);
    expect(r.stderr).toContain('must be at least 1');
  }, 30_000);

  it('through the tsx CLI, as `npm start` runs it, the exit code is 1 too', async () => {
    const dataDir = emptyDir();
    const r = await local({ DATA_DIR: dataDir, LOCAL_WORKERS: '2', CREDENTIAL_CACHE_MS: '999999' }, { command: TSX });
    expectRefused(r, ['CREDENTIAL_CACHE_MS'], dataDir);
    expect(r.stderr).toContain('must be at most 60000');
  }, 30_000);
});

describe('npm run admin with a bad setting', () => {
  it('runs the command when the settings are valid (the harness itself)', async () => {
    const r = await admin({ DATA_DIR: emptyDir(), CREDENTIAL_CACHE_MS: '100' }, 'org', 'create', '--name', 'Acme');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ name: 'Acme' });
  }, 30_000);

  it('exits with code 1, the error in its JSON shape naming the variable, without a stack trace', async () => {
    const dataDir = emptyDir();
    const r = await admin({ DATA_DIR: dataDir, CREDENTIAL_CACHE_MS: 'abc', ENGINE: 'mysql' }, 'org', 'create', '--name', 'Acme');
    expectRefused(r, ['CREDENTIAL_CACHE_MS', 'ENGINE'], dataDir);
    expect(r.stdout).toBe('');
    const { error } = JSON.parse(r.stderr) as { error: string };
    expect(error).toContain('CREDENTIAL_CACHE_MS="abc": must be a whole number');
    expect(error).toContain('ENGINE="mysql"');
    expect(error).not.toMatch(STACK_FRAME);
  }, 30_000);
});
