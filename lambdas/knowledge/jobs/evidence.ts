/**
 * The in-code check of an entry's evidence (spec 4.8, reconcile; always run, whatever `power`): the
 * entry's quote must occur in the transcript, whitespace, case and punctuation folded, and where the
 * entry gives times, its time range must overlap where the quote occurs. A failing entry is dropped
 * and counted by the caller; a passing one is cited at where its quote occurs.
 *
 * Decisions:
 * - **Whole words.** The quote must start and end at word boundaries of the folded transcript ("ice"
 *   is not found in "notice"): a quote is the model's copy of what was said, and a fragment of a word
 *   is not evidence. Scripts written without spaces (Han, kana, Thai, Lao, Khmer, Myanmar, Tibetan)
 *   have no boundaries to ask for, so next to one of their characters any position is one.
 * - **At least 2 characters** once folded (`empty_quote` below that): "ok" is evidence of something
 *   in a 2-minute meeting; anything shorter (a letter, a digit, punctuation only) is found anywhere.
 *   No minimum in words: a quote of one word of a language without spaces is a sentence.
 * - **The found span is the citation.** A passing entry's times are those of the segments its quote
 *   touches (the transcript's, not the model's guess), null where the transcript has none there:
 *   without times entries cite no time.
 * - **Several occurrences**: the one whose span is nearest the entry's times wins (the first of
 *   those that overlap them), else the first. At most `MAX_OCCURRENCES` are looked at one by one (a
 *   quote that is everywhere costs no more than that); past them, in a transcript whose times run
 *   forward (as a recording's do), the occurrences either side of the entry's times are found
 *   directly, so even the ten-thousandth "yes" is found where the entry says.
 */
import type { Entry, TimedSegment } from './types.js';

/**
 * How far apart (seconds) an entry's time range and its quote's span may be and still "overlap":
 * the model sees times rounded to whole seconds (`[00:01:02]`), words near a cue's edge are timed by
 * the neighbouring cue, and transcription pieces' times are moved onto the recording's clock with
 * their own rounding. Two seconds absorbs that and still catches a quote cited at another moment.
 */
export const TIME_TOLERANCE_S = 2;
/** A quote shorter than this (characters, once folded) is `empty_quote`. */
export const MIN_QUOTE_CHARS = 2;
/** Occurrences of one quote looked at for the one nearest the entry's times ("yes" may occur a thousand times). */
export const MAX_OCCURRENCES = 1000;

export interface Span {
  start_s: number | null;
  end_s: number | null;
}

export type EvidenceCheck =
  | { ok: true; start_s: number | null; end_s: number | null }
  | { ok: false; reason: 'quote_not_found' | 'time_mismatch' | 'empty_quote' };

// One character a match: `[\p{P}\p{S}\p{Cf}]+` overflowed V8's stack on a run of some 5 million such
// characters (a transcript line of dashes), failing the job's reconcile step at every attempt.
const PUNCTUATION = /[\p{P}\p{S}\p{Cf}]/gu;
const SPACES = /\s+/g;

/**
 * Text as the check compares it: NFKC (full-width letters, ligatures and compatibility forms as their
 * plain letters), lower case, punctuation and symbols removed (`\p{P}`, `\p{S}`: "don't" and "dont"
 * are one word, curly and straight quotes alike), and invisible format characters (`\p{Cf}`: soft
 * hyphens, zero-width spaces, direction marks) too, then whitespace runs as one space, trimmed.
 */
export function foldText(s: string): string {
  return s.normalize('NFKC').toLowerCase().replace(PUNCTUATION, '').replace(SPACES, ' ').trim();
}

/** The segments folded and joined once, so each entry's check is a search (build it once per transcript, for all its entries). */
export class TranscriptIndex {
  /**
   * The segments' folded texts joined by one space (segments folding to nothing left out), with a
   * space before and after: a quote is searched with a space on each side, so the native search finds
   * whole words only and nothing found is thrown away after.
   */
  private readonly padded: string;
  /** Where each indexed segment's folded text starts in `padded`, ascending; `segmentOf[k]` is its index in `segments`. */
  private readonly starts: number[] = [];
  private readonly segmentOf: number[] = [];
  /** The indexed segments' start times, when every one has both times and starts and ends never go back (else null). */
  private readonly forwardStarts: number[] | null;

  constructor(readonly segments: readonly TimedSegment[]) {
    const parts: string[] = [];
    let length = 1;
    segments.forEach((segment, index) => {
      const folded = foldText(typeof segment?.text === 'string' ? segment.text : '');
      if (!folded) return;
      if (parts.length > 0) length += 1;
      this.starts.push(length);
      this.segmentOf.push(index);
      parts.push(folded);
      length += folded.length;
    });
    this.padded = ` ${parts.join(' ')} `;
    this.forwardStarts = this.timesRunForward();
  }

  /** The folded transcript the quotes are looked for in. */
  get folded(): string {
    return this.padded.slice(1, -1);
  }

  /** Where the quote occurs: the span of the segments it touches, or null if it does not occur. See `locateQuote`. */
  locate(quote: string, near?: Span): Span | null {
    return this.locateFolded(foldText(typeof quote === 'string' ? quote : ''), near ? rangeOf(near) : null);
  }

  /** The check of one entry. See `checkEvidence`. */
  check(entry: Pick<Entry, 'quote' | 'start_s' | 'end_s'>): EvidenceCheck {
    const quote = foldText(typeof entry.quote === 'string' ? entry.quote : '');
    if (codePoints(quote, MIN_QUOTE_CHARS) < MIN_QUOTE_CHARS) return { ok: false, reason: 'empty_quote' };
    const claimed = rangeOf(entry);
    const found = this.locateFolded(quote, claimed);
    if (!found) return { ok: false, reason: 'quote_not_found' };
    const where = rangeOf(found);
    if (claimed && where && distance(claimed, where) > TIME_TOLERANCE_S) return { ok: false, reason: 'time_mismatch' };
    return { ok: true, start_s: found.start_s, end_s: found.end_s };
  }

  private locateFolded(quote: string, target: Range | null): Span | null {
    if (!quote) return null;
    // Whole words: a space on each side, but for an edge in a script without spaces, where any position is a boundary.
    const before = unspaced(quote.codePointAt(0)!) ? '' : ' ';
    const after = unspaced(codePointBefore(quote, quote.length)) ? '' : ' ';
    const needle = before + quote + after;
    let best: Span | null = null;
    let bestDistance = Infinity;
    let seen = 0;
    for (let at = this.padded.indexOf(needle); at >= 0 && seen < MAX_OCCURRENCES; at = this.padded.indexOf(needle, at + 1)) {
      seen++;
      const from = at + before.length;
      const span = this.spanOf(from, from + quote.length);
      const range = target ? rangeOf(span) : null;
      // Without times to compare, the first occurrence is as good as any.
      if (!target || !range) return span;
      const d = distance(target, range);
      if (d < bestDistance) {
        best = span;
        bestDistance = d;
        if (d === 0) return best;
      }
    }
    if (seen < MAX_OCCURRENCES || !target || !this.forwardStarts) return best;
    // Too many to read one by one: in a transcript whose times run forward, the nearest occurrence is
    // the first from the first segment starting at or after the entry's start, or the last before it.
    const pivot = firstAtLeast(this.forwardStarts, target.start);
    const from = pivot < this.starts.length ? this.starts[pivot] - before.length : this.padded.length;
    for (const at of [this.padded.lastIndexOf(needle, from - 1), this.padded.indexOf(needle, from)]) {
      if (at < 0) continue;
      const span = this.spanOf(at + before.length, at + before.length + quote.length);
      const d = distance(target, rangeOf(span)!);
      if (d < bestDistance) {
        best = span;
        bestDistance = d;
      }
    }
    return best;
  }

  private timesRunForward(): number[] | null {
    const starts: number[] = [];
    let lastEnd = -Infinity;
    for (const index of this.segmentOf) {
      const start = finite(this.segments[index].start_s);
      const end = finite(this.segments[index].end_s);
      if (start === null || end === null || end < start || start < (starts[starts.length - 1] ?? -Infinity) || end < lastEnd) return null;
      starts.push(start);
      lastEnd = end;
    }
    return starts;
  }

  /** The times of the segments `padded[from, to)` touches: the earliest start and the latest end among them that are known. */
  private spanOf(from: number, to: number): Span {
    const first = this.indexAt(from);
    const last = this.indexAt(to - 1);
    let start: number | null = null;
    let end: number | null = null;
    for (let k = first; k <= last; k++) {
      const segment = this.segments[this.segmentOf[k]];
      const s = finite(segment.start_s);
      const e = finite(segment.end_s);
      if (s !== null && (start === null || s < start)) start = s;
      if (e !== null && (end === null || e > end)) end = e;
    }
    // A segment with only one of its times: the span is that instant.
    return { start_s: start ?? end, end_s: end ?? start };
  }

  /** The indexed segment holding folded offset `at` (binary search over `starts`). */
  private indexAt(at: number): number {
    let low = 0;
    let high = this.starts.length - 1;
    while (low < high) {
      const mid = (low + high + 1) >> 1;
      if (this.starts[mid] <= at) low = mid;
      else high = mid - 1;
    }
    return low;
  }
}

/** The index of a transcript, to check many entries against it. */
export function indexTranscript(segments: readonly TimedSegment[]): TranscriptIndex {
  return new TranscriptIndex(segments);
}

/**
 * Where `quote` occurs in the transcript, whitespace, case and punctuation folded (`foldText`), as
 * whole words, possibly across consecutive segments: the span of the segments it touches (null times
 * where they have none), or null if it does not occur. Of several occurrences, the one nearest `near`
 * (the first that overlaps it), else the first. Pass a `TranscriptIndex` when locating many quotes.
 */
export function locateQuote(transcript: readonly TimedSegment[] | TranscriptIndex, quote: string, near?: Span): Span | null {
  return indexOf(transcript).locate(quote, near);
}

/**
 * The in-code check of an entry's evidence: `empty_quote` (under `MIN_QUOTE_CHARS` once folded),
 * `quote_not_found`, or `time_mismatch` (the entry gives times, the transcript has times where the
 * quote occurs, and they are more than `TIME_TOLERANCE_S` apart). A passing entry comes back with the
 * span where its quote occurs, which is what it cites (null times where the transcript has none).
 * An entry's time that is not a finite number counts as not given; with one of the two given, its
 * range is that instant; a range given backwards is read forwards. Pass a `TranscriptIndex` when
 * checking many entries.
 */
export function checkEvidence(transcript: readonly TimedSegment[] | TranscriptIndex, entry: Pick<Entry, 'quote' | 'start_s' | 'end_s'>): EvidenceCheck {
  return indexOf(transcript).check(entry);
}

function indexOf(transcript: readonly TimedSegment[] | TranscriptIndex): TranscriptIndex {
  return transcript instanceof TranscriptIndex ? transcript : new TranscriptIndex(transcript);
}

interface Range {
  start: number;
  end: number;
}

/** The first index of ascending `values` whose value is at least `least` (`values.length` if none). */
function firstAtLeast(values: number[], least: number): number {
  let low = 0;
  let high = values.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (values[mid] < least) low = mid + 1;
    else high = mid;
  }
  return low;
}

function finite(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/** A span's times as a range, or null when it has neither. */
function rangeOf(span: Span): Range | null {
  const start = finite(span.start_s);
  const end = finite(span.end_s);
  if (start === null && end === null) return null;
  const a = start ?? (end as number);
  const b = end ?? a;
  return { start: Math.min(a, b), end: Math.max(a, b) };
}

/** Seconds between two ranges: 0 when they overlap (or touch). */
function distance(a: Range, b: Range): number {
  return Math.max(0, a.start - b.end, b.start - a.end);
}

/** `s`'s length in code points, counted up to `enough`. */
function codePoints(s: string, enough: number): number {
  let count = 0;
  for (const _ of s) if (++count >= enough) break;
  return count;
}

function codePointBefore(s: string, at: number): number {
  const low = s.charCodeAt(at - 1);
  if (low >= 0xdc00 && low <= 0xdfff && at >= 2) {
    const high = s.charCodeAt(at - 2);
    if (high >= 0xd800 && high <= 0xdbff) return (high - 0xd800) * 0x400 + (low - 0xdc00) + 0x10000;
  }
  return low;
}

const UNSPACED = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Thai}\p{Script=Lao}\p{Script=Khmer}\p{Script=Myanmar}\p{Script=Tibetan}]/u;

/** Whether a character belongs to a script written without spaces between words. */
function unspaced(codePoint: number): boolean {
  return codePoint >= 0x0e00 && UNSPACED.test(String.fromCodePoint(codePoint));
}
