#!/usr/bin/env node
/**
 * Installs the ffmpeg layer's two npm packages (lib/ffmpeg-layer/package.json and its lockfile) for
 * arm64 Linux, wherever this runs, and prints where their programs are, as JSON:
 * `{"ffmpeg": "<path>", "ffprobe": "<path>"}`, or nothing with `--quiet` (docs/decisions/ffmpeg-layer.md).
 *
 * They declare `cpu: ["arm64"]`, so the project's own install skips (or refuses) them on x64; they are
 * installed apart, with npm's `--cpu=arm64 --os=linux` (taken for optional dependencies only), into
 * `node_modules/.cache/ffmpeg-layer/<lockfile hash>/`: gone with node_modules, and a new lockfile is a new
 * directory. The project's `postinstall` runs this, so `npm ci` (the step that has the network) leaves
 * the binaries ready and synthesis needs none; the layer's bundling (lib/ffmpeg-layer.ts) runs it again,
 * which only prints when they are there. Installed into a fresh directory and renamed into place, so two
 * runs at once never see half an install. No install scripts: theirs only `chmod u+x`, and the layer's
 * bundling sets the modes itself.
 */
import { spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, openSync, readFileSync, readSync, closeSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const SOURCE = join(ROOT, 'lib', 'ffmpeg-layer');
/** Each program's package, and the file it ships (at the package's root). */
const PROGRAMS = { ffmpeg: '@ffmpeg-installer/linux-arm64', ffprobe: '@ffprobe-installer/linux-arm64' };
/** ELF's e_machine for AArch64: what Lambda's arm64 runs. */
const EM_AARCH64 = 0xb7;

const lock = readFileSync(join(SOURCE, 'package-lock.json'));
const key = createHash('sha256').update(lock).digest('hex').slice(0, 16);
const cache = join(ROOT, 'node_modules', '.cache', 'ffmpeg-layer');
const target = join(cache, key);
const programsIn = (dir) => Object.fromEntries(Object.entries(PROGRAMS).map(([name, pkg]) => [name, join(dir, 'node_modules', pkg, name)]));

/** Why `file` is not a 64-bit little-endian AArch64 ELF executable, or undefined when it is. */
function notAarch64(file) {
  const header = Buffer.alloc(20);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  if (header.readUInt32BE(0) !== 0x7f454c46) return 'not an ELF file';
  if (header[4] !== 2 || header[5] !== 1) return 'not a 64-bit little-endian ELF';
  if (header.readUInt16LE(16) !== 2) return 'not an executable (ELF type)';
  const machine = header.readUInt16LE(18);
  return machine === EM_AARCH64 ? undefined : `built for ELF machine 0x${machine.toString(16)}, not AArch64 (0xb7)`;
}

function install() {
  mkdirSync(cache, { recursive: true });
  const work = join(cache, `.install-${process.pid}-${randomBytes(4).toString('hex')}`);
  mkdirSync(work);
  try {
    copyFileSync(join(SOURCE, 'package.json'), join(work, 'package.json'));
    copyFileSync(join(SOURCE, 'package-lock.json'), join(work, 'package-lock.json'));
    // Under `npm ci`'s postinstall npm names itself; run by hand, the npm on PATH.
    const npm = process.env.npm_execpath ? [process.execPath, [process.env.npm_execpath]] : ['npm', []];
    const args = [...npm[1], 'ci', '--cpu=arm64', '--os=linux', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'];
    const run = spawnSync(npm[0], args, { cwd: work, stdio: ['ignore', process.stderr, process.stderr] });
    if (run.status !== 0) throw new Error(`npm ci of lib/ffmpeg-layer (for arm64 Linux) failed (${run.error?.message ?? `exit ${run.status}`})`);
    for (const [name, file] of Object.entries(programsIn(work))) {
      if (!existsSync(file)) throw new Error(`${PROGRAMS[name]} holds no ${name} after its install`);
      const wrong = notAarch64(file);
      if (wrong) throw new Error(`${PROGRAMS[name]}'s ${name} is ${wrong}`);
    }
    try {
      renameSync(work, target);
    } catch (error) {
      // Another run put it there first: theirs is the same install.
      if (!existsSync(target)) throw error;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

const programs = programsIn(target);
if (!Object.values(programs).every((file) => existsSync(file))) {
  try {
    install();
  } catch (error) {
    // As npm ci's postinstall, a failure here must not fail the whole install (every test and npm
    // start would go with it): only the layer's synthesis needs the binaries, and it runs this again
    // and fails there, naming the cause.
    if (!process.argv.includes('--quiet')) throw error;
    process.stderr.write(`warning: the ffmpeg layer's arm64 binaries were not installed (${error.message}); \`node scripts/ffmpeg-layer.mjs\` tries again\n`);
  }
}
if (!process.argv.includes('--quiet')) process.stdout.write(`${JSON.stringify(programs)}\n`);
