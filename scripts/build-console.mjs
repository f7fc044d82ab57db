#!/usr/bin/env node
/**
 * Builds the console's front-end (console/, Preact + Vite) into console/dist/, which `npm start`
 * serves on CONSOLE_PORT, the AWS stack uploads, and the browser tests drive.
 *
 *   node scripts/build-console.mjs              build now (`npm run build:console`)
 *   node scripts/build-console.mjs --if-stale   build only when the sources differ from the last
 *                                               build's (`postinstall`, `prestart`, `pretest`)
 *
 * "Stale" is decided by content, not clocks: a hash of every source file (console/ but dist/, the
 * committed OpenAPI documents copied into the build, the lock file, this script) is written beside
 * the build as dist/.build-hash; a checkout, `touch` or clock skew cannot fool it, and an unchanged
 * tree costs a few milliseconds. The build goes to a fresh directory that replaces dist/ in one
 * rename, so a server reading dist/ meanwhile, or a second build at once, never sees half of one.
 * Where Vite is not installed (`npm ci --omit=dev`), it says so and exits 0: production installs
 * serve a build made elsewhere.
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const CONSOLE = join(ROOT, 'console');
const DIST = join(CONSOLE, 'dist');
const HASH_FILE = join(DIST, '.build-hash');
const ifStale = process.argv.includes('--if-stale');

/** Every file whose content goes into the build. */
function inputs() {
  const files = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === 'dist' || entry.name === 'node_modules' || entry.name.startsWith('.')) continue;
      const path = join(dir, entry.name);
      if (entry.isDirectory()) walk(path);
      else if (entry.isFile()) files.push(path);
    }
  };
  walk(CONSOLE);
  for (const api of ['ai', 'data', 'events']) files.push(join(ROOT, 'docs', 'openapi', `${api}.json`));
  files.push(join(ROOT, 'package-lock.json'), fileURLToPath(import.meta.url));
  return files.filter((f) => existsSync(f)).sort();
}

function sourceHash() {
  const hash = createHash('sha256');
  for (const file of inputs()) hash.update(relative(ROOT, file)).update('\0').update(readFileSync(file)).update('\0');
  return hash.digest('hex');
}

const hash = sourceHash();
if (ifStale && existsSync(HASH_FILE) && readFileSync(HASH_FILE, 'utf8').trim() === hash) process.exit(0);

// Always the production build: under vitest (NODE_ENV=test) Vite would otherwise keep Preact's
// development code and skip minifying, 60% more bytes than what `npm start` serves.
process.env.NODE_ENV = 'production';

let vite;
try {
  const require = createRequire(join(ROOT, 'package.json'));
  vite = await import(require.resolve('vite'));
} catch {
  const message = 'build-console: vite is not installed (a production install?): console/dist/ not built; run `npm ci` with dev dependencies, then `npm run build:console`';
  if (ifStale) {
    process.stderr.write(`${message}\n`);
    process.exit(0);
  }
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

const started = Date.now();
const out = join(CONSOLE, `.dist-${process.pid}-${started}`);
try {
  await vite.build({
    configFile: join(CONSOLE, 'vite.config.ts'),
    root: CONSOLE,
    mode: 'production',
    logLevel: 'warn',
    build: { outDir: out, emptyOutDir: true },
  });
  writeFileSync(join(out, '.build-hash'), `${hash}\n`);
  // Swap in the new build: dist/ moves aside, the new one takes its name, the old one goes.
  const old = join(CONSOLE, `.dist-old-${process.pid}-${started}`);
  try {
    renameSync(DIST, old);
  } catch (error) {
    if (error.code !== 'ENOENT') throw error;
  }
  renameSync(out, DIST);
  rmSync(old, { recursive: true, force: true });
} catch (error) {
  rmSync(out, { recursive: true, force: true });
  process.stderr.write(`build-console: the build failed: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
}

const sizes = readdirSync(join(DIST, 'assets')).map((f) => `${f} ${(statSync(join(DIST, 'assets', f)).size / 1024).toFixed(1)} KiB`);
process.stdout.write(`build-console: console/dist/ in ${Date.now() - started} ms (${sizes.join(', ')})\n`);
