/**
 * Runs the admin CLI as a user would: a child process, JSON on stdout, errors on stderr. The process
 * is plain `node` on the bundle test/setup/admin-cli.ts built for this run from bin/admin.ts (tsx in
 * every process cost most of the suite's CLI time); `via: 'npm'` runs `npm run --silent admin` itself.
 */
import { spawnSync } from 'node:child_process';
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

function run(dataDir: string, command: string, args: string[]): CliResult {
  const r = spawnSync(command, args, {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, ENGINE: 'embedded' },
    encoding: 'utf8',
    timeout: 30_000,
  });
  let json: unknown;
  try {
    json = JSON.parse(r.stdout);
  } catch {
    json = undefined;
  }
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, json };
}

/** Like admin(), but fails the test with the CLI's stderr when the command fails. */
export function adminOk(dataDir: string, ...args: string[]): any {
  const r = admin(dataDir, ...args);
  if (r.status !== 0) throw new Error(`admin ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return r.json;
}
