/**
 * Provider `openai-compatible` on `/v1/audio/transcriptions`: one audio file POSTed as OpenAI's
 * multipart form (`file`, `model` = the route's upstream model, `response_format=verbose_json`,
 * `timestamp_granularities[]=segment`) to `{base_url}/audio/transcriptions`, with the route's key.
 * The answer's segments come back checked (seconds, finite, in order) or the call is 502
 * upstream_error: whatever else the upstream says is no transcript.
 */
import { randomBytes } from 'node:crypto';
import type { UpstreamCall } from '../../types.js';
import type { CallUsage } from '../../usage.js';
import { upstreamError } from '../../upstream-errors.js';
import { jsonAnswer, MAX_ANSWER_BYTES, post } from '../upstream-http.js';

export interface AudioFile {
  bytes: Uint8Array;
  /** The name the upstream sees: OpenAI reads the format from its extension. */
  filename: string;
  contentType: string;
  /**
   * The file's own length in seconds, when the caller knows it (ffprobe): the seconds the call is
   * charged when the upstream reports no duration, since a route priced by the minute must not
   * make such a call free, nor charge only up to its last segment's end.
   */
  audioSecondsFallback?: number;
  /** The spoken language's ISO 639-1 code, a hint (OpenAI's `language`); a BCP 47 tag's first subtag. */
  language?: string;
}

export interface TranscriptSegment {
  /** Seconds from the file's start. */
  start: number;
  end: number;
  text: string;
}

export interface Transcript {
  segments: TranscriptSegment[];
  /** What the call used: the tokens the upstream reported (0 when none) and the seconds of audio. */
  usage: CallUsage;
}

/**
 * The multipart body (RFC 7578) as its parts, the audio's own bytes among them uncopied, and its
 * content type. Written here rather than by the runtime's FormData, which copied a 2.4 MB piece three
 * times (into a Blob, through a stream, into one buffer): a knowledge job sends an hour as six of them
 * (docs/benchmarks.md, issue 36). Names and the filename escaped as FormData does (`"`, CR, LF).
 */
function form(call: UpstreamCall, audio: AudioFile): { body: Uint8Array[]; contentType: string } {
  const boundary = `----platform-${randomBytes(16).toString('hex')}`;
  const escape = (v: string) => v.replace(/"/g, '%22').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  const field = (name: string, value: string) => `--${boundary}\r\nContent-Disposition: form-data; name="${escape(name)}"\r\n\r\n${value.replace(/\r?\n|\r/g, '\r\n')}\r\n`;
  const fields: [string, string][] = [];
  if (call.route.upstream_model !== null) fields.push(['model', call.route.upstream_model]);
  fields.push(['response_format', 'verbose_json']);
  if (audio.language) fields.push(['language', audio.language.split('-')[0].toLowerCase()]);
  fields.push(['timestamp_granularities[]', 'segment']);
  const head = `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${escape(audio.filename)}"\r\nContent-Type: ${audio.contentType.replace(/[\r\n]/g, '')}\r\n\r\n`;
  const tail = `\r\n${fields.map(([name, value]) => field(name, value)).join('')}--${boundary}--\r\n`;
  return { body: [Buffer.from(head, 'utf8'), audio.bytes, Buffer.from(tail, 'utf8')], contentType: `multipart/form-data; boundary=${boundary}` };
}

const seconds = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v) && v >= 0;
const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

export async function transcribe(call: UpstreamCall, audio: AudioFile): Promise<Transcript> {
  const { body, contentType } = form(call, audio);
  const headers: Record<string, string> = { 'content-type': contentType, accept: 'application/json' };
  if (call.apiKey) headers.authorization = `Bearer ${call.apiKey}`;
  const res = await post(`${call.route.base_url!.replace(/\/+$/, '')}/audio/transcriptions`, headers, body, call.signal);
  const answer = await jsonAnswer(res, call.route.max_answer_bytes ?? MAX_ANSWER_BYTES, call.signal);
  if (!isObject(answer)) throw upstreamError('the transcription is not a JSON object');
  const segments = segmentsOf(answer);
  return { segments, usage: { ...reportedTokens(answer.usage), audioSeconds: audioSecondsOf(answer, segments, audio.audioSecondsFallback) } };
}

/**
 * The seconds of audio the call is charged and recorded with: the upstream's `duration` (or whisper's
 * `usage: {type: 'duration', seconds}`); else the caller's own measure of the file; else the last
 * segment's end (0 for a silent file), the least the upstream heard.
 */
function audioSecondsOf(answer: Record<string, unknown>, segments: TranscriptSegment[], fallback: number | undefined): number {
  if (seconds(answer.duration)) return answer.duration;
  if (isObject(answer.usage) && answer.usage.type === 'duration' && seconds(answer.usage.seconds)) return answer.usage.seconds;
  if (seconds(fallback)) return fallback;
  return segments.reduce((end, s) => Math.max(end, s.end), 0);
}

/** The answer's segments; without any, its whole `text` as one segment over its `duration`. */
function segmentsOf(answer: Record<string, unknown>): TranscriptSegment[] {
  if (answer.segments !== undefined && answer.segments !== null) {
    if (!Array.isArray(answer.segments)) throw upstreamError('the transcription has segments that are not a list');
    const segments: TranscriptSegment[] = [];
    for (const s of answer.segments as unknown[]) {
      if (!isObject(s) || !seconds(s.start) || !seconds(s.end) || s.end < s.start || typeof s.text !== 'string') {
        throw upstreamError('the transcription has a segment without a text and finite start and end times');
      }
      segments.push({ start: s.start, end: s.end, text: s.text });
    }
    if (segments.length) return segments;
  }
  if (typeof answer.text !== 'string') throw upstreamError('the transcription has neither segments nor text');
  if (!/\S/.test(answer.text)) return [];
  if (!seconds(answer.duration)) throw upstreamError('the transcription has text without segments or a finite duration');
  return [{ start: 0, end: answer.duration, text: answer.text }];
}

/** OpenAI's `usage` of a transcription: `{type: 'tokens', input_tokens, output_tokens}` (gpt-4o-transcribe) or `{type: 'duration', seconds}` (whisper-1). */
function reportedTokens(usage: unknown): CallUsage {
  const count = (v: unknown) => (Number.isSafeInteger(v) && (v as number) >= 0 ? (v as number) : 0);
  return isObject(usage) ? { inputTokens: count(usage.input_tokens), outputTokens: count(usage.output_tokens) } : { inputTokens: 0, outputTokens: 0 };
}
