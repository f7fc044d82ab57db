/**
 * Runs the admin CLI as a user would: a child process, JSON on stdout, errors on stderr. The process
 * is plain `node` on the bundle test/setup/admin-cli.ts built for this run from bin/admin.ts (tsx in
 * every process cost most of the suite's CLI time); `via: 'npm'` runs `npm run --silent admin` itself.
 */
import { execFile, spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { inject } from 'vitest';

const ROOT = join(import.meta.dirname, '..', '..');

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

export function admin(dataDir: string, ...args: string[]): CliResult {
  return run(dataDir, process.execPath, [inject('adminCli'), ...args]);
}

/** As a user types it, through npm and tsx: for the one test of the entry point itself. */
export function adminViaNpm(dataDir: string, ...args: string[]): CliResult {
  return run(dataDir, 'npm', ['run', '--silent', 'admin', '--', ...args]);
}

/**
 * As admin(), without blocking this process: for a command that calls a fake upstream served by the
 * test itself (`vector-db create` embeds once), which a blocked event loop could not answer.
 */
export function adminAsync(dataDir: string, ...args: string[]): Promise<CliResult> {
  return runAsync(envFor(dataDir), args);
}

/**
 * As adminAsync(), on the store `env` selects rather than a DATA_DIR: `ENGINE=aws` with the variables
 * of emulators this process serves (aws-emulators.ts), which a blocked event loop could not answer.
 */
export function adminOn(env: Record<string, string>, ...args: string[]): Promise<CliResult> {
  return runAsync({ ...process.env, ...env }, args);
}

function runAsync(env: NodeJS.ProcessEnv, args: string[]): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [inject('adminCli'), ...args], { cwd: ROOT, env, encoding: 'utf8', timeout: 30_000 }, (_error, stdout, stderr) =>
      resolve(result(child.exitCode, stdout, stderr)),
    );
  });
}

const envFor = (dataDir: string) => ({ ...process.env, DATA_DIR: dataDir, ENGINE: 'embedded' });

function run(dataDir: string, command: string, args: string[]): CliResult {
  const r = spawnSync(command, args, { cwd: ROOT, env: envFor(dataDir), encoding: 'utf8', timeout: 30_000 });
  return result(r.status, r.stdout, r.stderr);
}

function result(status: number | null, stdout: string, stderr: string): CliResult {
  let json: unknown;
  try {
    json = JSON.parse(stdout);
  } catch {
    json = undefined;
  }
  return { status, stdout, stderr, json };
}

/** Like admin(), but fails the test with the CLI's stderr when the command fails. */
export function adminOk(dataDir: string, ...args: string[]): any {
  return okOf(admin(dataDir, ...args), args);
}

/** Like adminAsync(), failing as adminOk() does. */
export async function adminAsyncOk(dataDir: string, ...args: string[]): Promise<any> {
  return okOf(await adminAsync(dataDir, ...args), args);
}

function okOf(r: CliResult, args: string[]): any {
  if (r.status !== 0) throw new Error(`admin ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.json;
}
