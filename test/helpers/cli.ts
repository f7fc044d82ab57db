/** Runs the admin CLI as a user would: a child process, JSON on stdout, errors on stderr. */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const TSX = join(ROOT, 'node_modules', '.bin', 'tsx');

export interface CliResult {
  status: number | null;
  stdout: string;
  stderr: string;
  json: any;
}

export function admin(dataDir: string, ...args: string[]): CliResult {
  const r = spawnSync(TSX, [join(ROOT, 'bin', 'admin.ts'), ...args], {
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
