/**
 * A knowledge job's ffprobe/ffmpeg work (lambdas/knowledge/jobs/media.ts) on recordings Debian's ffmpeg
 * makes here: probing local files and an HTTP URL read by Range requests, cutting the audio track,
 * still frames with near-duplicates skipped, and the bounds (timeout, memory, abort).
 */
import { execFile, spawnSync } from 'node:child_process';
import { open, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { captureFrames, cutAudio, MediaRunError, probeMedia, runBounded } from '../../lambdas/knowledge/jobs/media.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { recordingAt } from '../helpers/knowledge-files.js';

/** Resolves when a response can take more, or has closed. */
function drained(res: import('node:http').ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    if (res.destroyed) return resolve();
    const go = () => {
      res.off('drain', go);
      res.off('close', go);
      resolve();
    };
    res.on('drain', go);
    res.on('close', go);
  });
}

const hasPrlimit = spawnSync('prlimit', ['--version']).status === 0;

let dir: string;
/** 60 s of a moving test picture (160x120) with a tone. */
let video: string;
/** 60 s of plain blue with a tone: every frame alike. */
let still: string;
/** 130 s of tone only. */
let audio: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'job-media-test-'));
  [video, still, audio] = await Promise.all([
    recordingAt(join(dir, 'video.mp4'), { seconds: 60 }),
    recordingAt(join(dir, 'still.mp4'), { seconds: 60, picture: 'still' }),
    recordingAt(join(dir, 'audio.m4a'), { seconds: 130, picture: 'none' }),
  ]);
}, 60_000);

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

afterEach(() => useSettings(undefined));

describe('probeMedia', () => {
  it('gives a video file its duration, streams and picture size', async () => {
    expect(await probeMedia(video)).toEqual({ duration_s: 60, audio: true, video: true, width: 160, height: 120 });
  });

  it('says an audio file has no video, its cover picture included', async () => {
    expect(await probeMedia(audio)).toMatchObject({ audio: true, video: false });
    expect((await probeMedia(audio)) as { duration_s: number }).toHaveProperty('duration_s', expect.closeTo(130, 0));
    const covered = join(dir, 'covered.mp3');
    await promisify(execFile)('ffmpeg', [
      ...['-nostdin', '-v', 'error', '-y', '-f', 'lavfi', '-i', 'sine=duration=5', '-f', 'lavfi', '-i', 'color=c=red:size=64x64:duration=0.1'],
      ...['-map', '0:a', '-map', '1:v', '-frames:v', '1', '-c:v', 'mjpeg', '-disposition:v', 'attached_pic', '-c:a', 'libmp3lame', covered],
    ]);
    const probe = await probeMedia(covered);
    expect(probe).toMatchObject({ audio: true, video: false });
    expect(probe).not.toHaveProperty('width');
  });

  it('calls garbage, an empty file and text unreadable, naming no path', async () => {
    const files = { 'garbage.bin': Buffer.from(Array.from({ length: 4000 }, (_, i) => (i * 7919) % 251)), 'empty.mp4': Buffer.alloc(0), 'notes.txt': Buffer.from('Meeting notes\nWe decided to ship.\n') };
    for (const [name, bytes] of Object.entries(files)) {
      await writeFile(join(dir, name), bytes);
      const probe = await probeMedia(join(dir, name));
      expect(probe, name).toHaveProperty('unreadable');
      expect((probe as { unreadable: string }).unreadable, name).not.toContain(dir);
      expect((probe as { unreadable: string }).unreadable, name).not.toContain(name);
    }
  });

  it('calls a file with neither audio nor video, or without a duration, unreadable', async () => {
    const run = promisify(execFile);
    await writeFile(join(dir, 'subs.srt'), '1\n00:00:01,000 --> 00:00:02,000\nhello\n');
    await run('ffmpeg', ['-nostdin', '-v', 'error', '-y', '-i', join(dir, 'subs.srt'), join(dir, 'subs.mkv')]);
    expect(await probeMedia(join(dir, 'subs.mkv'))).toEqual({ unreadable: 'no audio or video stream' });
    // WebM written as a stream (as a browser records) has no duration in it.
    const { stdout } = await run('ffmpeg', ['-nostdin', '-v', 'error', '-f', 'lavfi', '-i', 'sine=duration=3', '-c:a', 'libopus', '-f', 'webm', 'pipe:1'], { encoding: 'buffer' });
    await writeFile(join(dir, 'live.webm'), stdout);
    expect(await probeMedia(join(dir, 'live.webm'))).toEqual({ unreadable: 'no duration in the file' });
  });

  it('refuses a playlist, which would make ffmpeg open what it names', async () => {
    await writeFile(join(dir, 'list.m3u8'), `#EXTM3U\n#EXT-X-TARGETDURATION:60\n#EXTINF:60,\nfile://${video}\n#EXT-X-ENDLIST\n`);
    expect(await probeMedia(join(dir, 'list.m3u8'))).toEqual({ unreadable: 'not an audio or video format' });
  });

  it('says ffmpeg is missing where FFMPEG_PATH points nowhere', async () => {
    useSettings({ ffmpegPath: join(dir, 'nowhere', 'ffmpeg') });
    expect(await probeMedia(video)).toEqual({ missing: 'ffmpeg' });
    await expect(captureFrames(video, [{ time_s: 1 }], { max: 1, durationS: 60 })).rejects.toMatchObject({ reason: 'missing' });
  });

  it('throws for a local file that is not there (not a recording it could not read)', async () => {
    await expect(probeMedia(join(dir, 'absent.mp4'))).rejects.toBeInstanceOf(MediaRunError);
  });
});

describe('probeMedia over HTTP', () => {
  let server: Server;
  let base: string;
  let big: string;
  let size: number;
  let served = 0;
  const requests: string[] = [];

  beforeAll(async () => {
    // Large for its length (about 20 MB), index at the front: what a probe needs is in its first kilobytes.
    big = await recordingAt(join(dir, 'big.mp4'), { seconds: 20, size: '640x480', videoBitrate: '8M' });
    size = (await stat(big)).size;
    server = createServer(async (req, res) => {
      requests.push(`${req.method} ${req.headers.range ?? ''}`);
      if (!req.url?.startsWith('/big.mp4')) return res.writeHead(404).end();
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range ?? '');
      const start = range ? Number(range[1]) : 0;
      const end = range?.[2] ? Number(range[2]) : size - 1;
      res.writeHead(range ? 206 : 200, { 'content-length': end - start + 1, 'accept-ranges': 'bytes', ...(range ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}) });
      // Written 64 KiB at a time as the reader takes them: what was served is what was sent before it hung up.
      const file = await open(big);
      try {
        for (let at = start; at <= end && !res.destroyed; ) {
          const { bytesRead, buffer } = await file.read(Buffer.alloc(Math.min(65_536, end - at + 1)), 0, Math.min(65_536, end - at + 1), at);
          at += bytesRead;
          served += bytesRead;
          if (!res.write(buffer.subarray(0, bytesRead))) await drained(res);
        }
      } finally {
        await file.close();
        res.end();
      }
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  }, 60_000);

  afterAll(() => new Promise<void>((r) => server.close(() => r())));

  it('reads far less than the whole file', async () => {
    served = 0;
    const started = Date.now();
    const probe = await probeMedia(`${base}/big.mp4?X-Amz-Signature=secret`);
    console.log(`probe over HTTP: ${Date.now() - started} ms, ${served} of ${size} bytes, requests: ${requests.join('; ')}`);
    expect(probe).toEqual({ duration_s: 20, audio: true, video: true, width: 640, height: 480 });
    expect(size).toBeGreaterThan(15_000_000);
    expect(served).toBeLessThan(size / 4);
  });

  it('throws for a URL that answers an error, without the URL in the message', async () => {
    const error = await probeMedia(`${base}/gone.mp4?X-Amz-Signature=secret`).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(MediaRunError);
    expect((error as Error).message).toMatch(/404/);
    expect((error as Error).message).not.toContain('secret');
    expect((error as Error).message).not.toContain('127.0.0.1');
  });

  it('takes a frame over HTTP', async () => {
    served = 0;
    const frames = await captureFrames(`${base}/big.mp4`, [{ time_s: 15 }], { max: 1, durationS: 20 });
    console.log(`frame over HTTP: ${served} of ${size} bytes`);
    expect(frames).toHaveLength(1);
    expect(frames[0]).toMatchObject({ time_s: 15, width: 640, height: 480 });
    expect(served).toBeLessThan(size / 2);
  });
});

describe('cutAudio', () => {
  it('cuts 130 s into 3 even pieces covering the recording, on its clock', async () => {
    const out = await mkdtemp(join(dir, 'pieces-'));
    const started = Date.now();
    const pieces = await cutAudio(audio, out, { pieceSeconds: 60, durationS: 130 });
    console.log(`cut of 130 s: ${Date.now() - started} ms`);
    expect(pieces.map((p) => p.index)).toEqual([0, 1, 2]);
    expect(pieces[0].start_s).toBe(0);
    expect(pieces[2].end_s).toBeCloseTo(130, 1);
    for (const [i, piece] of pieces.entries()) {
      if (i > 0) expect(piece.start_s).toBeCloseTo(pieces[i - 1].end_s, 1);
      expect(piece.end_s - piece.start_s).toBeCloseTo(130 / 3, 0);
      expect(piece.path.startsWith(out)).toBe(true);
      const probe = await probeMedia(piece.path);
      expect(probe).toMatchObject({ audio: true, video: false });
      expect((probe as { duration_s: number }).duration_s).toBeCloseTo(piece.end_s - piece.start_s, 0);
    }
    // Only the pieces are left: no segment list, no padding piece.
    expect((await readdir(out)).sort()).toEqual(pieces.map((p) => p.path.slice(out.length + 1)).sort());
  });

  it('cuts the audio of a video, a recording shorter than a piece in one', async () => {
    const out = await mkdtemp(join(dir, 'pieces-'));
    const pieces = await cutAudio(video, out, { pieceSeconds: 600, durationS: 60 });
    expect(pieces).toHaveLength(1);
    expect(pieces[0]).toMatchObject({ index: 0, start_s: 0, end_s: 60 });
  });

  it('kills a run past its timeout and leaves no piece behind', async () => {
    const out = await mkdtemp(join(dir, 'pieces-'));
    const started = Date.now();
    await expect(cutAudio(audio, out, { pieceSeconds: 10, durationS: 130, timeoutMs: 30 })).rejects.toMatchObject({ reason: 'timeout' });
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(await readdir(out)).toEqual([]);
  });
});

describe('captureFrames', () => {
  it('takes JPEGs at the candidates times, in their order, clamped into the recording', async () => {
    const started = Date.now();
    const frames = await captureFrames(video, [30, -3, 15, 45].map((time_s) => ({ time_s })), { max: 10, durationS: 60 });
    console.log(`4 frames: ${Date.now() - started} ms`);
    expect(frames.map((f) => f.time_s)).toEqual([30, 0, 15, 45]);
    expect((await captureFrames(video, [{ time_s: 500 }], { max: 1, durationS: 60 })).map((f) => f.time_s)).toEqual([59.9]);
    for (const frame of frames) {
      expect([...frame.jpeg.subarray(0, 2)]).toEqual([0xff, 0xd8]);
      expect(frame).toMatchObject({ width: 160, height: 120 });
    }
  });

  it('keeps one frame of a picture that never changes', async () => {
    const frames = await captureFrames(still, [10, 20, 30, 40, 50].map((time_s) => ({ time_s })), { max: 5, durationS: 60 });
    expect(frames.map((f) => f.time_s)).toEqual([10]);
    // With no difference asked for, every frame is kept.
    expect(await captureFrames(still, [{ time_s: 10 }, { time_s: 20 }], { max: 5, durationS: 60, minDifference: 0 })).toHaveLength(2);
  });

  it('stops at max, keeping the most important', async () => {
    const frames = await captureFrames(video, [50, 10, 20, 30].map((time_s) => ({ time_s })), { max: 2, durationS: 60 });
    expect(frames.map((f) => f.time_s)).toEqual([50, 10]);
  });

  it('scales a wide picture to 1280 px', async () => {
    const wide = await recordingAt(join(dir, 'wide.mp4'), { seconds: 2, size: '1920x1080', audio: false });
    const [frame] = await captureFrames(wide, [{ time_s: 1 }], { max: 1, durationS: 2 });
    expect(frame).toMatchObject({ width: 1280, height: 720 });
  });

  it('kills a frame past its timeout', async () => {
    await expect(captureFrames(video, [{ time_s: 30 }], { max: 1, durationS: 60, timeoutMs: 1 })).rejects.toMatchObject({ reason: 'timeout' });
  });

  it('stops when the signal aborts', async () => {
    const controller = new AbortController();
    const reason = new Error('job cancelled');
    setTimeout(() => controller.abort(reason), 5);
    await expect(captureFrames(video, [10, 20, 30, 40, 50].map((time_s) => ({ time_s })), { max: 5, durationS: 60, signal: controller.signal, minDifference: 0 })).rejects.toBe(reason);
  });
});

describe.skipIf(!hasPrlimit)('runBounded under prlimit', () => {
  it('stops a program past its memory limit', async () => {
    const args = ['-nostdin', '-v', 'error', '-i', video, '-f', 'null', '-'];
    await expect(runBounded('ffmpeg', args, { timeoutMs: 30_000 })).resolves.toBeDefined();
    await expect(runBounded('ffmpeg', args, { timeoutMs: 30_000, memoryBytes: 64 * 1024 * 1024 })).rejects.toBeInstanceOf(MediaRunError);
  });
});

// Make sure stray directories of the module's own are gone: frames go to a temporary directory removed at the end.
describe('temporary files', () => {
  it('leaves no frames directory behind', async () => {
    const before = (await readdir(tmpdir())).filter((n) => n.startsWith('frames-')).length;
    await captureFrames(video, [{ time_s: 1 }], { max: 1, durationS: 60 });
    await captureFrames(video, [{ time_s: 1 }], { max: 1, durationS: 60, timeoutMs: 1 }).catch(() => undefined);
    expect((await readdir(tmpdir())).filter((n) => n.startsWith('frames-')).length).toBe(before);
  });
});

