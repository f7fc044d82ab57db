/**
 * A recording's text: its audio track (audio-track.ts) transcribed through the organization's
 * transcription route (its default route of `/v1/audio/transcriptions`, an openai-compatible one)
 * inside the AI gateway's limits, timeout and usage records, piece by piece; the segments, put back
 * on the recording's clock, become sections located by time (`t=00:12:05-00:13:10`). A recording
 * that gives no text answers why, as extractText does; an upstream that fails or answers junk
 * throws its PlatformError (upstream_error, route_unavailable, timeout_error, a 429), which
 * processing retries. Decisions: docs/decisions/knowledge-media.md.
 */
import type { Principal } from '../../auth/principal.js';
import type { Engine } from '../../engine/ports.js';
import { ModelRoutes, type ModelRoute } from '../../ai/model-routes.js';
import { transcription } from '../../ai/gateway.js';
import { mediaType } from './detect.js';
import { withAudioPieces, type AudioPiece, type AudioTrackOptions } from './audio-track.js';
import { MAX_OUTPUT_CHARS, timeLocator, type Extracted, type Section } from './types.js';

export const TRANSCRIPTION_ENDPOINT = '/v1/audio/transcriptions';

export interface RecordingFile {
  bytes: Uint8Array;
  contentType: string;
  filename: string;
  format: 'audio' | 'video';
}

export interface RecordingOptions extends AudioTrackOptions {
  /** Consecutive segments are joined into sections of at most this many seconds (default 60; 0: a section a segment). */
  sectionSeconds?: number;
}

export const DEFAULT_SECTION_SECONDS = 60;
/** A joined section stays under one chunk (800 tokens): about 600 tokens of text. */
const MAX_SECTION_CHARS = 2400;

/** What OpenAI's transcription API takes, by content type, with the extension it reads the format from. */
const SENT_AS_IS: Record<string, string> = {
  'audio/flac': 'flac',
  'audio/x-flac': 'flac',
  'audio/mpeg': 'mp3',
  'audio/mp3': 'mp3',
  'audio/mp4': 'm4a',
  'audio/m4a': 'm4a',
  'audio/x-m4a': 'm4a',
  'audio/ogg': 'ogg',
  'audio/wav': 'wav',
  'audio/x-wav': 'wav',
  'audio/wave': 'wav',
  'audio/webm': 'webm',
  'video/mp4': 'mp4',
  'video/mpeg': 'mpeg',
  'video/webm': 'webm',
};
/** OpenAI's limit of one file (25 MB). */
export const MAX_AS_IS_BYTES = 25_000_000;

const NO_ROUTE_MESSAGE =
  "Recordings are transcribed through the organization's default route of /v1/audio/transcriptions, and it has none: configure one with `npm run admin -- route set --org <org> --id <route> --endpoint /v1/audio/transcriptions --provider openai-compatible --base-url <url> --model <model> --default`, then add the item again.";

export async function transcribeRecording(engine: Engine, principal: Principal, file: RecordingFile, signal?: AbortSignal, options: RecordingOptions = {}): Promise<Extracted> {
  const route = (await new ModelRoutes(engine.kv, () => engine.clock.now()).list(principal.organizationId)).find((r) => r.endpoint === TRANSCRIPTION_ENDPOINT && r.default);
  if (!route) return { failed: 'unsupported_type', message: NO_ROUTE_MESSAGE };
  const transcribeAll = (pieces: AudioPiece[]) => transcribePieces(engine, principal, route, pieces, signal, options);
  const cut = await withAudioPieces(file.bytes, options, signal, transcribeAll);
  if (!('missing' in cut)) return cut;
  // Without ffmpeg (a Lambda function has none): a file the API takes as it is goes whole.
  const extension = SENT_AS_IS[mediaType(file.contentType)];
  if (extension === undefined || file.bytes.length > MAX_AS_IS_BYTES) {
    return {
      failed: 'unsupported_type',
      message: `ffmpeg is not installed where this item was processed (FFMPEG_PATH), so only a recording of at most 25 MB in a format the transcription API takes (${[...new Set(Object.values(SENT_AS_IS))].join(', ')}) can be transcribed.`,
    };
  }
  return transcribeAll([{ offsetS: 0, filename: `recording.${extension}`, contentType: mediaType(file.contentType), read: async () => file.bytes }]);
}

async function transcribePieces(engine: Engine, principal: Principal, route: ModelRoute, pieces: AudioPiece[], signal: AbortSignal | undefined, options: RecordingOptions): Promise<Extracted> {
  const joiner = new SectionJoiner(options.sectionSeconds ?? DEFAULT_SECTION_SECONDS);
  // One piece at a time: a recording holds one of the organization's concurrent calls, and one piece in memory.
  for (const piece of pieces) {
    const { segments } = await transcription({ engine, principal, signal }, route, { bytes: await piece.read(), filename: piece.filename, contentType: piece.contentType });
    for (const s of segments) joiner.add(piece.offsetS + s.start, piece.offsetS + s.end, s.text.trim());
  }
  const sections = joiner.sections();
  if (!sections.length) return { failed: 'empty_text' };
  let chars = 0;
  for (const s of sections) chars += s.text.length;
  return chars > MAX_OUTPUT_CHARS ? { failed: 'too_large' } : { sections };
}

/**
 * Joins consecutive segments (a few seconds each) into sections of up to `maxSeconds` and about 600
 * tokens: a chunk never spans two sections, and a chunk a segment would be a few words, too little
 * to search by; a minute still cites a precise place.
 */
export class SectionJoiner {
  private done: Section[] = [];
  private open: { start: number; end: number; texts: string[]; chars: number } | undefined;

  constructor(private readonly maxSeconds: number = DEFAULT_SECTION_SECONDS) {}

  add(start: number, end: number, text: string): void {
    if (!text) return;
    const o = this.open;
    if (o && end - o.start <= this.maxSeconds && o.chars + 1 + text.length <= MAX_SECTION_CHARS) {
      o.texts.push(text);
      o.chars += 1 + text.length;
      o.end = Math.max(o.end, end);
      return;
    }
    this.close();
    this.open = { start, end, texts: [text], chars: text.length };
  }

  sections(): Section[] {
    this.close();
    return this.done;
  }

  private close(): void {
    if (this.open) this.done.push({ text: this.open.texts.join(' '), locator: timeLocator(this.open.start, this.open.end) });
    this.open = undefined;
  }
}
