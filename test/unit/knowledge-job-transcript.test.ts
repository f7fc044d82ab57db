/**
 * A knowledge job's given transcript (lambdas/knowledge/jobs/transcript.ts): each format read as
 * written, the same segments back from transcripts fast-check writes out of a plain model of
 * segments (WebVTT, SRT, stamped lines, plain text), never a throw and always sane segments from
 * anything at all, and hostile texts of 16 MiB read in time linear in their size (this process's CPU
 * time, so a shared machine's load does not count: a quadratic step takes minutes on them).
 * `FC_SEED` / `FC_RUNS` replay or widen the properties.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { hasTimes, parseTranscript } from '../../lambdas/knowledge/jobs/transcript.js';
import type { TimedSegment } from '../../lambdas/knowledge/jobs/types.js';

const runs = { numRuns: process.env.FC_RUNS ? Number(process.env.FC_RUNS) : 300, seed: process.env.FC_SEED ? Number(process.env.FC_SEED) : undefined };
const MiB = 1024 * 1024;

const timed = (start_s: number, end_s: number, text: string): TimedSegment => ({ start_s, end_s, text });
const untimed = (text: string): TimedSegment => ({ start_s: null, end_s: null, text });

describe('parseTranscript: the formats', () => {
  it('reads WebVTT: header and metadata, NOTE/STYLE/REGION skipped, ids, settings, voices kept as names, other tags stripped, references decoded', () => {
    const vtt = [
      '\uFEFFWEBVTT - the weekly sync',
      'Kind: captions',
      'Language: en',
      '',
      'STYLE',
      '::cue { color: lime }',
      '',
      'REGION',
      'id:fred width:40%',
      '',
      'NOTE this is not said',
      'nor this',
      '',
      'intro',
      '00:00:01.000 --> 00:00:04.500 align:start position:10%',
      '<v.loud Alice Smith>We <b>ship</b> on <c.yellow>Friday</c> &amp; not later</v>',
      '<i>second line</i>',
      '',
      '01:02.250 --> 01:03.000',
      '<v Bob>Agreed.</v> <00:01:02.500><v Carol>Me too &lt;3',
      '',
      '1:00:00.000 --> 1:00:02.000',
      'An hour in &#233;t&#xE9;',
      '',
    ].join('\r\n');
    expect(parseTranscript(vtt)).toEqual([
      timed(1, 4.5, 'Alice Smith: We ship on Friday & not later second line'),
      timed(62.25, 63, 'Bob: Agreed. Carol: Me too <3'),
      timed(3600, 3602, 'An hour in été'),
    ]);
  });

  it('reads SRT: numbered cues with commas, tags and {\\an8} overrides stripped, coordinates ignored, text after a blank line kept with its cue', () => {
    const srt = [
      '1',
      '00:00:01,000 --> 00:00:02,500',
      '<i>Hello</i> {\\an8}there',
      '<font color="#ff0000">friend</font>',
      '',
      '2',
      '00:00:03,000 --> 00:00:04,000 X1:100 X2:200 Y1:10 Y2:20',
      'Second cue',
      '',
      'said after a blank line',
      '',
      '3',
      '00:00:05,000 --> 00:00:06,000',
      '',
      '4',
      '10:00:00,000 --> 10:00:01,000',
      'Late',
    ].join('\n');
    expect(parseTranscript(srt)).toEqual([
      timed(1, 2.5, 'Hello there friend'),
      timed(3, 4, 'Second cue said after a blank line'),
      timed(36000, 36001, 'Late'),
    ]);
  });

  it('reads stamped lines: a title before the first stamp, [HH:MM:SS], [MM:SS] and ranges, continuation lines, ends from the next stamp', () => {
    const text = [
      'Weekly sync, 3 May',
      '',
      '[00:00:05] Alice: Good morning.',
      'Let us start.',
      '[00:00:10 - 00:00:12] Bob: Yes.',
      '',
      '[01:00] Carol: A minute in.',
      '[00:01:30]',
      '[00:01:40 – 00:01:45] Dan: en dash.',
      '[00:01:50] Eve: the last four words',
    ].join('\n');
    expect(parseTranscript(text)).toEqual([
      timed(0, 5, 'Weekly sync, 3 May'),
      timed(5, 10, 'Alice: Good morning.\nLet us start.'),
      timed(10, 12, 'Bob: Yes.'),
      // Its end is the next stamp's start, even a stamp with no text.
      timed(60, 90, 'Carol: A minute in.'),
      timed(100, 105, 'Dan: en dash.'),
      // The last line without an end lasts as long as its 5 words take at 150 a minute.
      timed(110, 112, 'Eve: the last four words'),
    ]);
  });

  it('reads plain text as one segment per paragraph, without times', () => {
    expect(parseTranscript('\uFEFFFirst paragraph,\r\n  its second line.  \r\n \t \r\n\r\nSecond one.\n\n\n')).toEqual([
      untimed('First paragraph,\r\n  its second line.'.replace('\r', '')),
      untimed('Second one.'),
    ]);
    expect(parseTranscript('[Music] not a stamp\n\n[00:61] nor this')).toEqual([untimed('[Music] not a stamp'), untimed('[00:61] nor this')]);
  });

  it('takes an end before its start as the start, and drops a cue whose timing line is broken', () => {
    expect(parseTranscript('WEBVTT\n\n00:00:09.000 --> 00:00:05.000\nbackwards\n\n00:00:70.000 --> 00:01:00.000\nbroken\nstill broken\n\n00:01.000 --> 00:02.000\nfine')).toEqual([
      timed(9, 9, 'backwards'),
      timed(1, 2, 'fine'),
    ]);
    expect(parseTranscript('[00:00:09 - 00:00:05] backwards\n[00:00:20] next')).toEqual([timed(9, 9, 'backwards'), timed(20, 20.4, 'next')]);
  });

  it('falls back to plain text where a timed format holds nothing, and gives nothing for nothing', () => {
    expect(parseTranscript('WEBVTT\n\nno cue here\n\n--> --> -->')).toEqual([untimed('WEBVTT'), untimed('no cue here'), untimed('--> --> -->')]);
    expect(parseTranscript('')).toEqual([]);
    expect(parseTranscript(' \n\t\r\n ')).toEqual([]);
    expect(parseTranscript('WEBVTT\n\n00:01.000 --> 00:02.000\n<b></b>\n')).toEqual([]);
    expect(parseTranscript(undefined as unknown as string)).toEqual([]);
  });

  it('hasTimes: whether any segment has its times', () => {
    expect(hasTimes([])).toBe(false);
    expect(hasTimes([untimed('a')])).toBe(false);
    expect(hasTimes([untimed('a'), timed(0, 1, 'b')])).toBe(true);
    expect(hasTimes(parseTranscript('[00:01] hi'))).toBe(true);
    expect(hasTimes(parseTranscript('hi'))).toBe(false);
  });
});

// --- Properties against a plain model ---------------------------------------------------------------

const WORDS = ['alpha', 'Beta', 'gamma,', 'délta', 'ÜBER', 'naïve', '42', "it's", 'co-op', 'x', '“quoted”', '会議', 'end.'];
const words = (min = 1, max = 8) => fc.array(fc.constantFrom(...WORDS), { minLength: min, maxLength: max }).map((w) => w.join(' '));

/** A model segment: times in milliseconds (as a transcript writes them), its text as lines. */
interface ModelCue {
  startMs: number;
  endMs: number;
  lines: string[];
  speaker: string | null;
  id: string | null;
}

const cue = fc.record({
  startMs: fc.integer({ min: 0, max: 40 * 3600 * 1000 }),
  lengthMs: fc.integer({ min: 0, max: 600_000 }),
  lines: fc.array(words(), { minLength: 0, maxLength: 3 }),
  speaker: fc.option(fc.constantFrom('Alice', 'Bob Smith', 'Dr. Ng'), { nil: null }),
  id: fc.option(fc.constantFrom('1', 'intro', 'cue-7', 'a b'), { nil: null }),
}).map(({ startMs, lengthMs, ...rest }): ModelCue => ({ startMs, endMs: startMs + lengthMs, ...rest }));

const pad = (n: number, width = 2) => String(n).padStart(width, '0');
function clock(ms: number, fraction: '.' | ',' | null, withHours: boolean): string {
  const h = Math.floor(ms / 3_600_000);
  const m = Math.floor(ms / 60_000) % 60;
  const s = Math.floor(ms / 1000) % 60;
  const base = withHours || h > 0 ? `${pad(h)}:${pad(m)}:${pad(s)}` : `${pad(m)}:${pad(s)}`;
  return fraction ? `${base}${fraction}${pad(ms % 1000, 3)}` : base;
}

/** What the model says a cue reads as: its lines joined by a space, the speaker's name first. */
function cueSegments(cues: ModelCue[]): TimedSegment[] {
  return cues
    .map((c) => ({ c, text: [c.speaker ? `${c.speaker}:` : '', ...c.lines].filter(Boolean).join(' ') }))
    .filter(({ c }) => c.lines.length > 0)
    .map(({ c, text }) => timed(c.startMs / 1000, c.endMs / 1000, text));
}

describe('parseTranscript: what fast-check writes from a model comes back as the model', () => {
  it('WebVTT (hours or not, ids, settings, NOTE blocks, voices, CRLF)', () => {
    fc.assert(
      fc.property(fc.array(cue, { minLength: 1, maxLength: 12 }), fc.boolean(), fc.boolean(), fc.boolean(), (cues, hours, notes, crlf) => {
        const blocks = ['WEBVTT'];
        for (const c of cues) {
          if (notes) blocks.push('NOTE a comment\nacross lines');
          const text = c.lines.map((line, k) => (k === 0 && c.speaker ? `<v ${c.speaker}>${line}` : line));
          blocks.push([...(c.id ? [c.id] : []), `${clock(c.startMs, '.', hours)} --> ${clock(c.endMs, '.', hours)} align:middle`, ...text].join('\n'));
        }
        const vtt = blocks.join('\n\n') + '\n';
        expect(parseTranscript(crlf ? vtt.replace(/\n/g, '\r\n') : vtt)).toEqual(cueSegments(cues));
      }),
      runs,
    );
  });

  it('SRT', () => {
    fc.assert(
      fc.property(fc.array(cue, { minLength: 1, maxLength: 12 }), (cues) => {
        const srt = cues.map((c, k) => [String(k + 1), `${clock(c.startMs, ',', true)} --> ${clock(c.endMs, ',', true)}`, ...c.lines].join('\n')).join('\n\n');
        expect(parseTranscript(srt)).toEqual(cueSegments(cues.map((c) => ({ ...c, speaker: null }))));
      }),
      runs,
    );
  });

  it('stamped lines, with or without ends, continuation lines and a title', () => {
    const line = fc.record({
      start: fc.integer({ min: 0, max: 20 * 3600 }),
      length: fc.option(fc.integer({ min: 0, max: 600 }), { nil: null }),
      text: fc.option(words(), { nil: null }),
      more: fc.array(words(), { maxLength: 2 }),
      dash: fc.constantFrom(' - ', '-', ' – ', ' --> '),
      hours: fc.boolean(),
    });
    fc.assert(
      fc.property(fc.array(line, { minLength: 1, maxLength: 12 }), fc.array(words(), { maxLength: 2 }), (lines, title) => {
        const stamp = (s: number, hours: boolean) => clock(s * 1000, null, hours);
        const written = lines.map((l) =>
          [`[${stamp(l.start, l.hours)}${l.length === null ? '' : `${l.dash}${stamp(l.start + l.length, l.hours)}`}]${l.text === null ? '' : ` ${l.text}`}`, ...l.more].join('\n'),
        );
        const text = [...title, ...written].join('\n');
        // The model: a line's end is its own, else the next line's start, else its words' time at 0.4 s each.
        const expected: TimedSegment[] = [];
        if (title.length > 0) expected.push(timed(0, lines[0].start, title.join('\n')));
        lines.forEach((l, k) => {
          const body = [...(l.text === null ? [] : [l.text]), ...l.more].join('\n');
          const wordCount = body.split(/\s+/).filter(Boolean).length;
          const end = l.length !== null ? l.start + l.length : k + 1 < lines.length ? lines[k + 1].start : l.start + Math.round(wordCount * 400) / 1000;
          if (body) expected.push(timed(l.start, Math.max(l.start, end), body));
        });
        expect(parseTranscript(text)).toEqual(expected);
      }),
      runs,
    );
  });

  it('plain text: paragraphs at blank lines, whatever the whitespace', () => {
    const piece = fc.constantFrom(...WORDS, ' ', '  ', '\t', '\n', '\n\n', '\n \t\n', '\r\n', '\r\n\r\n');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 40 }), (pieces) => {
        const text = pieces.join('');
        // The model: lines, split at lines of whitespace only; each paragraph its lines, trimmed at its ends.
        const paragraphs: string[][] = [[]];
        for (const l of text.replace(/\r\n/g, '\n').split('\n')) {
          if (l.trim() === '') paragraphs.push([]);
          else paragraphs[paragraphs.length - 1].push(l);
        }
        const expected = paragraphs.filter((p) => p.length > 0).map((p) => untimed(p.join('\n').trim()));
        expect(parseTranscript(text)).toEqual(expected);
      }),
      runs,
    );
  });
});

/** What every answer must be, whatever the text: text present and trimmed, times both there or both null, finite, non-negative, ordered; all timed or none. */
function expectSane(segments: TimedSegment[]): void {
  for (const s of segments) {
    expect(typeof s.text).toBe('string');
    expect(s.text).toBe(s.text.trim());
    expect(s.text.length).toBeGreaterThan(0);
    expect(s.start_s === null).toBe(s.end_s === null);
    if (s.start_s !== null && s.end_s !== null) {
      expect(Number.isFinite(s.start_s) && Number.isFinite(s.end_s)).toBe(true);
      expect(s.start_s).toBeGreaterThanOrEqual(0);
      expect(s.end_s).toBeGreaterThanOrEqual(s.start_s);
    }
  }
  expect(new Set(segments.map((s) => s.start_s === null)).size).toBeLessThanOrEqual(1);
}

describe('parseTranscript: anything at all', () => {
  const fragment = fc.constantFrom(
    'WEBVTT', 'NOTE', 'STYLE', '\n', '\n\n', '\r\n', '\r', ' ', '\t', '-->', ' --> ', '00:01.000', '00:00:01,500', '99:59:59.999', '1:2:3', '00:60.000',
    '9999999:00:00.000', '[', ']', '[00:01]', '[00:00:01 - 00:00:02]', '[01:00:00 –', '<', '>', '<v Al>', '<v >', '</v>', '<b>', '<00:01.000>', '&amp;', '&#0;',
    '&#x110000;', '&', ';', '{\\an8}', '{\\', '}', 'x', 'word', '1', '.', ',', ':', '-', '\uFEFF', '\u2028', '\0', '\uD800', '会議',
    // Whole timing lines and stamps, backwards too, so the generated texts often are each format.
    'WEBVTT\n\n', '00:00:09.000 --> 00:00:05.000\n', '00:01.000 --> 00:02.000\n', '1\n00:00:01,000 --> 00:00:00,500\n', '[00:09 - 00:05] ', '\n[01:00:00] ',
  );
  it('never throws, and every segment is sane (fast-check: fragments of every format, and arbitrary strings)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.array(fragment, { maxLength: 60 }).map((f) => f.join('')), fc.string({ unit: 'binary', maxLength: 200 })), (text) => {
        expectSane(parseTranscript(text));
      }),
      { ...runs, numRuns: runs.numRuns * 5 },
    );
  });
});

// --- 16 MiB, hostile --------------------------------------------------------------------------------

/** This process's CPU time (user and system): what other processes on a shared machine take does not count in it. */
function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

/** `unit` repeated to `bytes` characters, flat (as a decoded upload is, not a rope of repeats). */
const fill = (unit: string, bytes = 16 * MiB, head = '') => Buffer.from(head + unit.repeat(Math.ceil((bytes - head.length) / unit.length)).slice(0, bytes - head.length)).toString();

/** The best of two CPU timings of parsing `text` (load only ever adds), with the last answer. */
function timed16(text: string): { ms: number; segments: TimedSegment[] } {
  parseTranscript(text.slice(0, 64 * 1024)); // the JIT warmed on the same shape
  let ms = Infinity;
  let segments: TimedSegment[] = [];
  for (let run = 0; run < 2; run++) {
    const started = cpuMs();
    segments = parseTranscript(text);
    ms = Math.min(ms, cpuMs() - started);
  }
  if (process.env.TRANSCRIPT_BOUNDS_VERBOSE) console.log(`${text.length} characters: ${ms.toFixed(0)} ms of CPU, ${segments.length} segments`);
  return { ms, segments };
}

describe('parseTranscript: 16 MiB in time linear in its size', () => {
  it('reads 16 MiB of plain prose in under a second', () => {
    const { ms, segments } = timed16(fill('The quick brown fox jumps over the lazy dog, and the dog sleeps on.\n'));
    expect(ms, `${ms.toFixed(0)} ms`).toBeLessThan(1000);
    expect(segments).toHaveLength(1);
  });

  // Each of these took a naive reader (a split per line, tag and whitespace regexes, a repeated group)
  // seconds to minutes, or overflowed the regex engine's stack; each is read here in well under a second
  // on an idle machine, so 2 s of CPU leaves room for a loaded one while a quadratic step still fails.
  const HOSTILE: [string, () => string, (segments: TimedSegment[]) => void][] = [
    ['a WebVTT line of --> a million times', () => `WEBVTT\n\n${'-->'.repeat(1e6)}\n00:01.000 --> 00:02.000\nafter`, (s) => expect(s).toEqual([timed(1, 2, 'after')])],
    ['a WebVTT of a million lines of -->', () => fill('-->\n', 4 * 1e6, 'WEBVTT\n\n'), (s) => expect(s).toHaveLength(2)],
    ['a cue of 16 MiB of <', () => fill('<', 16 * MiB, 'WEBVTT\n\n00:00.000 --> 00:01.000\n'), (s) => expect(s[0].text).toHaveLength(16 * MiB - 32)],
    ['a cue of 16 MiB of <a (no tag closes until the end)', () => fill('<a', 16 * MiB - 1, 'WEBVTT\n\n00:00.000 --> 00:01.000\n') + '>', (s) => expect(s).toHaveLength(1)],
    ['a cue of 16 MiB of <b>x', () => fill('<b>x', 16 * MiB, 'WEBVTT\n\n00:00.000 --> 00:01.000\n'), (s) => expect(s[0].text).toMatch(/^x{1000}/)],
    ['a cue of 16 MiB of &amp;', () => fill('&amp;', 16 * MiB, 'WEBVTT\n\n00:00.000 --> 00:01.000\n'), (s) => expect(s[0].text).toMatch(/^&{1000}/)],
    ['a cue of 16 MiB of {\\', () => fill('{\\', 16 * MiB, 'WEBVTT\n\n00:00.000 --> 00:01.000\n'), (s) => expect(s).toHaveLength(1)],
    ['a cue of 8 Mi one-letter lines', () => fill('x\n', 16 * MiB, 'WEBVTT\n\n00:00.000 --> 00:01.000\n'), (s) => expect(s[0].text.length).toBeGreaterThan(16 * MiB - 64)],
    ['a cue of 16 MiB of spaces and tabs', () => fill(' \t', 16 * MiB, 'WEBVTT\n\n00:00.000 --> 00:01.000\nx') + 'y', (s) => expect(s).toEqual([timed(0, 1, 'x y')])],
    ['16 MiB of spaces before an arrow', () => fill(' ', 16 * MiB, '1\n') + '-->', (s) => expect(s).toHaveLength(1)],
    ['16 MiB of newlines between two words', () => `a${fill('\n', 16 * MiB)}b`, (s) => expect(s).toEqual([untimed('a'), untimed('b')])],
    ['16 MiB of blank lines of spaces', () => `a${fill('\n \t ', 16 * MiB)}\nb`, (s) => expect(s).toEqual([untimed('a'), untimed('b')])],
    ['a line of 16 MiB of [', () => fill('[', 16 * MiB), (s) => expect(s).toHaveLength(1)],
    ['a stamp, then 8 Mi one-letter lines', () => fill('x\n', 16 * MiB, '[00:00:01]\n'), (s) => expect(s).toHaveLength(1)],
  ];
  it.each(HOSTILE)('%s', (_name, make, check) => {
    const { ms, segments } = timed16(make());
    expect(ms, `${ms.toFixed(0)} ms`).toBeLessThan(2000);
    expectSane(segments);
    check(segments);
  });

  it('reads 16 MiB of WebVTT, of SRT and of stamped lines (hundreds of thousands of segments) in time linear in their size', () => {
    const vtt = timed16(fill('00:00:01.000 --> 00:00:02.000\n<v Al>Hello there my friend\n\n', 16 * MiB, 'WEBVTT\n\n'));
    const srt = timed16(fill('1\n00:00:01,000 --> 00:00:02,000\nHello there my friend\n\n'));
    const stamped = timed16(fill('[00:00:01] Alice: hello there my friend\n'));
    for (const { ms } of [vtt, srt, stamped]) expect(ms, `${ms.toFixed(0)} ms`).toBeLessThan(2000);
    expect(vtt.segments[0]).toEqual(timed(1, 2, 'Al: Hello there my friend'));
    expect(srt.segments.length).toBeGreaterThan(300_000);
    expect(stamped.segments.length).toBeGreaterThan(400_000);
  });
});
