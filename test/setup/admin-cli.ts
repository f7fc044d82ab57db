/**
 * Vitest global setup: the admin CLI (bin/admin.ts) bundled once per run with esbuild, so the tests
 * that run it as a user would (a child process, JSON on stdout, errors on stderr) start plain `node`
 * on one file: about 0.3 s a command instead of tsx compiling the sources again in every process
 * (0.9 s, several seconds on a loaded machine; a hundred commands run in the suite). The same sources,
 * the same esbuild; `test/cli/admin.test.ts` still runs `npm run admin` itself once.
 */
import { build } from 'esbuild';
import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';

const ROOT = join(import.meta.dirname, '..', '..');

declare module 'vitest' {
  export interface ProvidedContext {
    adminCli: string;
  }
}

export default async function setup(project: TestProject) {
  // Inside node_modules so the native packages left out (better-sqlite3, hnswlib-node) resolve from it.
  const dir = join(ROOT, 'node_modules', '.cache', 'test-admin-cli');
  mkdirSync(dir, { recursive: true });
  // A file per run, removed at its end: two runs at once (another checkout sharing node_modules, a
  // clean clone at an older commit) would otherwise run each other's CLI.
  const file = join(dir, `admin.${process.pid}.mjs`);
  await build({
    entryPoints: [join(ROOT, 'bin', 'admin.ts')],
    outfile: file,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    external: ['better-sqlite3', 'hnswlib-node'],
    // Bundled CommonJS dependencies call require().
    banner: { js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);" },
    logLevel: 'warning',
  });
  project.provide('adminCli', file);
  return () => rmSync(file, { force: true });
}
