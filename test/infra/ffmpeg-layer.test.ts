/**
 * The ffmpeg layer as CDK builds it for a deploy (lib/ffmpeg-layer.ts, docs/decisions/ffmpeg-layer.md):
 * synthesized with bundling on, in a stack of its own (the platform's template tests skip bundling),
 * its asset in cdk.out holds exactly `bin/ffmpeg` and `bin/ffprobe`, each a 64-bit AArch64 ELF
 * executable that any user may run (Lambda runs a function as a user that does not own the layer's
 * files); Lambda mounts the layer at /opt, so they are the FFMPEG_PATH every ffmpeg function gets and
 * the ffprobe the settings look for beside it. The binaries come from the packages' install, which
 * `npm ci`'s postinstall made (scripts/ffmpeg-layer.mjs). Where `qemu-aarch64-static` is installed
 * (Debian's qemu-user-static), the asset's programs also run here: ffprobe reads a recording Debian's
 * ffmpeg made, and ffmpeg cuts its audio track to MP3 as the jobs do.
 */
import { App, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { execFile } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readdirSync, readSync, rmSync, statSync } from 'node:fs';
import { promisify } from 'node:util';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FFMPEG_LAYER_DIR, FFMPEG_LAYER_PATHS, FfmpegLayer } from '../../lib/ffmpeg-layer.js';

/** Where Lambda extracts a layer's archive. */
const LAYER_MOUNT = '/opt';
/** Runs an AArch64 program on this machine, where installed. */
const QEMU = '/usr/bin/qemu-aarch64-static';
const run = promisify(execFile);

let outdir: string;
let asset: string;

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), 'ffmpeg-layer-'));
  const app = new App({ outdir });
  const stack = new Stack(app, 'FfmpegLayerCheck');
  new FfmpegLayer(stack, 'Ffmpeg');
  app.synth();
  const [layer] = Object.values(Template.fromStack(stack).findResources('AWS::Lambda::LayerVersion')) as { Properties: { Content: { S3Key: string } } }[];
  asset = join(outdir, `asset.${layer.Properties.Content.S3Key.replace(/\.zip$/, '')}`);
}, 240_000);

afterAll(() => {
  if (outdir) rmSync(outdir, { recursive: true, force: true });
});

/** A file's ELF identification: class, byte order, type and machine (what the kernel checks before running it). */
function elfHeader(file: string): { magic: string; bits: number; littleEndian: boolean; type: number; machine: number } {
  const header = Buffer.alloc(20);
  const fd = openSync(file, 'r');
  try {
    readSync(fd, header, 0, 20, 0);
  } finally {
    closeSync(fd);
  }
  return { magic: header.subarray(0, 4).toString('latin1'), bits: header[4] === 2 ? 64 : 32, littleEndian: header[5] === 1, type: header.readUInt16LE(16), machine: header.readUInt16LE(18) };
}

describe('the ffmpeg layer asset', () => {
  it('holds bin/ffmpeg and bin/ffprobe, nothing else', () => {
    expect(readdirSync(asset)).toEqual([FFMPEG_LAYER_DIR]);
    expect(readdirSync(join(asset, FFMPEG_LAYER_DIR)).sort()).toEqual(['ffmpeg', 'ffprobe']);
  });

  it.each(Object.entries(FFMPEG_LAYER_PATHS))('%s is at its FFMPEG_LAYER_PATHS path once mounted at /opt: a 64-bit AArch64 ELF executable anyone may run', (name, path) => {
    expect(posix.dirname(path)).toBe(posix.join(LAYER_MOUNT, FFMPEG_LAYER_DIR));
    const file = join(asset, posix.relative(LAYER_MOUNT, path));
    const stat = statSync(file);
    expect(stat.isFile()).toBe(true);
    // Megabytes of a static build, not a stub or a pointer file.
    expect(stat.size).toBeGreaterThan(10 * 1024 * 1024);
    expect(stat.mode & 0o777).toBe(0o755);
    // EM_AARCH64 (0xB7), ET_EXEC (2): what Lambda's arm64 runs; x86-64 would be 0x3E.
    expect(elfHeader(file), name).toEqual({ magic: '\x7fELF', bits: 64, littleEndian: true, type: 2, machine: 0xb7 });
  });

  it('keeps ffprobe in the same directory as ffmpeg', () => {
    expect(dirname(FFMPEG_LAYER_PATHS.ffprobe)).toBe(dirname(FFMPEG_LAYER_PATHS.ffmpeg));
  });

  it.runIf(existsSync(QEMU))('runs under qemu: ffprobe reads a recording, ffmpeg cuts its audio to MP3', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ffmpeg-layer-run-'));
    try {
      const recording = join(dir, 'recording.mp4');
      // Made with Debian's ffmpeg (npm test's pretest installs it): 3 s of test picture and a tone.
      await run('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', 'testsrc=duration=3:size=320x240:rate=10', '-f', 'lavfi', '-i', 'sine=frequency=440:duration=3', '-shortest', '-pix_fmt', 'yuv420p', recording]);
      const program = (name: keyof typeof FFMPEG_LAYER_PATHS) => join(asset, posix.relative(LAYER_MOUNT, FFMPEG_LAYER_PATHS[name]));
      const probed = await run(QEMU, [program('ffprobe'), '-v', 'error', '-show_entries', 'format=duration:stream=codec_type', '-of', 'json', recording]);
      const answer = JSON.parse(probed.stdout) as { streams: { codec_type: string }[]; format: { duration: string } };
      expect(answer.streams.map((s) => s.codec_type).sort()).toEqual(['audio', 'video']);
      expect(Number(answer.format.duration)).toBeCloseTo(3, 0);
      const mp3 = join(dir, 'audio.mp3');
      await run(QEMU, [program('ffmpeg'), '-nostdin', '-v', 'error', '-i', recording, '-map', '0:a:0', '-vn', '-ac', '1', '-ar', '16000', '-c:a', 'libmp3lame', '-b:a', '32k', mp3]);
      // 3 s at 32 kbit/s: about 12 kB.
      expect(statSync(mp3).size).toBeGreaterThan(8_000);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
