/**
 * A recording's audio track, made small for transcription by ffmpeg (the `FFMPEG_PATH` setting):
 * mono, 16 kHz, MP3 at 32 kbit/s (what every OpenAI-compatible server takes; speech models hear
 * 16 kHz), cut into pieces of `pieceSeconds` (10 minutes: 2.4 MB, far under OpenAI's 25 MB a file),
 * each with where it starts in the recording. ffprobe (beside ffmpeg) first says whether there is an
 * audio track at all. The work happens in a temporary directory, removed whatever happens.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { settings } from '../../shared/settings.js';
import type { ExtractFailure } from './types.js';

const run = promisify(execFile);

export interface AudioTrackOptions {
  /** Longest piece sent in one call, seconds (default 600). */
  pieceSeconds?: number;
  /** Longest time ffprobe, then ffmpeg, may take over the whole recording, ms (default 5 minutes each). */
  timeoutMs?: number;
  /** Longest recording taken, seconds (default MAX_RECORDING_SECONDS). */
  maxSeconds?: number;
}

export const DEFAULT_PIECE_SECONDS = 600;
export const DEFAULT_FFMPEG_TIMEOUT_MS = 5 * 60_000;
/** Longer recordings are `too_large`: at 10 minutes a call, more would not finish within one processing run. */
export const MAX_RECORDING_SECONDS = 6 * 3600;

export interface AudioPiece {
  /** Seconds from the recording's start to the piece's. */
  offsetS: number;
  filename: string;
  contentType: string;
  read(): Promise<Uint8Array>;
}

export type TrackFailure = { failed: ExtractFailure; message?: string };
/** ffmpeg or ffprobe is not where `FFMPEG_PATH` says. */
export const NO_FFMPEG = { missing: 'ffmpeg' } as const;

/** ffprobe is looked for beside ffmpeg (both come in Debian's package and in static builds). */
export function programs(): { ffmpeg: string; ffprobe: string } {
  const ffmpeg = settings().ffmpegPath;
  return { ffmpeg, ffprobe: ffmpeg.includes('/') ? join(dirname(ffmpeg), 'ffprobe') : 'ffprobe' };
}

/** Not there, or not a program this process may run. */
export const isMissing = (error: unknown) => ['ENOENT', 'EACCES'].includes((error as { code?: string })?.code ?? '');
/** execFile killed it at its `timeout`. */
const isTimeout = (error: unknown) => (error as { killed?: unknown })?.killed === true;

/**
 * Whether both programs run, asked once per process and path: where they are missing (a Lambda
 * function), the recording is not written to the temporary directory for nothing.
 */
const installed = new Map<string, Promise<boolean>>();
function isInstalled(ffmpeg: string, ffprobe: string): Promise<boolean> {
  let answer = installed.get(ffmpeg);
  if (!answer) {
    const runs = (program: string) => run(program, ['-version'], { timeout: 10_000 }).then(() => true, (error: unknown) => !isMissing(error));
    answer = Promise.all([runs(ffmpeg), runs(ffprobe)]).then(([a, b]) => a && b);
    installed.set(ffmpeg, answer);
  }
  return answer;
}

/**
 * Runs `use` over the recording's audio pieces (in order) and gives back what it answers; or why
 * there are none: `parse_error` (ffmpeg cannot read the file), `empty_text` (no audio track),
 * `too_large` (too long, or ffmpeg past its time); or NO_FFMPEG.
 */
export async function withAudioPieces<T>(
  bytes: Uint8Array,
  options: AudioTrackOptions,
  signal: AbortSignal | undefined,
  use: (pieces: AudioPiece[]) => Promise<T>,
): Promise<T | TrackFailure | typeof NO_FFMPEG> {
  const { ffmpeg, ffprobe } = programs();
  const timeout = options.timeoutMs ?? DEFAULT_FFMPEG_TIMEOUT_MS;
  const pieceSeconds = options.pieceSeconds ?? DEFAULT_PIECE_SECONDS;
  if (!(await isInstalled(ffmpeg, ffprobe))) return NO_FFMPEG;
  const dir = await mkdtemp(join(tmpdir(), 'recording-'));
  try {
    const input = join(dir, 'recording');
    await writeFile(input, bytes);
    let probe: { streams?: { codec_type?: string }[]; format?: { duration?: string } };
    try {
      const { stdout } = await run(ffprobe, ['-v', 'error', '-show_entries', 'format=duration:stream=codec_type', '-of', 'json', input], { timeout, signal, maxBuffer: 1024 * 1024 });
      probe = JSON.parse(stdout) as typeof probe;
    } catch (error) {
      if (isMissing(error)) return NO_FFMPEG;
      if (signal?.aborted) throw error;
      if (isTimeout(error)) return tooSlow(timeout);
      return { failed: 'parse_error' };
    }
    if (!probe.streams?.some((s) => s.codec_type === 'audio')) return { failed: 'empty_text' };
    const duration = Number(probe.format?.duration);
    const maxSeconds = options.maxSeconds ?? MAX_RECORDING_SECONDS;
    if (duration > maxSeconds) return { failed: 'too_large', message: `The recording is longer than ${maxSeconds >= 3600 ? `${maxSeconds / 3600} hours` : `${maxSeconds} seconds`}, the most transcribed.` };
    const args = [
      ...['-nostdin', '-v', 'error', '-i', input, '-map', '0:a:0', '-vn', '-ac', '1', '-ar', '16000', '-c:a', 'libmp3lame', '-b:a', '32k'],
      ...['-f', 'segment', '-segment_time', String(evenPieces(duration, pieceSeconds)), '-reset_timestamps', '1'],
      ...['-segment_list', join(dir, 'pieces.csv'), '-segment_list_type', 'csv', join(dir, 'piece%04d.mp3')],
    ];
    try {
      await run(ffmpeg, args, { timeout, signal, maxBuffer: 1024 * 1024 });
    } catch (error) {
      if (isMissing(error)) return NO_FFMPEG;
      if (signal?.aborted) throw error;
      if (isTimeout(error)) return tooSlow(timeout);
      // The container opened but its audio does not decode.
      return { failed: 'parse_error' };
    }
    // One line a piece: `piece0000.mp3,0.000000,600.024000` (name, start, end).
    const pieces = (await readFile(join(dir, 'pieces.csv'), 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((line) => line.split(','))
      // The encoder pads its output a few frames past the source's end: a piece starting there holds only that.
      .filter(([, start], i) => i === 0 || !(Number(start) >= duration - END_PADDING_SECONDS))
      .map(([name, start]): AudioPiece => ({ offsetS: Number(start), filename: name, contentType: 'audio/mpeg', read: async () => readFile(join(dir, name)) }));
    if (!pieces.length) return { failed: 'empty_text' };
    return await use(pieces);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** More than the MP3 encoder's padding at the end of its output (a frame of 72 ms at 16 kHz, and its delay). */
export const END_PADDING_SECONDS = 0.2;

/**
 * The piece length that cuts `duration` into equal pieces of about `pieceSeconds` at most: not 10
 * minutes and a last piece of a few frames when a recording is a hair over 10 minutes (OpenAI refuses
 * audio under 0.1 s, and a piece of a second is a call for nothing). A piece may
 * be over `pieceSeconds` by 1% of it (at most a second: a few kB); an unknown duration cuts at `pieceSeconds`.
 */
export function evenPieces(duration: number, pieceSeconds: number): number {
  if (!(duration > 0)) return pieceSeconds;
  const slack = Math.min(1, pieceSeconds / 100);
  return duration / Math.max(1, Math.ceil((duration - slack) / pieceSeconds));
}

const tooSlow = (ms: number): TrackFailure => ({ failed: 'too_large', message: `Taking the audio track out of the recording took longer than ${Math.round(ms / 1000)} s.` });
