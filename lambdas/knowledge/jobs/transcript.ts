/**
 * A transcript a client gives with a knowledge job (spec 4.8: `transcript` inline, or
 * `references.transcript`, up to 16 MiB), read into timed segments on the recording's clock. The
 * format is told from the text itself (a client sends no type):
 * - **WebVTT**: a `WEBVTT` first line; cues `HH:MM:SS.mmm --> HH:MM:SS.mmm` (or `MM:SS.mmm`) with or
 *   without an id; `NOTE`, `STYLE` and `REGION` blocks skipped; `<v Speaker>` kept as `Speaker: `,
 *   every other tag stripped, character references decoded.
 * - **SRT**: the first block's first or second line a timing line (`HH:MM:SS,mmm --> …`).
 * - **Stamped lines**: a line among the first five that are not blank starts `[HH:MM:SS]`,
 *   `[HH:MM:SS - HH:MM:SS]` (or `[MM:SS]`). A line without an end ends where the next stamped line
 *   starts; lines without a stamp join the segment before them.
 * - **Plain text** otherwise: one segment per paragraph (lines up to a blank line), times null.
 *
 * The text is hostile until read: every step is a scan in time linear in its size (no regular
 * expression that can backtrack over a line: `indexOf` and anchored patterns of bounded length), and
 * nothing throws; a text none of the timed formats reads falls back to plain text. Segments whose
 * text is empty are dropped. Times are finite, non-negative, rounded to the millisecond, and
 * `end_s >= start_s`: an end before its start is taken as the start (the start is what orders the
 * transcript and what a player seeks to; the end is the likelier typo, and widening the range
 * instead would let evidence "overlap" times it never covered).
 */
import type { TimedSegment } from './types.js';

/** Speaking time given to the last stamped line when it names no end: 150 words a minute, a common conversational rate. */
const SECONDS_PER_WORD = 0.4;
/** How many lines that are not blank the format is told from (a stamped transcript may open with a title or two). */
const DETECT_LINES = 5;
/** Longest text between `<` and `>` taken as a tag (a voice tag's name included); longer is literal text. */
const MAX_TAG = 256;

/** The client's transcript as segments, in the order it gives them; never throws. */
export function parseTranscript(text: string): TimedSegment[] {
  if (typeof text !== 'string') return [];
  let normalized = text;
  try {
    normalized = normalize(text);
    const structured = parseStructured(normalized);
    if (structured) return structured;
  } catch {
    // A defect of ours on some input: the text is still the client's transcript, read as plain text.
  }
  try {
    return parsePlain(normalized);
  } catch {
    return [];
  }
}

/** Whether the transcript has times, so entries can cite them: any segment with both. */
export function hasTimes(segments: readonly TimedSegment[]): boolean {
  return segments.some((s) => s.start_s !== null && s.end_s !== null);
}

function normalize(text: string): string {
  return (text.charCodeAt(0) === 0xfeff ? text.slice(1) : text).replace(/\r\n?/g, '\n');
}

type Format = 'vtt' | 'srt' | 'stamped' | 'plain';

/** The segments of a timed format, or null when the text is plain (or its `WEBVTT` header led to no cue at all). */
function parseStructured(text: string): TimedSegment[] | null {
  const format = detect(text);
  if (format === 'vtt' || format === 'srt') return parseCues(text, format === 'vtt');
  if (format === 'stamped') return parseStamped(text);
  return null;
}

function detect(text: string): Format {
  const lines = new Scanner(text);
  if (!lines.nextFilled()) return 'plain';
  if (text.startsWith('WEBVTT', lines.start) && (lines.end === lines.start + 6 || isSpace(text.charCodeAt(lines.start + 6)))) return 'vtt';
  // SRT's first block: a timing line, or a cue number and then a timing line.
  if (parseTiming(text, lines.start, lines.end)) return 'srt';
  const [nextStart, nextEnd] = lines.following();
  if (parseTiming(text, nextStart, nextEnd)) return 'srt';
  for (let seen = 1; seen <= DETECT_LINES; seen++) {
    if (parseStamp(text, lines.start, lines.end)) return 'stamped';
    if (!lines.nextFilled()) break;
  }
  return 'plain';
}

// --- Lines --------------------------------------------------------------------------------------

/**
 * The text's lines as ranges `[start, end)`, one at a time: no line becomes a string unless a parser
 * asks (a 16 MiB cue of one-letter lines is not millions of strings), runs of blank lines are skipped
 * in one native scan, and where the next `-->` is is remembered, so asking each line for one is
 * linear in all.
 */
class Scanner {
  start = 0;
  end = -1;
  private pos = 0;
  /** The next `-->` at or after some line start: -2 not looked for yet, -1 none left. */
  private arrow = -2;
  constructor(private readonly text: string) {}

  /** Moves to the next line; false past the last. */
  next(): boolean {
    if (this.pos > this.text.length) return false;
    let end = this.text.indexOf('\n', this.pos);
    if (end < 0) end = this.text.length;
    this.start = this.pos;
    this.end = end;
    this.pos = end + 1;
    return true;
  }

  /** Moves to the next line that is not blank; false if none is left. */
  nextFilled(): boolean {
    this.skipBlank();
    while (this.next()) if (!this.blank()) return true;
    return false;
  }

  /** The next line's range, without moving to it. */
  following(): [number, number] {
    if (this.pos > this.text.length) return [this.pos, this.pos];
    const end = this.text.indexOf('\n', this.pos);
    return [this.pos, end < 0 ? this.text.length : end];
  }

  blank(): boolean {
    for (let i = this.start; i < this.end; i++) if (!isSpace(this.text.charCodeAt(i))) return false;
    return true;
  }

  /** Whether `[from, to)` (the current line or one after it) holds a `-->`. */
  hasArrow(from = this.start, to = this.end): boolean {
    if (this.arrow !== -1 && this.arrow < from) this.arrow = this.text.indexOf('-->', from);
    return this.arrow >= 0 && this.arrow < to;
  }

  /** Moves past the blank lines ahead in one native scan (the parsers treat a run of blank lines as one). */
  skipBlank(): void {
    if (this.pos >= this.text.length) return;
    FILLED.lastIndex = this.pos;
    const filled = FILLED.exec(this.text);
    if (!filled) {
      this.pos = this.text.length + 1;
      return;
    }
    this.pos = Math.max(this.pos, this.text.lastIndexOf('\n', filled.index) + 1);
  }
}

const FILLED = /\S/g;

function isSpace(c: number): boolean {
  if (c < 0x80) return c === 0x20 || (c >= 0x09 && c <= 0x0d);
  return c === 0xa0 || c === 0x1680 || (c >= 0x2000 && c <= 0x200a) || c === 0x2028 || c === 0x2029 || c === 0x202f || c === 0x205f || c === 0x3000 || c === 0xfeff;
}

// --- Times --------------------------------------------------------------------------------------

/**
 * `[H…:]MM:SS[.f…]` (`,` too, SRT's) in `s[from, to)` as seconds, or null. Lenient where players are
 * (hours up to 7 digits, minutes past 59 without hours, 1 to 9 fraction digits); the digits are
 * bounded, so a time is always finite. Read by hand: it runs once or twice a line.
 */
function parseClock(s: string, from: number, to: number): number | null {
  if (to - from < 4 || to - from > 24) return null;
  let groups = 0;
  let hours = 0;
  let minutes = 0;
  let value = 0;
  let digits = 0;
  let i = from;
  for (; i < to; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0x30 && c <= 0x39) {
      value = value * 10 + (c - 0x30);
      if (++digits > 7) return null;
    } else if (c === 0x3a /* : */) {
      if (digits === 0 || groups === 2) return null;
      hours = minutes;
      minutes = value;
      groups++;
      value = 0;
      digits = 0;
    } else if (c === 0x2e /* . */ || c === 0x2c /* , */) {
      break;
    } else {
      return null;
    }
  }
  if (groups === 0 || digits === 0 || digits > 2 || value >= 60) return null;
  if (groups === 2 && minutes >= 60) return null;
  let fraction = 0;
  if (i < to) {
    const fractionDigits = to - i - 1;
    if (fractionDigits < 1 || fractionDigits > 9) return null;
    let scale = 1;
    for (let k = i + 1; k < to; k++) {
      const c = s.charCodeAt(k);
      if (c < 0x30 || c > 0x39) return null;
      scale /= 10;
      fraction += (c - 0x30) * scale;
    }
  }
  // With two groups the first counts minutes (however many: `75:30.000`); with three, hours.
  const seconds = (groups === 2 ? hours * 3600 : 0) + minutes * 60 + value + fraction;
  return Math.round(seconds * 1000) / 1000;
}

/** `s[from, to)` without the whitespace at its ends, as a pair of indexes. */
function trimmed(s: string, from: number, to: number): [number, number] {
  while (from < to && isSpace(s.charCodeAt(from))) from++;
  while (to > from && isSpace(s.charCodeAt(to - 1))) to--;
  return [from, to];
}

/** The line `s[from, to)` as a cue timing line `start --> end [settings]`, or null. */
function parseTiming(s: string, from: number, to: number): { start: number; end: number } | null {
  const arrow = s.indexOf('-->', from);
  if (arrow < 0 || arrow >= to) return null;
  const start = parseClock(s, ...trimmed(s, from, arrow));
  if (start === null) return null;
  let i = arrow + 3;
  while (i < to && (s.charCodeAt(i) === 0x20 || s.charCodeAt(i) === 0x09)) i++;
  let j = i;
  // The end is the first word after the arrow; what follows it (VTT cue settings, SRT coordinates) is not ours.
  while (j < to && j - i <= 24 && s.charCodeAt(j) !== 0x20 && s.charCodeAt(j) !== 0x09) j++;
  const end = parseClock(s, i, j);
  if (end === null) return null;
  return { start, end: Math.max(start, end) };
}

/**
 * The line `s[from, to)` opening with `[T]` or `[T - T]` (`-`, `–`, `—` or `-->` between), or null;
 * `text` is where the line's text starts, after the `]`.
 */
function parseStamp(s: string, from: number, to: number): { start: number; end: number | null; text: number } | null {
  let i = from;
  while (i < to && (s.charCodeAt(i) === 0x20 || s.charCodeAt(i) === 0x09)) i++;
  if (s.charCodeAt(i) !== 0x5b /* [ */ || i >= to) return null;
  // A stamp is short: its `]` and dash are looked for only a little way (a line of a million `[` stays linear).
  let close = -1;
  let dash = -1;
  for (let k = i + 1; k < to && k < i + 64; k++) {
    const c = s.charCodeAt(k);
    if (c === 0x5d /* ] */) {
      close = k;
      break;
    }
    if (dash < 0 && (c === 0x2d /* - */ || c === 0x2013 /* – */ || c === 0x2014) /* — */) dash = k;
  }
  if (close < 0) return null;
  const start = parseClock(s, ...trimmed(s, i + 1, dash < 0 ? close : dash));
  if (start === null) return null;
  let end: number | null = null;
  if (dash >= 0) {
    const after = s.startsWith('-->', dash) ? dash + 3 : dash + 1;
    end = parseClock(s, ...trimmed(s, after, close));
    if (end === null) return null;
    end = Math.max(start, end);
  }
  return { start, end, text: close + 1 };
}

// --- WebVTT and SRT -----------------------------------------------------------------------------

interface Cue {
  start: number;
  end: number;
  /** Where its text lines are, as `[start, end)` ranges of the transcript: one, unless text came back after a blank line. */
  ranges: number[];
}

/**
 * Cues as segments. A line with `-->` that is not a valid timing line drops its block (as WebVTT's
 * parser does). Text after a blank line inside a cue (SRT files have it) stays with that cue; text
 * before the first cue is not a cue's and is dropped (a header's leftovers). Null when no cue at all.
 */
function parseCues(text: string, vtt: boolean): TimedSegment[] | null {
  const out: TimedSegment[] = [];
  const lines = new Scanner(text);
  let cue: Cue | null = null;
  let cues = 0;
  let inCue = false;
  // The WebVTT header (its `WEBVTT` line and metadata up to the first blank line) is skipped like a NOTE.
  let skipping = vtt;
  while (lines.next()) {
    if (lines.hasArrow()) {
      if (cue) pushCue(out, text, cue);
      const timing = parseTiming(text, lines.start, lines.end);
      cue = timing ? { start: timing.start, end: timing.end, ranges: [] } : null;
      if (timing) cues++;
      inCue = timing !== null;
      skipping = timing === null;
      continue;
    }
    if (lines.blank()) {
      inCue = false;
      skipping = false;
      lines.skipBlank();
      continue;
    }
    if (skipping) continue;
    if (!inCue) {
      const [nextStart, nextEnd] = lines.following();
      if (lines.hasArrow(nextStart, nextEnd)) continue; // the next cue's id (or a broken cue's, dropped with it)
      if (vtt && /^(?:NOTE|STYLE|REGION)(?:[ \t]|$)/.test(text.slice(lines.start, Math.min(lines.end, lines.start + 7)))) {
        skipping = true;
        continue;
      }
      if (!cue) continue;
      inCue = true;
      cue.ranges.push(lines.start, lines.end);
      continue;
    }
    // A line right after the last one of the cue's text extends its range.
    if (cue) {
      if (cue.ranges.length === 0) cue.ranges.push(lines.start, lines.end);
      else cue.ranges[cue.ranges.length - 1] = lines.end;
    }
  }
  if (cue) pushCue(out, text, cue);
  return cues > 0 ? out : null;
}

/** A cue's segment: its text lines, cleaned. */
function pushCue(out: TimedSegment[], text: string, cue: Cue): void {
  const parts: string[] = [];
  for (let k = 0; k < cue.ranges.length; k += 2) parts.push(text.slice(cue.ranges[k], cue.ranges[k + 1]));
  pushSegment(out, cue.start, cue.end, cleanCue(parts.join(' ')));
}

/** The small cues' output buffer, reused; a big cue gets its own (a 16 MiB buffer is not kept for the process's life). */
let shared = new Uint16Array(4096);

/**
 * A cue's text as plain text, in one pass over its characters into a buffer (no pass that makes a
 * string a match, which for a 16 MiB cue of millions of tags or spaces is millions of strings):
 * - tags stripped (`<b>`, `<c.x>`, `<00:01.000>`, `</v>`, SRT's `<font …>`), a voice tag `<v Name>`
 *   becoming `Name: `; a `<` that opens nothing tag-like (`a < b`) is text;
 * - SRT's `{\an8}` overrides stripped;
 * - character references (`&amp;`, `&lt;`, `&#233;` …) decoded;
 * - whitespace collapsed to one space, and none at the ends.
 * The output is never longer than the input. Where the next `<` and `>` are is remembered, so each is
 * looked for once: linear whatever the text holds.
 */
function cleanCue(s: string): string {
  const out = s.length <= shared.length ? shared : new Uint16Array(s.length);
  let n = 0;
  let space = true; // the last character written was a space (or none was): no space to write
  let changed = false; // something other than the character read was written (or nothing was)
  const put = (c: number) => {
    if (isSpace(c)) {
      if (c !== 0x20 || space) changed = true;
      if (!space) out[n++] = 0x20;
      space = true;
    } else {
      out[n++] = c;
      space = false;
    }
  };
  let nextLt = -2;
  let nextGt = -2;
  for (let i = 0; i < s.length; ) {
    const c = s.charCodeAt(i);
    if (c === 0x3c /* < */) {
      if (nextGt !== -1 && nextGt <= i) nextGt = s.indexOf('>', i + 1);
      if (nextLt !== -1 && nextLt <= i) nextLt = s.indexOf('<', i + 1);
      const first = s.charCodeAt(i + 1);
      if (nextGt > i && nextGt - i - 1 <= MAX_TAG && (nextLt < 0 || nextLt > nextGt) && (isAlnum(first) || first === 0x2f /* / */)) {
        changed = true;
        const voice = /^v(?:\.[^ \t]*)?[ \t]+(.+)$/.exec(s.slice(i + 1, nextGt));
        const name = voice ? voice[1].trim() : '';
        if (name) {
          put(0x20);
          for (let k = 0; k < name.length; k++) put(name.charCodeAt(k));
          put(0x3a /* : */);
          put(0x20);
        }
        i = nextGt + 1;
        continue;
      }
    } else if (c === 0x7b /* { */ && s.charCodeAt(i + 1) === 0x5c /* \ */) {
      const close = boundedFind(s, i + 2, 64, 0x7d /* } */, 0x7b /* { */);
      if (close >= 0) {
        changed = true;
        i = close + 1;
        continue;
      }
    } else if (c === 0x26 /* & */) {
      const semi = boundedFind(s, i + 1, 10, 0x3b /* ; */, 0x26 /* & */);
      const decoded = semi > i + 1 ? decodeReference(s.slice(i + 1, semi)) : null;
      if (decoded !== null) {
        changed = true;
        for (let k = 0; k < decoded.length; k++) put(decoded.charCodeAt(k));
        i = semi + 1;
        continue;
      }
    }
    put(c);
    i++;
  }
  if (n > 0 && out[n - 1] === 0x20) n--;
  // Most cues need nothing done: the buffer then holds the text itself, and it is kept as it is.
  if (n === s.length && !changed) return s;
  return UTF16.decode(out.subarray(0, n));
}

/** Reads the buffer back as a string natively (a lone surrogate, which no UTF-8 upload holds, becomes U+FFFD). */
const UTF16 = new TextDecoder('utf-16le');

/** Where `close` is within `limit` characters from `from`, stopping at `stop` or a line's end: -1 if not. */
function boundedFind(s: string, from: number, limit: number, close: number, stop: number): number {
  for (let k = from; k < s.length && k <= from + limit; k++) {
    const c = s.charCodeAt(k);
    if (c === close) return k;
    if (c === stop || c === 0x0a) return -1;
  }
  return -1;
}

function isAlnum(code: number): boolean {
  return (code >= 0x30 && code <= 0x39) || (code >= 0x41 && code <= 0x5a) || (code >= 0x61 && code <= 0x7a);
}

const NAMED: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ', lrm: '', rlm: '' };

/** What `&name;` stands for (the names WebVTT defines, and numeric ones), or null: not a reference, left as text. */
function decodeReference(name: string): string | null {
  if (Object.hasOwn(NAMED, name)) return NAMED[name];
  const hex = /^#[xX]([0-9a-fA-F]{1,6})$/.exec(name);
  const decimal = /^#(\d{1,7})$/.exec(name);
  const code = hex ? parseInt(hex[1], 16) : decimal ? Number(decimal[1]) : -1;
  return code > 0 && code <= 0x10ffff && (code < 0xd800 || code > 0xdfff) ? String.fromCodePoint(code) : null;
}

// --- Stamped lines ------------------------------------------------------------------------------

interface Stamped {
  start: number;
  end: number | null;
  /** Where its line starts, where its text starts (after the `]`) and ends (where the next stamped line starts). */
  line: number;
  from: number;
  to: number;
}

/**
 * Stamped lines as segments, each with the lines after it up to the next stamped line. Lines before
 * the first stamp (a title, who attended) are the first thing on the clock: 0 to that stamp.
 */
function parseStamped(text: string): TimedSegment[] | null {
  const stamped: Stamped[] = [];
  const lines = new Scanner(text);
  while (lines.next()) {
    const stamp = parseStamp(text, lines.start, lines.end);
    if (!stamp) continue;
    if (stamped.length > 0) stamped[stamped.length - 1].to = lines.start;
    stamped.push({ start: stamp.start, end: stamp.end, line: lines.start, from: stamp.text, to: text.length });
  }
  if (stamped.length === 0) return null;
  const out: TimedSegment[] = [];
  pushSegment(out, 0, stamped[0].start, text.slice(0, stamped[0].line));
  stamped.forEach((s, k) => {
    const words = text.slice(s.from, s.to);
    const next = stamped[k + 1];
    // Without its own end a line lasts until the next stamp (an empty stamped line too: it still marks a
    // time); the last one for as long as its words take to say.
    const end = s.end ?? (next ? next.start : s.start + Math.round(countWords(words) * SECONDS_PER_WORD * 1000) / 1000);
    pushSegment(out, s.start, Math.max(s.start, end), words);
  });
  return out;
}

/** Words as runs between spaces (ASCII and the common Unicode ones): an estimate, counted without a list of millions of words. */
function countWords(text: string): number {
  let words = 0;
  let inWord = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const space = c <= 0x20 || c === 0xa0 || c === 0x3000 || (c >= 0x2000 && c <= 0x200a);
    if (!space && !inWord) words++;
    inWord = !space;
  }
  return words;
}

// --- Plain text ---------------------------------------------------------------------------------

/**
 * One segment per paragraph (up to a blank line), its text as given but for the whitespace at its
 * ends, no times. Split natively: a text of millions of short lines is not walked line by line.
 */
function parsePlain(text: string): TimedSegment[] {
  const out: TimedSegment[] = [];
  // A blank line: a newline, whitespace without one, a newline, then all the whitespace after. Each
  // attempt reads one run of whitespace and the runs are apart, so the split is linear; and nothing
  // repeats a group, whose every turn would take a place on the engine's backtracking stack (a group
  // repeated over 16 MiB of newlines overflows it).
  for (const paragraph of text.split(/\n[^\S\n]*\n\s*/)) {
    const trimmed = paragraph.trim();
    if (trimmed) out.push({ start_s: null, end_s: null, text: trimmed });
  }
  return out;
}

function pushSegment(out: TimedSegment[], start: number, end: number, text: string): void {
  const trimmed = text.trim();
  if (trimmed) out.push({ start_s: start, end_s: Math.max(start, end), text: trimmed });
}
