/**
 * A knowledge job's work on the recording itself, by ffprobe and ffmpeg (`FFMPEG_PATH`, ffprobe beside
 * it, as for items: extract/audio-track.ts): what it holds (probeMedia), its audio track in pieces to
 * transcribe (cutAudio), still frames at the entries' times (captureFrames).
 *
 * The input is a local path or an http(s) URL (on AWS a presigned S3 URL: the programs read what they
 * need by Range requests, so a probe or a frame of a 2 GB video does not download it). Every run is a
 * child process bounded by a wall-clock timeout (SIGKILL), and where `prlimit` (util-linux) is
 * installed by an address-space, CPU-time and no-core-dump limit the kernel enforces; decoders are held
 * to 2 threads so that memory does not grow with the machine's cores. Messages never carry the input
 * (a presigned URL is a credential) nor a local path.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { getPriority, setPriority, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { END_PADDING_SECONDS, evenPieces, isMissing, programs } from '../extract/audio-track.js';

export type ProbeResult = { duration_s: number; audio: boolean; video: boolean; width?: number; height?: number } | { unreadable: string } | { missing: 'ffmpeg' };

export interface AudioPieceFile {
  index: number;
  /** Seconds on the recording's clock. */
  start_s: number;
  end_s: number;
  /** The MP3 file, in the caller's `outDir`. */
  path: string;
}

export interface Frame {
  /** Where it was taken, seconds on the recording's clock (the candidate's time, clamped into the recording). */
  time_s: number;
  jpeg: Buffer;
  width: number;
  height: number;
}

interface RunOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
}

export const DEFAULT_PROBE_TIMEOUT_MS = 60_000;
/** A 60-minute recording's audio track took 23 s on 2 busy cores: 6 hours, about 2.5 minutes (docs/decisions/knowledge-job-media.md). */
export const DEFAULT_CUT_TIMEOUT_MS = 10 * 60_000;
/** Each frame's own run. */
export const DEFAULT_FRAME_TIMEOUT_MS = 60_000;

/**
 * Two frames whose 16x16 grayscale thumbnails differ by less than this on average (of 255) are the same
 * picture. Downscaling to 16x16 averages compression and camera noise away (the same still scene
 * measures 0-1), while another slide or scene moves many cells by tens; a slide that only gains a
 * bullet line moves about 1-2 and counts as the same slide, which is what a reader wants once.
 */
export const DEFAULT_MIN_FRAME_DIFFERENCE = 4;

/** Widest JPEG kept: enough to read a shared screen, small enough to store and show (about 50-150 kB). */
const FRAME_MAX_WIDTH = 1280;

/**
 * Kernel limits per run, through `prlimit`. Address space, not resident memory (what RLIMIT_AS bounds):
 * a 4K H.264 frame needs about 400 MiB of it with 2 decoding threads, a probe 300 MiB; 1 GiB leaves room
 * and still stops a crafted file from taking the machine. CPU seconds: 2 busy threads for the whole
 * wall-clock timeout, plus one: a backstop that holds even if the timeout's kill were missed.
 */
const MEMORY_LIMIT_BYTES = 1024 * 1024 * 1024;
const CPU_THREADS = 2;
/** As extraction children (extraction-pool.ts's EXTRACTION_NICE): below a parent that may hold the store's write lock. */
const MEDIA_NICE = 10;
/** A network read that stalls this long fails (ffmpeg's `-rw_timeout`, microseconds), before the run's own timeout. */
const READ_TIMEOUT_US = 30_000_000;

/**
 * The demuxers a recording may be read with. Playlists and manifests (HLS, DASH, ffconcat) are left
 * out: they make ffmpeg open other URLs or files the file names, which a tenant's upload must not do.
 */
const FORMATS = [
  'mov', 'matroska', 'mp3', 'wav', 'w64', 'ogg', 'flac', 'aac', 'ac3', 'eac3', 'aiff', 'caf', 'amr', 'amrnb', 'amrwb',
  'wv', 'ape', 'au', 'avi', 'mpegts', 'mpeg', 'asf', 'flv', 'mxf', 'dv', 'rm', 'nut',
].join(',');

/** Why a run gave nothing: `missing` (no ffmpeg/ffprobe), `timeout` (killed at its timeout), `limit` (past a kernel limit), `failed` (exited with an error). */
export class MediaRunError extends Error {
  constructor(
    readonly reason: 'missing' | 'timeout' | 'limit' | 'failed',
    message: string,
  ) {
    super(message);
    this.name = 'MediaRunError';
  }
}

/**
 * What the recording holds: its duration and whether it has sound and moving pictures (an attached
 * picture, an audio file's cover, is not video), without reading it whole.
 */
export async function probeMedia(input: string, options: RunOptions = {}): Promise<ProbeResult> {
  const { ffprobe } = programs();
  const timeoutMs = options.timeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  const args = [
    ...['-v', 'error', '-threads', String(CPU_THREADS), ...inputArgs(input)],
    ...['-show_entries', 'format=duration:stream=codec_type,width,height:stream_disposition=attached_pic', '-of', 'json'],
  ];
  let stdout: string;
  try {
    ({ stdout } = await runBounded(ffprobe, args, { timeoutMs, signal: options.signal, input }));
  } catch (error) {
    if (!(error instanceof MediaRunError)) throw error;
    if (error.reason === 'missing') return { missing: 'ffmpeg' };
    if (error.reason === 'timeout') return { unreadable: `reading it took longer than ${Math.round(timeoutMs / 1000)} s` };
    if (error.reason === 'limit') return { unreadable: error.message };
    // A network or file-system failure may pass (an expired URL, S3 slow): the caller retries.
    if (READ_FAILURE.test(error.message)) throw error;
    return { unreadable: error.message === 'not an audio or video format' ? error.message : `ffprobe: ${error.message}` };
  }
  type Stream = { codec_type?: string; width?: number; height?: number; disposition?: { attached_pic?: number } };
  let probe: { streams?: Stream[]; format?: { duration?: string } };
  try {
    probe = JSON.parse(stdout) as typeof probe;
  } catch {
    return { unreadable: 'ffprobe gave no answer' };
  }
  const streams = probe.streams ?? [];
  const audio = streams.some((s) => s.codec_type === 'audio');
  const picture = streams.find((s) => s.codec_type === 'video' && s.disposition?.attached_pic !== 1);
  if (!audio && !picture) return { unreadable: 'no audio or video stream' };
  const duration = Number(probe.format?.duration);
  // A stream written without its length (a browser's MediaRecorder WebM) would have to be read whole to learn it.
  if (!(Number.isFinite(duration) && duration > 0)) return { unreadable: 'no duration in the file' };
  const size = picture && picture.width! > 0 && picture.height! > 0 ? { width: picture.width!, height: picture.height! } : {};
  return { duration_s: duration, audio, video: !!picture, ...size };
}

/**
 * The audio track as mono 16 kHz MP3 pieces of at most about `pieceSeconds`, all the same length
 * (extract/audio-track.ts's evenPieces), written into `outDir` as `piece0000.mp3`...; times on the
 * recording's clock. The encoder's padding past the end, alone in a last piece, is dropped. On failure
 * the pieces written are removed and a MediaRunError is thrown.
 */
export async function cutAudio(
  input: string,
  outDir: string,
  options: { pieceSeconds: number; durationS: number } & RunOptions,
): Promise<AudioPieceFile[]> {
  const { pieceSeconds, durationS } = options;
  if (!(pieceSeconds > 0) || !(durationS > 0)) throw new RangeError('pieceSeconds and durationS must be positive');
  const { ffmpeg } = programs();
  const list = join(outDir, 'pieces.csv');
  const args = [
    ...['-nostdin', '-v', 'error', '-y', '-threads', String(CPU_THREADS), ...inputArgs(input)],
    ...['-map', '0:a:0', '-vn', '-ac', '1', '-ar', '16000', '-c:a', 'libmp3lame', '-b:a', '32k'],
    // A file whose stream runs far past the duration it declared would fill the disk with pieces; an
    // estimated duration (a VBR MP3 without its header) can be off by a third, hence the margin.
    ...['-t', (durationS * 1.5 + 60).toFixed(3)],
    ...['-f', 'segment', '-segment_time', String(evenPieces(durationS, pieceSeconds)), '-reset_timestamps', '1'],
    ...['-segment_list', `file:${resolve(list)}`, '-segment_list_type', 'csv', `file:${resolve(outDir).replaceAll('%', '%%')}/piece%04d.mp3`],
  ];
  try {
    await runBounded(ffmpeg, args, { timeoutMs: options.timeoutMs ?? DEFAULT_CUT_TIMEOUT_MS, signal: options.signal, input });
    // One line a piece: `piece0000.mp3,0.000000,43.344000` (name, start, end).
    const rows = (await readFile(list, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split(','));
    const pieces: AudioPieceFile[] = [];
    for (const [i, [name, start, end]] of rows.entries()) {
      // The encoder pads its output a few frames past the source's end: a piece starting there holds only that.
      if (i > 0 && Number(start) >= durationS - END_PADDING_SECONDS) {
        await rm(join(outDir, name), { force: true });
        continue;
      }
      pieces.push({ index: pieces.length, start_s: Number(start), end_s: Math.min(Number(end), durationS), path: join(outDir, name) });
    }
    if (!pieces.length) throw new MediaRunError('failed', 'ffmpeg wrote no audio piece');
    // The last piece runs to the recording's end even where the padding was cut off it.
    pieces[pieces.length - 1].end_s = Math.max(pieces[pieces.length - 1].end_s, durationS);
    return pieces;
  } catch (error) {
    await removePieces(outDir);
    throw error;
  } finally {
    await rm(list, { force: true });
  }
}

async function removePieces(outDir: string): Promise<void> {
  const names = await readdir(outDir).catch(() => [] as string[]);
  await Promise.all(names.filter((n) => /^piece\d{4,}\.mp3$/.test(n)).map((n) => rm(join(outDir, n), { force: true })));
}

/**
 * Still frames at the candidates' times, most important first, as JPEGs at most 1280 px wide: a frame
 * that looks like one already kept (DEFAULT_MIN_FRAME_DIFFERENCE) is skipped, and taking stops at `max`
 * kept. Frames come back in the candidates' order. One ffmpeg run a frame, seeking before reading
 * (`-ss` before `-i`: to the key frame before, by the index, then decoding up to the time), so a frame
 * near the end of a long recording costs the same as one at its start.
 */
export async function captureFrames(
  input: string,
  candidates: { time_s: number }[],
  options: { max: number; durationS: number; minDifference?: number } & RunOptions,
): Promise<Frame[]> {
  const { max, durationS } = options;
  const minDifference = options.minDifference ?? DEFAULT_MIN_FRAME_DIFFERENCE;
  if (!(max > 0) || !candidates.length) return [];
  const { ffmpeg } = programs();
  const last = Math.max(0, durationS - 0.1);
  const kept: (Frame & { thumb: Buffer })[] = [];
  const tried = new Set<string>();
  const dir = await mkdtemp(join(tmpdir(), 'frames-'));
  try {
    const jpegPath = join(dir, 'frame.jpg');
    const thumbPath = join(dir, 'frame.gray');
    for (const candidate of candidates) {
      if (kept.length >= max) break;
      const time = Math.min(Math.max(Number.isFinite(candidate.time_s) ? candidate.time_s : 0, 0), last);
      const at = time.toFixed(3);
      if (tried.has(at)) continue;
      tried.add(at);
      const args = [
        ...['-nostdin', '-v', 'error', '-y', '-filter_threads', '1', '-threads', String(CPU_THREADS), '-ss', at, ...inputArgs(input)],
        ...['-map', '0:V:0', '-frames:v', '1', '-vf', `scale='min(${FRAME_MAX_WIDTH},iw)':-2`, '-q:v', '4', '-threads', '1', '-f', 'image2', '-c:v', 'mjpeg', `file:${jpegPath}`],
        ...['-map', '0:V:0', '-frames:v', '1', '-vf', 'scale=16:16:flags=area,format=gray', '-threads', '1', '-f', 'rawvideo', `file:${thumbPath}`],
      ];
      await rm(jpegPath, { force: true });
      await rm(thumbPath, { force: true });
      await runBounded(ffmpeg, args, { timeoutMs: options.timeoutMs ?? DEFAULT_FRAME_TIMEOUT_MS, signal: options.signal, input });
      // No frame there (past the last one, a video track that ends before the audio): nothing written.
      const jpeg = await readFile(jpegPath).catch(() => null);
      const thumb = await readFile(thumbPath).catch(() => null);
      if (!jpeg?.length || thumb?.length !== 256) continue;
      if (kept.some((k) => meanDifference(k.thumb, thumb) < minDifference)) continue;
      const size = jpegSize(jpeg);
      if (!size) throw new MediaRunError('failed', 'ffmpeg wrote a JPEG without a frame header');
      kept.push({ time_s: time, jpeg, ...size, thumb });
    }
    return kept.map(({ thumb: _thumb, ...frame }) => frame);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Mean absolute difference of two grayscale pictures of the same size, 0-255. */
export function meanDifference(a: Uint8Array, b: Uint8Array): number {
  let sum = 0;
  for (let i = 0; i < a.length; i++) sum += Math.abs(a[i] - b[i]);
  return sum / a.length;
}

/** Width and height from a JPEG's start-of-frame marker (SOF0-SOF15 but DHT, JPG and DAC). */
function jpegSize(jpeg: Buffer): { width: number; height: number } | null {
  if (jpeg[0] !== 0xff || jpeg[1] !== 0xd8) return null;
  let at = 2;
  while (at + 9 < jpeg.length) {
    if (jpeg[at] !== 0xff) return null;
    const marker = jpeg[at + 1];
    if (marker >= 0xc0 && marker <= 0xcf && ![0xc4, 0xc8, 0xcc].includes(marker)) {
      return { height: jpeg.readUInt16BE(at + 5), width: jpeg.readUInt16BE(at + 7) };
    }
    at += 2 + jpeg.readUInt16BE(at + 2);
  }
  return null;
}

/**
 * How the input is named to ffmpeg: an http(s) URL as it is, with a stall timeout; anything else a
 * local path, as `file:` (a name with a colon would otherwise be taken for a protocol). Only those
 * protocols may be opened, and only the recording formats above.
 */
function inputArgs(input: string): string[] {
  const remote = /^https?:\/\//i.test(input);
  if (!remote && /^[a-z][a-z0-9+.-]*:\/\//i.test(input)) throw new TypeError('The recording must be a local path or an http(s) URL.');
  return [
    ...(remote ? ['-rw_timeout', String(READ_TIMEOUT_US)] : []),
    ...['-protocol_whitelist', remote ? 'http,https,tls,tcp' : 'file', '-format_whitelist', FORMATS],
    ...['-i', remote ? input : `file:${resolve(input)}`],
  ];
}

/** ffmpeg's words for a read that failed on the way (network, file system), not for a file it cannot make sense of. */
const READ_FAILURE = /Server returned|Connection (refused|reset|timed out)|timed out|Input\/output error|Network is unreachable|Failed to resolve|No such file or directory|Permission denied|HTTP error/i;

let prlimitFound: Promise<boolean> | undefined;
/** Whether util-linux's prlimit runs here (Debian has it; Lambda's runtime image need not: there the function's own memory size and timeout bound ffmpeg). */
function hasPrlimit(): Promise<boolean> {
  prlimitFound ??= new Promise((done) => {
    const child = spawn('prlimit', ['--version'], { stdio: 'ignore' });
    child.on('error', () => done(false));
    child.on('close', (code) => done(code === 0));
  });
  return prlimitFound;
}

/**
 * Runs `program` with its bounds: killed (SIGKILL) at `timeoutMs` or when `signal` aborts (rejecting
 * with the signal's reason), under prlimit's limits where it is installed. stdout is kept (up to 4 MiB),
 * stderr only its last 4 kB: a damaged file can make ffmpeg write an error per packet for hours.
 * Errors are MediaRunErrors whose message is ffmpeg's last line with the input and paths taken out.
 */
export async function runBounded(
  program: string,
  args: string[],
  options: { timeoutMs: number; signal?: AbortSignal; input?: string; memoryBytes?: number },
): Promise<{ stdout: string }> {
  const { timeoutMs, signal } = options;
  signal?.throwIfAborted();
  const limited = await hasPrlimit();
  const cpuSeconds = Math.ceil((timeoutMs / 1000) * CPU_THREADS) + 1;
  const [command, argv] = limited
    ? ['prlimit', [`--as=${options.memoryBytes ?? MEMORY_LIMIT_BYTES}`, `--cpu=${cpuSeconds}`, '--core=0', '--', program, ...args]]
    : [program, args];
  return new Promise((done, fail) => {
    const child = spawn(command, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    try {
      if (child.pid) setPriority(child.pid, Math.max(getPriority(), MEDIA_NICE));
    } catch {
      // Not allowed to lower it (it never raises it): it runs at its parent's priority.
    }
    const out: Buffer[] = [];
    let outBytes = 0;
    let err = '';
    let timedOut = false;
    let settled = false;
    child.stdout.on('data', (chunk: Buffer) => {
      outBytes += chunk.length;
      if (outBytes <= 4 * 1024 * 1024) out.push(chunk);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err = (err + chunk.toString('utf8')).slice(-4096);
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill('SIGKILL');
    }, timeoutMs);
    const onAbort = () => child.kill('SIGKILL');
    signal?.addEventListener('abort', onAbort, { once: true });
    const finish = (error?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      if (error === undefined) done({ stdout: Buffer.concat(out).toString('utf8') });
      else fail(error);
    };
    child.on('error', (error) => finish(isMissing(error) ? new MediaRunError('missing', `${program} is not installed`) : error));
    child.on('close', (code, killedBy) => {
      if (signal?.aborted) return finish(signal.reason ?? new Error('aborted'));
      if (timedOut) return finish(new MediaRunError('timeout', `${name(program)} took longer than ${Math.round(timeoutMs / 1000)} s and was stopped`));
      // prlimit could not start the program (126: not executable, 127: not found).
      if (limited && (code === 126 || code === 127) && /failed to execute/.test(err)) return finish(new MediaRunError('missing', `${program} is not installed`));
      if (killedBy === 'SIGXCPU') return finish(new MediaRunError('limit', `${name(program)} used more than ${cpuSeconds} s of CPU`));
      // Not by us: the kernel (a hard limit, or out of memory).
      if (killedBy === 'SIGKILL') return finish(new MediaRunError('limit', `${name(program)} was killed by the system`));
      if (code !== 0 && /Cannot allocate memory|ENOMEM|out of memory|failed to allocate/i.test(err)) return finish(new MediaRunError('limit', `${name(program)} needed more memory than allowed`));
      if (code !== 0 || killedBy) return finish(new MediaRunError('failed', describe(err, options.input) || `${name(program)} exited with ${code ?? killedBy}`));
      finish();
    });
  });
}

const name = (program: string) => program.split('/').pop() ?? program;

/** What ffmpeg said last, without the input (a presigned URL is a credential) or any path. */
function describe(stderr: string, input?: string): string {
  const lines = stderr.trim().split('\n');
  // ffmpeg's last line is then only "Invalid argument".
  if (lines.some((l) => /Format not on whitelist/.test(l))) return 'not an audio or video format';
  let line = lines.pop() ?? '';
  if (input) line = line.replaceAll(`file:${resolve(input)}`, 'the recording').replaceAll(input, 'the recording');
  return line
    .replace(/\b[a-z][a-z0-9+.-]*:\/\/\S+/gi, 'a URL')
    .replace(/(file:)?\/[^\s:'"]+/g, 'a path')
    .replace(/^\[[^\]]*@ 0x[0-9a-f]+\]\s*/, '')
    .replace(/^the recording: /, '')
    .slice(0, 200);
}
