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

/** A run of this many characters without a space, or of this many spaces, is counted in slices (see countTokens). */
const LONG_RUN = 256;
const LONG_SPACE = 64;
const RUN_SLICE = 32;

/** JavaScript's `\s`, by UTF-16 code unit. */
function isSpace(c: number): boolean {
  return c === 32 || (c >= 9 && c <= 13) || c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

/**
 * The long runs of `text` (`\S{256,}|\s{64,}`: maximal runs of at least LONG_RUN characters without
 * a space, or of LONG_SPACE spaces), by one scan of its characters: that regular expression overflowed
 * V8's stack on a run of some 5 million characters (a 6 MB transcript of one word answered 500).
 */
function longRuns(text: string): { index: number; length: number }[] {
  const runs: { index: number; length: number }[] = [];
  let start = 0;
  let space = text.length > 0 && isSpace(text.charCodeAt(0));
  for (let i = 1; i <= text.length; i++) {
    const here = i < text.length && isSpace(text.charCodeAt(i));
    if (i < text.length && here === space) continue;
    if (i - start >= (space ? LONG_SPACE : LONG_RUN)) runs.push({ index: start, length: i - start });
    start = i;
    space = here;
  }
  return runs;
}

/**
 * The number of cl100k_base tokens of `text`. js-tiktoken's merging takes time quadratic in a run
 * without spaces (8,000 letters: 4 s), and a document may hold one (a DNA sequence, an inlined
 * image), or long runs of spaces (indentation: 64 KiB of deeply indented list lines took 4 s to
 * count a few times): such runs are counted in slices of 32 characters (the merging is quadratic in a
 * slice too), exact for ordinary text and within a token a slice for them.
 */
export function countTokens(text: string): number {
  const encoder = tokenizer();
  const runs = text.length < LONG_SPACE ? [] : longRuns(text);
  if (!runs.length) return encoder.encode(text).length;
  let count = 0;
  let from = 0;
  for (const run of runs) {
    count += encoder.encode(text.slice(from, run.index)).length;
    const end = run.index + run.length;
    for (let i = run.index; i < end; i += RUN_SLICE) count += sliceTokens(encoder, text.slice(i, Math.min(end, i + RUN_SLICE)));
    from = end;
  }
  return count + encoder.encode(text.slice(from)).length;
}

/**
 * Slices of long runs, counted once: such runs repeat (1 MiB of `[`, a base64 padding, a rule of
 * dashes), and each slice's merging costs about 0.1 ms, so a 1 MiB run counted slice by slice each
 * time a chunk is measured took 20 s. Bounded: cleared when full.
 */
const sliceCounts = new Map<string, number>();
const MAX_SLICE_COUNTS = 4096;
function sliceTokens(encoder: Tiktoken, slice: string): number {
  let n = sliceCounts.get(slice);
  if (n === undefined) {
    if (sliceCounts.size >= MAX_SLICE_COUNTS) sliceCounts.clear();
    n = encoder.encode(slice).length;
    sliceCounts.set(slice, n);
  }
  return n;
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
      const count = (end: number) => countTokens(section.text.slice(units[i].start, units[end - 1].end));
      let tokens = count(j);
      if (tokens > max && j - 1 > i) {
        // Units are counted alone; joined, the space between them (indentation) counts too, and tokens
        // merge or split differently at their seams. The most units that fit, by bisection: cutting
        // one unit at a time recounted the whole window each time (24 KiB of indented list lines: minutes).
        let fits = i + 1;
        let over = j;
        while (over - fits > 1) {
          const mid = (fits + over) >> 1;
          if (count(mid) <= max) fits = mid;
          else over = mid;
        }
        j = fits;
        tokens = count(j);
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
    const first = units.length;
    for (const [windowStart, windowEnd] of segmentWindows(text, from, gap.index!)) {
      for (const { segment, index } of segmenter.segment(text.slice(windowStart, windowEnd))) {
        const lead = segment.search(/\S/);
        if (lead < 0) continue;
        const start = windowStart + index + lead;
        const end = windowStart + index + segment.trimEnd().length;
        const tokens = countTokens(text.slice(start, end));
        if (tokens <= max) units.push({ start, end, tokens, paragraphEnd: false });
        else units.push(...wordRuns(text, start, end, max));
      }
    }
    if (units.length > first) units[units.length - 1].paragraphEnd = true;
    from = gap.index! + gap[0].length;
  }
  // A unit's count takes in the space before it (a token for a line break, what it is for more:
  // indentation, a run of blank lines): a chunk's text holds it, and left out, a window of units that
  // "fit" could hold thousands of uncounted tokens, each chunk then cut back by recounting and stepping
  // back only a unit or a few (1 MiB of one-word list lines: 4,000 chunks and two minutes).
  for (let k = 1; k < units.length; k++) {
    const gap = units[k].start - units[k - 1].end;
    if (gap > 2) units[k].tokens += countTokens(text.slice(units[k - 1].end, units[k].start));
    else if (text.slice(units[k - 1].end, units[k].start).includes('\n')) units[k].tokens += 1; // a space merges into the word after it; a line break does not
  }
  return units;
}

/**
 * Most characters handed to the sentence segmenter at once. ICU's sentence segmentation takes time
 * quadratic in a paragraph of many short lines (a Markdown table of 128 KiB: 8 s), so a long paragraph
 * is segmented in windows, each ending at a line break (a sentence break anyway), else at a space,
 * else where the window ends: a sentence is never that long, and a cut one is still a unit.
 */
const SEGMENT_WINDOW = 4096;

function segmentWindows(text: string, from: number, to: number): [number, number][] {
  const windows: [number, number][] = [];
  while (to - from > SEGMENT_WINDOW) {
    const limit = from + SEGMENT_WINDOW;
    const newline = text.lastIndexOf('\n', limit - 1);
    const space = newline > from ? newline : text.lastIndexOf(' ', limit - 1);
    const cut = space > from ? space + 1 : limit;
    windows.push([from, cut]);
    from = cut;
  }
  windows.push([from, to]);
  return windows;
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
  let previousEnd = start;
  for (const word of text.slice(start, end).matchAll(/\S+/g)) {
    const wStart = start + word.index!;
    const wEnd = wStart + word[0].length;
    // The space before the word counts as one token, or as what it is when longer (as between units).
    const tokens = countTokens(text.slice(wStart, wEnd)) + (wStart - previousEnd > 2 ? countTokens(text.slice(previousEnd, wStart)) : 1);
    previousEnd = wEnd;
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
