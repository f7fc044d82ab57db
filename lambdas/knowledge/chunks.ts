/**
 * Chunking by tokens (cl100k_base, the tokenizer of OpenAI's embedding models): about `maxTokens`
 * a chunk, each repeating about `overlapTokens` of the one before, as OpenAI's file search does
 * (800 and 400). A chunk never spans two sections, so it has one locator: a section within the
 * budget is one chunk, a longer one is cut at sentence ends, at a paragraph's end where one falls in
 * the chunk's second half, and only inside a sentence (at words) when a sentence alone is over the
 * budget. A plain-text section (`line=N`) gives each chunk its own line range (`line=N-M`).
 */
import { Tiktoken } from 'js-tiktoken/lite';
import cl100k_base from 'js-tiktoken/ranks/cl100k_base';
import type { Section } from './extract/types.js';

export interface Chunk {
  /** `chk_` and the chunk's position in the document, from 000000: the same input gives the same ids. */
  chunk_id: string;
  text: string;
  locator: string;
  tokens: number;
}

export interface ChunkOptions {
  maxTokens?: number;
  overlapTokens?: number;
}

export const DEFAULT_MAX_TOKENS = 800;
export const DEFAULT_OVERLAP_TOKENS = 400;

let encoder: Tiktoken | undefined;
/** Building the tokenizer's table takes most of a second: done at the first count, not at import. */
function tokenizer(): Tiktoken {
  encoder ??= new Tiktoken(cl100k_base);
  return encoder;
}

/** A run of this many characters without a space is counted in slices (see countTokens). */
const LONG_RUN = 256;
const LONG_RUNS = new RegExp(`\\S{${LONG_RUN},}`, 'g');
const RUN_SLICE = 32;

/**
 * The number of cl100k_base tokens of `text`. js-tiktoken's merging takes time quadratic in a run
 * without spaces (8,000 letters: 4 s), and a document may hold one (a DNA sequence, an inlined
 * image): such runs are counted in slices of 32 characters (the merging is quadratic in a slice too), exact for ordinary text and within a
 * token a slice for them.
 */
export function countTokens(text: string): number {
  const encoder = tokenizer();
  if (text.length < LONG_RUN || !LONG_RUNS.test(text)) return encoder.encode(text).length;
  LONG_RUNS.lastIndex = 0;
  let count = 0;
  let from = 0;
  for (const run of text.matchAll(LONG_RUNS)) {
    count += encoder.encode(text.slice(from, run.index)).length;
    for (let i = 0; i < run[0].length; i += RUN_SLICE) count += encoder.encode(run[0].slice(i, i + RUN_SLICE)).length;
    from = run.index + run[0].length;
  }
  return count + encoder.encode(text.slice(from)).length;
}

/** A piece of a section's text, by offsets: a sentence, or a run of words of a sentence over the budget. */
interface Unit {
  start: number;
  end: number;
  tokens: number;
  /** The last unit of a paragraph: the preferred place to end a chunk. */
  paragraphEnd: boolean;
}

export function chunkSections(sections: Section[], options: ChunkOptions = {}): Chunk[] {
  const max = options.maxTokens ?? DEFAULT_MAX_TOKENS;
  const overlap = options.overlapTokens ?? DEFAULT_OVERLAP_TOKENS;
  if (!Number.isInteger(max) || max < 1) throw new RangeError('maxTokens must be a positive integer');
  if (!Number.isInteger(overlap) || overlap < 0 || overlap >= max) throw new RangeError('overlapTokens must be an integer from 0 to maxTokens - 1');

  const chunks: Chunk[] = [];
  for (const section of sections) {
    const locate = locatorOf(section);
    const emit = (start: number, end: number, tokens: number) =>
      chunks.push({ chunk_id: `chk_${String(chunks.length).padStart(6, '0')}`, text: section.text.slice(start, end), locator: locate(start, end), tokens });
    const start = section.text.search(/\S/);
    if (start < 0) continue;
    const end = section.text.trimEnd().length;
    const whole = countTokens(section.text.slice(start, end));
    if (whole <= max) {
      emit(start, end, whole);
      continue;
    }
    const units = unitsOf(section.text, max);
    let i = 0;
    while (i < units.length) {
      let j = windowEnd(units, i, max);
      let tokens = countTokens(section.text.slice(units[i].start, units[j - 1].end));
      // Units are counted alone; joined, a few tokens may merge or split differently at their seams.
      while (tokens > max && j - 1 > i) {
        j--;
        tokens = countTokens(section.text.slice(units[i].start, units[j - 1].end));
      }
      emit(units[i].start, units[j - 1].end, tokens);
      if (j >= units.length) break;
      let next = j;
      let repeated = 0;
      while (next - 1 > i && repeated + units[next - 1].tokens <= overlap) {
        repeated += units[next - 1].tokens;
        next--;
      }
      i = next;
    }
  }
  return chunks;
}

/** Where the chunk starting at unit `i` ends (exclusive): as many units as fit, cut back to a paragraph's end in its second half. */
function windowEnd(units: Unit[], i: number, max: number): number {
  let j = i;
  let sum = 0;
  while (j < units.length && (j === i || sum + units[j].tokens <= max)) sum += units[j++].tokens;
  if (j === units.length || units[j - 1].paragraphEnd) return j;
  let upTo = sum;
  for (let k = j - 1; k > i; k--) {
    upTo -= units[k].tokens;
    if (upTo < max / 2) break;
    if (units[k - 1].paragraphEnd) return k;
  }
  return j;
}

const segmenter = new Intl.Segmenter(undefined, { granularity: 'sentence' });
const PARAGRAPH_BREAK = /\n[^\S\n]*\n\s*/g;

/** The section's sentences, paragraph by paragraph; a sentence over the budget as runs of words within it. */
function unitsOf(text: string, max: number): Unit[] {
  const units: Unit[] = [];
  let from = 0;
  for (const gap of [...text.matchAll(PARAGRAPH_BREAK), { index: text.length, 0: '' }]) {
    const paragraph = text.slice(from, gap.index);
    const first = units.length;
    for (const { segment, index } of segmenter.segment(paragraph)) {
      const lead = segment.search(/\S/);
      if (lead < 0) continue;
      const start = from + index + lead;
      const end = from + index + segment.trimEnd().length;
      const tokens = countTokens(text.slice(start, end));
      if (tokens <= max) units.push({ start, end, tokens, paragraphEnd: false });
      else units.push(...wordRuns(text, start, end, max));
    }
    if (units.length > first) units[units.length - 1].paragraphEnd = true;
    from = gap.index! + gap[0].length;
  }
  return units;
}

/** A sentence over the budget as runs of whole words within it (and a word over it in pieces). */
function wordRuns(text: string, start: number, end: number, max: number): Unit[] {
  const runs: Unit[] = [];
  let runStart = -1;
  let runEnd = -1;
  let runTokens = 0;
  const close = () => {
    if (runStart >= 0) runs.push({ start: runStart, end: runEnd, tokens: countTokens(text.slice(runStart, runEnd)), paragraphEnd: false });
    runStart = -1;
    runTokens = 0;
  };
  for (const word of text.slice(start, end).matchAll(/\S+/g)) {
    const wStart = start + word.index!;
    const wEnd = wStart + word[0].length;
    const tokens = countTokens(text.slice(wStart, wEnd)) + 1;
    if (tokens > max) {
      close();
      runs.push(...pieces(text, wStart, wEnd, max));
      continue;
    }
    if (runStart >= 0 && runTokens + tokens > max) close();
    if (runStart < 0) runStart = wStart;
    runEnd = wEnd;
    runTokens += tokens;
  }
  close();
  return runs;
}

/** A "word" over the budget (a long identifier, an encoded blob) cut into pieces of at most `max` tokens. */
function pieces(text: string, start: number, end: number, max: number): Unit[] {
  const out: Unit[] = [];
  let at = start;
  // No token is longer than 16 characters in practice: the first piece starts there rather than count the
  // whole rest; the next ones from the characters a token took in the piece before, so each is counted
  // about once (16 characters a token for a word of one character a token cost most of the chunking's time).
  let perToken = 16;
  while (at < end) {
    let to = Math.min(end, at + Math.ceil(max * perToken));
    let tokens = countTokens(text.slice(at, to));
    while (tokens > max) {
      to = at + Math.max(1, Math.floor(((to - at) * max) / tokens * 0.9));
      tokens = countTokens(text.slice(at, to));
    }
    out.push({ start: at, end: to, tokens, paragraphEnd: false });
    perToken = Math.min(16, ((to - at) / Math.max(1, tokens)) * 1.1);
    at = to;
  }
  return out;
}

/** A section's chunks' locator: its own; for plain text (`line=N`), the lines a chunk spans. */
function locatorOf(section: Section): (start: number, end: number) => string {
  const line = /^line=(\d+)$/.exec(section.locator);
  if (!line) return () => section.locator;
  const breaks: number[] = [];
  for (let i = section.text.indexOf('\n'); i >= 0; i = section.text.indexOf('\n', i + 1)) breaks.push(i);
  const lineAt = (offset: number) => Number(line[1]) + before(breaks, offset);
  return (start, end) => `line=${lineAt(start)}-${lineAt(end - 1)}`;
}

/** How many of the sorted `values` are below `x`. */
function before(values: number[], x: number): number {
  let lo = 0;
  let hi = values.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (values[mid] < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
