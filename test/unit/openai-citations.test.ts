/**
 * The Responses API's `[n]` markers turned into file citations (lambdas/ai/openai-compat/citations.ts):
 * the same answer whether the text comes whole or cut anywhere into deltas, nothing dropped but the
 * markers of passages 1…n (and the one space before a run), each annotation's index inside the text.
 */
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { CitationStripper, type CitationSource, type CitedText } from '../../lambdas/ai/openai-compat/citations.js';

const source = (n: number): CitationSource => ({
  file_id: `file-${n}`,
  filename: `doc-${n}.pdf`,
  citation: { collection_id: 'col_x', item_id: `item_${n}`, package_id: 'pkg', chunk_id: `c${n}`, locator: `page=${n}` },
});
const sources = (count: number) => Array.from({ length: count }, (_, i) => source(i + 1));

/** The text cut at `cuts` and pushed delta by delta, then ended. */
function streamed(text: string, cuts: number[], s: CitationSource[]): CitedText {
  const stripper = new CitationStripper(s);
  const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const parts: CitedText[] = [];
  let at = 0;
  for (const p of [...points, text.length]) {
    parts.push(stripper.push(text.slice(at, p)));
    at = p;
  }
  parts.push(stripper.end());
  return { text: parts.map((p) => p.text).join(''), annotations: parts.flatMap((p) => p.annotations) };
}

/** What the text is without the valid markers (spaces aside), as a plain replace writes it. */
const withoutMarkers = (text: string, count: number) => text.replace(/\[([1-9]\d{0,2})\]/g, (m, d) => (Number(d) <= count ? '' : m));
const validMarkers = (text: string, count: number) => [...text.matchAll(/\[([1-9]\d{0,2})\]/g)].filter((m) => Number(m[1]) <= count).length;

describe('CitationStripper', () => {
  it('takes a marker and the space before it out of the text, the annotation where the marker stood', () => {
    const r = CitationStripper.strip('The island is volcanic [1].', sources(1));
    expect(r.text).toBe('The island is volcanic.');
    expect(r.annotations).toEqual([{ type: 'file_citation', file_id: 'file-1', filename: 'doc-1.pdf', index: 22, citation: source(1).citation }]);
  });

  it('keeps the space before a word, annotates each marker of a run, and leaves other bracketed numbers as text', () => {
    const r = CitationStripper.strip('Ferries run daily [1][2] and weekly [2]. See [3], [0], [01] and [10].', sources(2));
    expect(r.text).toBe('Ferries run daily and weekly. See [3], [0], [01] and [10].');
    expect(r.annotations.map((a) => [a.file_id, a.index])).toEqual([
      ['file-1', 17],
      ['file-2', 17],
      ['file-2', 28],
    ]);
  });

  it('settles a marker split across deltas at every cut point', () => {
    const text = 'Basalt [1][2]. Tuff [2] ok [';
    const whole = CitationStripper.strip(text, sources(2));
    expect(whole.text).toBe('Basalt. Tuff ok [');
    for (let a = 0; a <= text.length; a++) {
      for (let b = a; b <= text.length; b++) expect(streamed(text, [a, b], sources(2))).toEqual(whole);
    }
  });

  it('holds back at most a possible marker: text before it leaves with its delta', () => {
    const stripper = new CitationStripper(sources(3));
    expect(stripper.push('The island is volcanic [').text).toBe('The island is volcanic');
    expect(stripper.push('1').text).toBe('');
    const closed = stripper.push(']');
    expect(closed).toEqual({ text: '', annotations: [] });
    const after = stripper.push('. Next');
    expect(after.text).toBe('. Next');
    expect(after.annotations.map((a) => a.index)).toEqual([22]);
    expect(stripper.end()).toEqual({ text: '', annotations: [] });
  });

  // Texts dense in what markers are made of, plus letters, punctuation and characters outside the BMP.
  const pieces = fc.constantFrom(' ', ' ', '[', ']', '1', '2', '3', '0', '9', '12', 'a', 'é', '.', ',', '😀', '\n', '[1]', '[2]', ' [3]', '[4]');
  const texts = fc.array(pieces, { maxLength: 60 }).map((p) => p.join(''));

  it('streamed at any cut points, answers what the whole text answers', () => {
    fc.assert(
      fc.property(texts, fc.array(fc.nat(), { maxLength: 8 }), fc.integer({ min: 0, max: 4 }), (text, cuts, count) => {
        expect(streamed(text, cuts, sources(count))).toEqual(CitationStripper.strip(text, sources(count)));
      }),
      { numRuns: 2000 },
    );
  });

  it('loses no text but the markers and spaces before them, and puts every index inside the text', () => {
    fc.assert(
      fc.property(texts, fc.integer({ min: 0, max: 4 }), (text, count) => {
        const r = CitationStripper.strip(text, sources(count));
        expect(r.text.replaceAll(' ', '')).toBe(withoutMarkers(text, count).replaceAll(' ', ''));
        // Only spaces right before a marker go: never more spaces than markers.
        expect(withoutMarkers(text, count).length - r.text.length).toBeLessThanOrEqual(r.annotations.length);
        expect(withoutMarkers(text, count).length).toBeGreaterThanOrEqual(r.text.length);
        expect(r.annotations).toHaveLength(validMarkers(text, count));
        let last = 0;
        for (const a of r.annotations) {
          expect(a.index).toBeGreaterThanOrEqual(last);
          expect(a.index).toBeLessThanOrEqual(r.text.length);
          last = a.index;
        }
      }),
      { numRuns: 2000 },
    );
  });
});
