/**
 * The in-code check of an entry's evidence (lambdas/knowledge/jobs/evidence.ts; issue 36, reconcile):
 * the decisions written in its doc comment, one example each; then fast-check against a plain model
 * that works on words, not characters (a transcript is a list of words, each in a segment, written
 * with any case, punctuation and spacing): every run of whole words of the transcript is found with
 * the span of its segments (the occurrence nearest the entry's times when it occurs more than once),
 * however the quote is cased, punctuated and spaced; a word the transcript lacks, or a piece of one of
 * its words, is not; and the check's answer is the model's. Last, its cost: a 60-minute transcript
 * checked for 150 entries, and quotes that occur everywhere. `FC_SEED` / `FC_RUNS` replay or widen.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  checkEvidence,
  foldText,
  indexTranscript,
  locateQuote,
  MAX_OCCURRENCES,
  TIME_TOLERANCE_S,
  TranscriptIndex,
  type Span,
} from '../../lambdas/knowledge/jobs/evidence.js';
import type { TimedSegment } from '../../lambdas/knowledge/jobs/types.js';

const runs = { numRuns: process.env.FC_RUNS ? Number(process.env.FC_RUNS) : 400, seed: process.env.FC_SEED ? Number(process.env.FC_SEED) : undefined };

const seg = (start_s: number | null, end_s: number | null, text: string): TimedSegment => ({ start_s, end_s, text });
const entry = (quote: string, start_s: number | null = null, end_s: number | null = null) => ({ quote, start_s, end_s });

describe('foldText', () => {
  it('folds case, punctuation, symbols, compatibility forms, invisible format characters and whitespace', () => {
    expect(foldText('  We SHIP on Friday!!  ')).toBe('we ship on friday');
    expect(foldText('Don’t — “quote” me; it\'s 50% off… (ok?)')).toBe('dont quote me its 50 off ok');
    expect(foldText('ｆｕｌｌ－ｗｉｄｔｈ ４２ ﬁne')).toBe('fullwidth 42 fine');
    expect(foldText('e\u0301te\u0301 ÉTÉ')).toBe('été été');
    expect(foldText('soft\u00ADhyphen zero\u200Bwidth\u00A0space\n\ttab')).toBe('softhyphen zerowidth space tab');
    expect(foldText('€5 + 3 = 8 😀 #tag @you')).toBe('5 3 8 tag you');
    expect(foldText('— … !')).toBe('');
  });
});

describe('locateQuote and checkEvidence: the decisions', () => {
  const meeting = [
    seg(0, 5, 'Alice: We decided, finally, to ship on Friday.'),
    seg(5, 9, "Bob: Don't forget the QA pass!"),
    seg(9, 9.5, '—'),
    seg(10, 14, 'Carol: noted; notice the release notes.'),
    seg(100, 104, 'Alice: We decided to ship on Friday, again.'),
    seg(200, 204, '会議は明日の午後三時に始まります。'),
  ];
  const index = indexTranscript(meeting);

  it('finds a quote across segments, with the span of every segment it touches', () => {
    expect(locateQuote(index, 'ship on friday. Bob: DON’T forget')).toEqual({ start_s: 0, end_s: 9 });
    // The segment of punctuation only folds to nothing: the quote runs across it.
    expect(locateQuote(index, 'the QA pass — Carol: noted')).toEqual({ start_s: 5, end_s: 14 });
  });

  it('finds whole words only, but any run of characters of a script written without spaces', () => {
    expect(locateQuote(index, 'ice')).toBeNull(); // in "notice"
    expect(locateQuote(index, 'decide')).toBeNull();
    expect(locateQuote(index, 'ship on fri')).toBeNull();
    expect(locateQuote(index, 'notice the')).toEqual({ start_s: 10, end_s: 14 });
    expect(locateQuote(index, '明日の午後')).toEqual({ start_s: 200, end_s: 204 });
  });

  it('takes the occurrence nearest the entry times, else the first', () => {
    expect(locateQuote(index, 'we decided to ship on friday')).toEqual({ start_s: 100, end_s: 104 }); // the first is "decided, finally, to"
    expect(locateQuote(index, 'Alice: we decided')).toEqual({ start_s: 0, end_s: 5 });
    expect(locateQuote(index, 'Alice: we decided', { start_s: 90, end_s: 95 })).toEqual({ start_s: 100, end_s: 104 });
    expect(locateQuote(index, 'Alice: we decided', { start_s: 40, end_s: null })).toEqual({ start_s: 0, end_s: 5 });
    expect(checkEvidence(index, entry('Alice: we decided', 103, 110))).toEqual({ ok: true, start_s: 100, end_s: 104 });
    // Of several that overlap the times, the first; of several as near, the first too.
    const twice = [seg(0, 10, 'yes we can'), seg(5, 15, 'yes we can'), seg(30, 31, 'yes we can'), seg(50, 51, 'yes we can')];
    expect(locateQuote(twice, 'yes we can', { start_s: 6, end_s: 7 })).toEqual({ start_s: 0, end_s: 10 });
    expect(locateQuote(twice, 'yes we can', { start_s: 40.5, end_s: 40.5 })).toEqual({ start_s: 30, end_s: 31 });
  });

  it(`allows ${TIME_TOLERANCE_S} s between the entry's times and where its quote occurs, no more`, () => {
    expect(checkEvidence(index, entry('the QA pass', 11, 12))).toEqual({ ok: true, start_s: 5, end_s: 9 });
    expect(checkEvidence(index, entry('the QA pass', 11.01, 12))).toEqual({ ok: false, reason: 'time_mismatch' });
    expect(checkEvidence(index, entry('the QA pass', 1, 3))).toEqual({ ok: true, start_s: 5, end_s: 9 }); // 2 s before it
    expect(checkEvidence(index, entry('the QA pass', 0, 2.99))).toEqual({ ok: false, reason: 'time_mismatch' });
  });

  it('reads the entry times leniently: one of them is an instant, backwards is forwards, not a finite number is not given', () => {
    expect(checkEvidence(index, entry('the QA pass', 7, null))).toEqual({ ok: true, start_s: 5, end_s: 9 });
    expect(checkEvidence(index, entry('the QA pass', null, 30))).toEqual({ ok: false, reason: 'time_mismatch' });
    expect(checkEvidence(index, entry('the QA pass', 9, 6))).toEqual({ ok: true, start_s: 5, end_s: 9 });
    expect(checkEvidence(index, entry('the QA pass', Number.NaN, Infinity))).toEqual({ ok: true, start_s: 5, end_s: 9 });
  });

  it('cites no time where the transcript has none, whatever times the entry claims', () => {
    const plain = indexTranscript([seg(null, null, 'We ship on Friday.'), seg(null, null, 'Then we rest.')]);
    expect(checkEvidence(plain, entry('friday then we', 500, 600))).toEqual({ ok: true, start_s: null, end_s: null });
    expect(locateQuote(plain, 'we rest')).toEqual({ start_s: null, end_s: null });
  });

  it('takes a segment with one time as that instant', () => {
    expect(locateQuote([seg(7, null, 'only a start'), seg(null, 9, 'only an end')], 'a start only')).toEqual({ start_s: 7, end_s: 9 });
    expect(locateQuote([seg(7, null, 'only a start')], 'a start')).toEqual({ start_s: 7, end_s: 7 });
  });

  it('refuses a quote under 2 characters once folded, and one that is not there', () => {
    for (const quote of ['', '  ', 'a', 'A.', '—!…', '7', '😀 x']) expect(checkEvidence(index, entry(quote))).toEqual({ ok: false, reason: 'empty_quote' });
    expect(checkEvidence(index, entry('ok'))).toEqual({ ok: false, reason: 'quote_not_found' });
    expect(checkEvidence(index, entry('会議'))).toEqual({ ok: true, start_s: 200, end_s: 204 });
    expect(checkEvidence(index, entry('We decided to ship on Monday'))).toEqual({ ok: false, reason: 'quote_not_found' });
    expect(checkEvidence([], entry('anything at all'))).toEqual({ ok: false, reason: 'quote_not_found' });
    expect(checkEvidence(index, { quote: undefined as unknown as string, start_s: null, end_s: null })).toEqual({ ok: false, reason: 'empty_quote' });
  });

  it('gives the same answers from the segments as from their index', () => {
    for (const e of [entry('Alice: we decided', 103, 110), entry('the QA pass', 11.01, 12), entry('ice')]) expect(checkEvidence(meeting, e)).toEqual(checkEvidence(index, e));
    expect(index).toBeInstanceOf(TranscriptIndex);
    expect(index.folded).toBe(meeting.map((s) => foldText(s.text)).filter(Boolean).join(' '));
  });
});

// --- Properties against a model of words ------------------------------------------------------------

/** Each word of the model (what it folds to) with ways a transcript or a quote may write it. */
const VOCABULARY: Record<string, string[]> = {
  we: ['we', 'We', 'WE', 'we,'],
  decided: ['decided', 'Decided:', '(decided)', 'DECIDED!'],
  to: ['to', 'To', 'TO'],
  ship: ['ship', 'Ship', '"ship"', 'ship;'],
  shipping: ['shipping', 'Shipping!', 'shipping…'],
  on: ['on', 'On'],
  friday: ['Friday', 'friday.', 'FRIDAY?', 'Fri-day', 'ｆｒｉｄａｙ'],
  dont: ["don't", 'don’t', 'DONT'],
  été: ['été', 'ÉTÉ', 'e\u0301te\u0301'],
  '42': ['42', '４２', '42%'],
  a: ['a', 'A', 'a.'],
  会議: ['会議', '会議。', '「会議」'],
};
const CANON = Object.keys(VOCABULARY);
/** How words are apart, in a transcript or a quote. */
const GAPS = [' ', '  ', '\n', '\t', ' — ', ' - ', ' … ', '\u00A0'];

interface ModelSegment {
  words: string[];
  start_s: number | null;
  end_s: number | null;
}

/** Writes words with the variants and gaps `picks` choose (cycled). */
function write(words: string[], picks: number[]): string {
  const pick = (k: number) => picks[k % picks.length] ?? 0;
  return words.map((w, k) => `${k > 0 ? GAPS[pick(2 * k + 1) % GAPS.length] : ''}${VOCABULARY[w][pick(2 * k) % VOCABULARY[w].length]}`).join('');
}

const modelTranscript = fc
  .record({
    timed: fc.boolean(),
    segments: fc.array(
      fc.record({ words: fc.array(fc.constantFrom(...CANON), { maxLength: 6 }), start: fc.integer({ min: 0, max: 600 }), length: fc.integer({ min: 0, max: 30 }) }),
      { minLength: 1, maxLength: 12 },
    ),
    picks: fc.array(fc.nat(), { minLength: 1, maxLength: 20 }),
  })
  .map(({ timed, segments, picks }) => {
    const model: ModelSegment[] = segments.map((s) => ({ words: s.words, start_s: timed ? s.start : null, end_s: timed ? s.start + s.length : null }));
    const written: TimedSegment[] = model.map((s, k) => ({ start_s: s.start_s, end_s: s.end_s, text: s.words.length ? write(s.words, picks.slice(k)) : k % 2 ? '' : ' — ' }));
    return { model, written };
  });

/** The model's words in order, each with its segment. */
const flatten = (model: ModelSegment[]) => model.flatMap((s, segment) => s.words.map((word) => ({ word, segment })));

type Range = { start: number; end: number };
const distance = (a: Range, b: Range) => Math.max(0, a.start - b.end, b.start - a.end);

/** The model's answer: the spans of every occurrence of `quote` (whole words), nearest `near` first among equals by order, else the first. */
function modelLocate(model: ModelSegment[], quote: string[], near: Range | null): Span | null {
  const words = flatten(model);
  const spans: Span[] = [];
  for (let k = 0; k + quote.length <= words.length; k++) {
    if (!quote.every((w, j) => words[k + j].word === w)) continue;
    const touched = new Set(words.slice(k, k + quote.length).map((w) => w.segment));
    const starts = [...touched].map((s) => model[s].start_s).filter((t): t is number => t !== null);
    const ends = [...touched].map((s) => model[s].end_s).filter((t): t is number => t !== null);
    spans.push({ start_s: starts.length ? Math.min(...starts) : null, end_s: ends.length ? Math.max(...ends) : null });
  }
  if (spans.length === 0) return null;
  if (!near || spans[0].start_s === null) return spans[0];
  let best = spans[0];
  for (const span of spans) if (distance(near, asRange(span)) < distance(near, asRange(best))) best = span;
  return best;
}

const asRange = (span: Span): Range => ({ start: span.start_s as number, end: span.end_s as number });

/** A run of the transcript's words: where it starts and how long it is, as fractions. */
const run = fc.record({ at: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }), length: fc.integer({ min: 1, max: 8 }) });
function runOf(model: ModelSegment[], r: { at: number; length: number }): string[] | null {
  const words = flatten(model).map((w) => w.word);
  if (words.length === 0) return null;
  const from = Math.floor(r.at * words.length);
  return words.slice(from, Math.min(words.length, from + r.length));
}

describe('locateQuote: as the model of words says', () => {
  it('finds every run of whole words, written any way, with the span of its segments (the first occurrence)', () => {
    fc.assert(
      fc.property(modelTranscript, run, fc.array(fc.nat(), { minLength: 1, maxLength: 20 }), ({ model, written }, r, picks) => {
        const quote = runOf(model, r);
        fc.pre(quote !== null);
        const found = locateQuote(written, write(quote!, picks));
        expect(found).not.toBeNull();
        expect(found).toEqual(modelLocate(model, quote!, null));
      }),
      runs,
    );
  });

  it('finds the occurrence nearest given times', () => {
    fc.assert(
      fc.property(modelTranscript, run, fc.integer({ min: -50, max: 650 }), fc.oneof(fc.integer({ min: 0, max: 60 }), fc.integer({ min: 0, max: 600 })), ({ model, written }, r, start, length) => {
        const quote = runOf(model, r);
        fc.pre(quote !== null);
        const near = { start, end: start + length };
        expect(locateQuote(indexTranscript(written), quote!.join(' '), { start_s: near.start, end_s: near.end })).toEqual(modelLocate(model, quote!, near));
      }),
      runs,
    );
  });

  it('finds no word the transcript lacks, and no piece of one of its words', () => {
    const missing = fc.constantFrom('zebra', 'Monday', 'shipp', 'ecided', 'fri', 'riday', 'dec', 'hip', '4', 'ét');
    fc.assert(
      fc.property(modelTranscript, run, missing, fc.nat(), ({ model, written }, r, word, where) => {
        const quote = runOf(model, r) ?? [];
        const words = [...quote.map((w) => VOCABULARY[w][0])];
        words.splice(where % (words.length + 1), 0, word);
        expect(locateQuote(written, words.join(' '))).toBeNull();
      }),
      runs,
    );
  });
});

describe('checkEvidence: as the model of words says', () => {
  it('passes a quote found near the entry times (or an entry without times) with its span, and refuses the rest with the reason', () => {
    const claim = fc.oneof(
      fc.constant(null),
      fc.record({ start: fc.double({ min: -10, max: 700, noNaN: true }), length: fc.double({ min: 0, max: 40, noNaN: true }) }),
    );
    const edit = fc.constantFrom('none', 'missing', 'short');
    fc.assert(
      fc.property(modelTranscript, run, claim, edit, fc.array(fc.nat(), { minLength: 1, maxLength: 10 }), ({ model, written }, r, c, how, picks) => {
        const words = runOf(model, r) ?? [];
        const quote = how === 'short' ? '“A.”' : how === 'missing' ? `${write(words, picks)} zebra` : write(words, picks);
        const claimed = c && { start: c.start, end: c.start + c.length };
        const got = checkEvidence(indexTranscript(written), entry(quote, claimed?.start ?? null, claimed?.end ?? null));
        const folded = words.join('');
        const found = how === 'none' && words.length > 0 ? modelLocate(model, words, claimed) : null;
        if (how === 'short' || (how === 'none' && [...folded].length < 2 && words.length <= 1)) expect(got).toEqual({ ok: false, reason: 'empty_quote' });
        else if (!found) expect(got).toEqual({ ok: false, reason: 'quote_not_found' });
        else if (claimed && found.start_s !== null && distance(claimed, asRange(found)) > TIME_TOLERANCE_S) expect(got).toEqual({ ok: false, reason: 'time_mismatch' });
        else expect(got).toEqual({ ok: true, ...found });
      }),
      runs,
    );
  });
});

// --- Cost ---------------------------------------------------------------------------------------------

function cpuMs(): number {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
}

describe('checkEvidence: cost', () => {
  it('checks 150 entries against a 60-minute transcript (10,000 words) in well under a second, the transcript folded once', () => {
    let state = 7;
    const random = () => (state = (state * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const lexicon = Array.from({ length: 2000 }, (_, k) => `w${k.toString(36)}${'xyz'[k % 3]}`);
    const segments: TimedSegment[] = [];
    const spoken: { word: string; segment: number }[] = [];
    for (let k = 0; k < 600; k++) {
      const words = Array.from({ length: 17 }, () => lexicon[Math.floor(random() * random() * lexicon.length)]);
      ['speaker', String(k % 4), ...words].forEach((word) => spoken.push({ word, segment: k }));
      segments.push(seg(k * 6, k * 6 + 6, `Speaker ${k % 4}: ${words.join(', ')}.`));
    }
    const entries = Array.from({ length: 150 }, (_, k) => {
      const at = Math.floor(random() * (spoken.length - 40));
      const quote = spoken.slice(at, at + 5 + (k % 30)).map((w) => w.word);
      const segment = spoken[at].segment;
      // Every third entry cites a time far from its quote; every fifth quotes something never said.
      const start = k % 3 === 0 ? segment * 6 + 600 : segment * 6 + 1;
      return entry(k % 5 === 0 ? `${quote.join(' ')} never` : quote.join(' ').toUpperCase(), start, start + 10);
    });
    const started = cpuMs();
    const index = indexTranscript(segments);
    const results = entries.map((e) => checkEvidence(index, e));
    const ms = cpuMs() - started;
    expect(ms, `${ms.toFixed(0)} ms`).toBeLessThan(250);
    expect(results.filter((r) => r.ok).length).toBeGreaterThan(60);
    expect(results.filter((r) => !r.ok && r.reason === 'quote_not_found')).toHaveLength(30);
    expect(results.filter((r) => !r.ok && r.reason === 'time_mismatch').length).toBeGreaterThan(20);
  });

  it(`looks at no more than ${MAX_OCCURRENCES} occurrences of a quote that is everywhere`, () => {
    const everywhere = indexTranscript(Array.from({ length: 20_000 }, (_, k) => seg(k, k + 1, 'yes yes yes yes yes')));
    const started = cpuMs();
    for (let k = 0; k < 100; k++) {
      // Far from every occurrence: each search reads the first thousand and keeps the nearest.
      expect(checkEvidence(everywhere, entry('yes yes', 1e6, 1e6 + 1))).toEqual({ ok: false, reason: 'time_mismatch' });
    }
    // Past the thousandth, in a transcript whose times run forward, found where the entry says.
    for (const at of [500, 12_345.5, 19_999]) {
      const got = checkEvidence(everywhere, entry('yes yes', at, at));
      expect(got.ok && got.start_s! <= at && at <= got.end_s!, JSON.stringify(got)).toBe(true);
    }
    // Times that do not run forward: the nearest of the first thousand.
    const shuffled = indexTranscript(Array.from({ length: 20_000 }, (_, k) => seg(k % 2 ? k : 40_000 - k, (k % 2 ? k : 40_000 - k) + 1, 'yes yes no')));
    expect(checkEvidence(shuffled, entry('yes yes', 20_000, 20_000))).toEqual({ ok: false, reason: 'time_mismatch' });
    const ms = cpuMs() - started;
    expect(ms, `${ms.toFixed(0)} ms`).toBeLessThan(1000);
  });
});
