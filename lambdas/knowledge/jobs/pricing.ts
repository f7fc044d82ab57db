/**
 * A knowledge job's price, estimated at its start before any paid work (docs/ai/knowledge-jobs.md,
 * "Price", with a worked example). Every part is the most the job's calls can cost as they are made:
 * each chat call at its input and its whole output ceiling, so a job that runs as estimated never
 * stops at its own price. Routes without a price cost 0. All amounts in micro-USD.
 *
 *   minutes      = the recording's duration / 60
 *   T (tokens)   = the given transcript's tokens as sent (its lines with stamps), else
 *                  minutes x SPOKEN_TOKENS_PER_MINUTE (fast speech) + a stamp per SECONDS_PER_LINE
 *   transcribe   = minutes x the transcription route's price_per_minute (0 with a given transcript)
 *   extraction   = passes x calls(T) x (window in + prompt + notes in + EXTRACTION_MAX_OUTPUT_TOKENS out)
 *                  where passes is 2 at power `max`, and a window is min(T, 6,000) tokens
 *   reconcile    = calls(entries) x (batch in + prompt in + the batch's output ceiling), entries
 *                  = ENTRIES_PER_CALL x the extraction calls (unless light or switched off)
 *   captions     = power `max` with video: max_pointers x (IMAGE_TOKENS + prompt + entry in + CAPTION_OUTPUT out)
 *   summary      = one call: entries x ENTRY_TOKENS in + SUMMARY_OUTPUT out
 *   embeddings   = (T x CHUNK_OVERLAP_FACTOR + entries x ENTRY_TOKENS + max_pointers x ENTRY_TOKENS) tokens
 */
import type { ModelRoute } from '../../ai/model-routes.js';
import { IMAGE_TOKENS_BOUND } from '../../ai/estimate.js';
import { estimateExtractionCalls, EXTRACTION_MAX_OUTPUT_TOKENS, EXTRACTION_NOTES_MAX_TOKENS, EXTRACTION_WINDOW_TOKENS, LINE_STAMP_TOKENS } from './entries.js';
import { estimateReconcileCalls, RECONCILE_BATCH, RECONCILE_MAX_OUTPUT_TOKENS } from './reconcile.js';
import type { Power } from './request.js';

/** Fast speech: some 190 words a minute at 1.3 tokens a word. */
export const SPOKEN_TOKENS_PER_MINUTE = 250;
/** A transcription segment is a few seconds: a stamp per this many seconds. */
export const SECONDS_PER_LINE = 6;
/** A system prompt and its instructions, per chat call. */
export const PROMPT_TOKENS = 700;
/** Entries expected of one extraction window (a dense meeting: one every 150 tokens). */
export const ENTRIES_PER_CALL = 40;
/** An entry as sent to a check, the summary or the index: kind, statement, quote, times. */
export const ENTRY_TOKENS = 120;
/** An image as the job's caption call holds it: the most any model we know counts one (ai/estimate.ts). */
export const IMAGE_TOKENS = IMAGE_TOKENS_BOUND;
export const CAPTION_OUTPUT_TOKENS = 200;
export const SUMMARY_OUTPUT_TOKENS = 600;
/** The transcript's chunks overlap (chunks.ts: 800 tokens, 400 of overlap at most): at most twice its tokens are embedded. */
export const CHUNK_OVERLAP_FACTOR = 2;

export interface PriceInput {
  duration_s: number;
  video: boolean;
  /** Tokens of the given transcript as sent; null when it is to be transcribed. */
  transcriptTokens: number | null;
  notesTokens: number;
  power: Power;
  reconcile: boolean;
  frames: boolean;
  max_pointers: number;
  routes: { chat: ModelRoute; transcription: ModelRoute | null; embeddings: ModelRoute | null };
}

export interface PriceEstimate {
  /** The parts, micro-USD (whole, rounded up). */
  transcription: number;
  extraction: number;
  reconciliation: number;
  captions: number;
  summary: number;
  embeddings: number;
  total: number;
  /** What the parts were computed from, for the docs and the job's log. */
  basis: { minutes: number; transcript_tokens: number; extraction_calls: number; entries: number; reconcile_calls: number };
}

const chatMicro = (route: ModelRoute, input: number, output: number) => ((route.price_in_per_mtok ?? 0) * input + (route.price_out_per_mtok ?? 0) * output);
const up = (micro: number) => Math.ceil(Math.round(micro * 1000) / 1000);

export function estimatePrice(p: PriceInput): PriceEstimate {
  const minutes = p.duration_s / 60;
  const T = p.transcriptTokens ?? Math.ceil(minutes * SPOKEN_TOKENS_PER_MINUTE + (p.duration_s / SECONDS_PER_LINE) * LINE_STAMP_TOKENS);
  const transcription = p.transcriptTokens === null ? (p.routes.transcription?.price_per_minute ?? 0) * minutes * 1e6 : 0;
  const calls = estimateExtractionCalls(T);
  const passes = p.power === 'max' ? 2 : 1;
  const notes = Math.min(p.notesTokens, EXTRACTION_NOTES_MAX_TOKENS);
  const window = Math.min(T, EXTRACTION_WINDOW_TOKENS);
  // The second pass also sends what the first found.
  const entries = calls * ENTRIES_PER_CALL * passes;
  const extraction = calls * chatMicro(p.routes.chat, window + PROMPT_TOKENS + notes, EXTRACTION_MAX_OUTPUT_TOKENS) + (passes === 2 ? calls * chatMicro(p.routes.chat, window + PROMPT_TOKENS + notes + ENTRIES_PER_CALL * ENTRY_TOKENS, EXTRACTION_MAX_OUTPUT_TOKENS) : 0);
  const reconcileCalls = p.reconcile ? estimateReconcileCalls(entries) : 0;
  const reconciliation = reconcileCalls * chatMicro(p.routes.chat, RECONCILE_BATCH * ENTRY_TOKENS + PROMPT_TOKENS, RECONCILE_MAX_OUTPUT_TOKENS);
  const frames = p.video && p.frames ? p.max_pointers : 0;
  const captions = p.power === 'max' ? frames * chatMicro(p.routes.chat, IMAGE_TOKENS + PROMPT_TOKENS + ENTRY_TOKENS, CAPTION_OUTPUT_TOKENS) : 0;
  const summary = chatMicro(p.routes.chat, entries * ENTRY_TOKENS + PROMPT_TOKENS, SUMMARY_OUTPUT_TOKENS);
  const embedded = T * CHUNK_OVERLAP_FACTOR + entries * ENTRY_TOKENS + frames * ENTRY_TOKENS;
  const embeddings = p.routes.embeddings ? (p.routes.embeddings.price_in_per_mtok ?? 0) * embedded : 0;
  const parts = { transcription: up(transcription), extraction: up(extraction), reconciliation: up(reconciliation), captions: up(captions), summary: up(summary), embeddings: up(embeddings) };
  return {
    ...parts,
    total: Object.values(parts).reduce((a, b) => a + b, 0),
    basis: { minutes: Math.round(minutes * 100) / 100, transcript_tokens: T, extraction_calls: calls * passes, entries, reconcile_calls: reconcileCalls },
  };
}
