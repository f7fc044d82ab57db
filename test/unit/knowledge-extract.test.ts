/**
 * Text extraction: each format's sections and locators exactly, the format read from the bytes when
 * the content type is wrong, and every bad file answered with its reason instead of a throw.
 */
import { describe, expect, it } from 'vitest';
import { extractText, MAX_INPUT_BYTES, MAX_OUTPUT_CHARS, timeLocator } from '../../lambdas/knowledge/extract/index.js';
import { MAX_HTML_DEPTH } from '../../lambdas/knowledge/extract/html.js';
import { docxFile, htmlFile, markdownFile, OUTLINE, pdfFile } from '../helpers/knowledge-files.js';

const utf8 = (s: string) => new TextEncoder().encode(s);
const DOCX_TYPE = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';

/** What OUTLINE gives in every format with headings: each section starts with its own heading's line. */
const OUTLINE_SECTIONS = [
  { text: 'This guide installs the platform.', locator: 'top' },
  { text: 'Install\n\nPick your system below.', locator: 'heading=Install' },
  { text: 'Linux\n\nRun the package manager.\n\nThen start the service.', locator: 'heading=Install > Linux' },
  { text: 'Debian\n\nUse apt.', locator: 'heading=Install > Linux > Debian' },
  { text: 'macOS\n\nUse Homebrew.', locator: 'heading=Install > macOS' },
  { text: 'Use\n\nOpen the console.', locator: 'heading=Use' },
];

describe('extractText', () => {
  it('reads a PDF page by page, each page located by its number; a page without text makes no section', async () => {
    const pdf = await pdfFile([['Alpha one.', 'Alpha two.'], ['Beta is on page two.'], [], ['Delta is on page four.']]);
    expect(await extractText(pdf, 'application/pdf', 'report.pdf')).toEqual({
      sections: [
        { text: 'Alpha one.\nAlpha two.', locator: 'page=1' },
        { text: 'Beta is on page two.', locator: 'page=2' },
        { text: 'Delta is on page four.', locator: 'page=4' },
      ],
    });
  });

  it('reads a PDF given as a Node Buffer (as files and blob streams give it), leaving the caller its bytes', async () => {
    const pdf = Buffer.from(await pdfFile([['In a buffer.']]));
    const copy = Buffer.from(pdf);
    expect(await extractText(pdf, 'application/pdf', 'a.pdf')).toEqual({ sections: [{ text: 'In a buffer.', locator: 'page=1' }] });
    expect(pdf.equals(copy)).toBe(true);
  });

  it('reads DOCX, HTML and Markdown by their headings, as paths from the topmost', async () => {
    expect(await extractText(await docxFile(OUTLINE), DOCX_TYPE, 'guide.docx')).toEqual({ sections: OUTLINE_SECTIONS });
    // The title, styles, scripts, navigation and hidden elements are not the page's readable text.
    expect(await extractText(utf8(htmlFile()), 'text/html; charset=utf-8', 'guide.html')).toEqual({ sections: OUTLINE_SECTIONS });
    // The front matter is metadata; a heading's inline Markdown is not part of its name.
    expect(await extractText(utf8(markdownFile()), 'text/markdown', 'guide.md')).toEqual({ sections: OUTLINE_SECTIONS });
    expect(await extractText(utf8('# Use **the** [`cli`](https://x.test)\n\nRun it.\n\nSetext\n------\n\nMore.'), 'text/markdown', 'x.md')).toEqual({
      sections: [
        { text: 'Use the cli\n\nRun it.', locator: 'heading=Use the cli' },
        { text: 'Setext\n\nMore.', locator: 'heading=Use the cli > Setext' },
      ],
    });
  });

  it('reads plain text as one section from line 1, as written', async () => {
    expect(await extractText(utf8('\nfirst line\r\nsecond line\n'), 'text/plain', 'notes.txt')).toEqual({ sections: [{ text: '\nfirst line\nsecond line\n', locator: 'line=1' }] });
  });

  it('believes the bytes over the content type for PDF and DOCX, then the type, then the name', async () => {
    const pdf = await pdfFile([['Only page.']]);
    const pdfSections = { sections: [{ text: 'Only page.', locator: 'page=1' }] };
    expect(await extractText(pdf, 'text/plain', 'notes.txt')).toEqual(pdfSections);
    expect(await extractText(pdf, 'application/octet-stream', 'upload')).toEqual(pdfSections);
    expect(await extractText(await docxFile(OUTLINE), 'application/pdf', 'guide.pdf')).toEqual({ sections: OUTLINE_SECTIONS });
    // Markdown often arrives as text/plain or with no useful type: the name says which.
    expect(await extractText(utf8(markdownFile()), 'text/plain', 'guide.md')).toEqual({ sections: OUTLINE_SECTIONS });
    expect(await extractText(utf8(htmlFile()), 'application/octet-stream', 'guide.htm')).toEqual({ sections: OUTLINE_SECTIONS });
    // The content type wins over the name for text formats.
    expect(await extractText(utf8('# Not a heading'), 'text/plain', 'notes.txt')).toEqual({ sections: [{ text: '# Not a heading', locator: 'line=1' }] });
    expect(await extractText(utf8('a,b\n1,2\n'), 'text/csv', 'table.csv')).toEqual({ sections: [{ text: 'a,b\n1,2\n', locator: 'line=1' }] });
  });

  it("decodes text by the content type's charset, else as UTF-8, else as Windows-1252", async () => {
    const latin = new Uint8Array([0x63, 0x61, 0x66, 0xe9]);
    expect(await extractText(latin, 'text/plain', 'a.txt')).toEqual({ sections: [{ text: 'café', locator: 'line=1' }] });
    expect(await extractText(latin, 'text/plain; charset=iso-8859-1', 'a.txt')).toEqual({ sections: [{ text: 'café', locator: 'line=1' }] });
    expect(await extractText(utf8('café'), 'text/plain', 'a.txt')).toEqual({ sections: [{ text: 'café', locator: 'line=1' }] });
  });

  it('answers unsupported_type for audio, video, images, other zips and binary data', async () => {
    expect(await extractText(new Uint8Array([0x49, 0x44, 0x33, 4, 0]), 'audio/mpeg', 'talk.mp3')).toEqual({ failed: 'unsupported_type' });
    expect(await extractText(new Uint8Array(16), 'video/mp4', 'talk.mp4')).toEqual({ failed: 'unsupported_type' });
    expect(await extractText(new Uint8Array([0x89, 0x50, 0x4e, 0x47]), 'image/png', 'a.png')).toEqual({ failed: 'unsupported_type' });
    expect(await extractText(utf8('PK\x03\x04xl/workbook.xml'), DOCX_TYPE, 'sheet.docx')).toEqual({ failed: 'unsupported_type' });
    expect(await extractText(new Uint8Array([1, 0, 2, 0, 3]), 'text/plain', 'a.txt')).toEqual({ failed: 'unsupported_type' });
    expect(await extractText(new Uint8Array([1, 2, 3]), 'application/octet-stream', 'blob.bin')).toEqual({ failed: 'unsupported_type' });
  });

  it('answers parse_error for a corrupt PDF or DOCX', async () => {
    expect(await extractText(utf8('%PDF-1.7\n1 0 obj << /Type /Catalog >> garbage'), 'application/pdf', 'a.pdf')).toEqual({ failed: 'parse_error' });
    const pdf = await pdfFile([['Some text.']]);
    expect(await extractText(pdf.slice(0, 200), 'application/pdf', 'cut.pdf')).toEqual({ failed: 'parse_error' });
    expect(await extractText(utf8('PK\x03\x04word/document.xml and no zip after it'), DOCX_TYPE, 'a.docx')).toEqual({ failed: 'parse_error' });
    expect(await extractText(utf8('not a zip'), DOCX_TYPE, 'a.docx')).toEqual({ failed: 'parse_error' });
  });

  it('answers empty_text when a document has no text', async () => {
    expect(await extractText(await pdfFile([[], []]), 'application/pdf', 'scan.pdf')).toEqual({ failed: 'empty_text' });
    expect(await extractText(await docxFile([]), DOCX_TYPE, 'empty.docx')).toEqual({ failed: 'empty_text' });
    expect(await extractText(utf8('<html><head><title>T</title></head><body><script>x()</script> </body></html>'), 'text/html', 'a.html')).toEqual({ failed: 'empty_text' });
    expect(await extractText(utf8('---\ntitle: only metadata\n---\n'), 'text/markdown', 'a.md')).toEqual({ failed: 'empty_text' });
    expect(await extractText(utf8(' \n\t\n'), 'text/plain', 'a.txt')).toEqual({ failed: 'empty_text' });
    expect(await extractText(new Uint8Array(0), 'text/plain', 'a.txt')).toEqual({ failed: 'empty_text' });
  });

  it(`answers too_large above ${MAX_INPUT_BYTES / 1024 / 1024} MiB in or ${MAX_OUTPUT_CHARS / 1e6} M characters out`, async () => {
    const big = new Uint8Array(MAX_INPUT_BYTES + 1).fill(0x61);
    expect(await extractText(big, 'text/plain', 'a.txt')).toEqual({ failed: 'too_large' });
    expect(await extractText(big.subarray(0, MAX_OUTPUT_CHARS + 1), 'text/plain', 'a.txt')).toEqual({ failed: 'too_large' });
    const within = await extractText(big.subarray(0, MAX_OUTPUT_CHARS), 'text/plain', 'a.txt');
    expect('sections' in within && within.sections[0].text.length).toBe(MAX_OUTPUT_CHARS);
  });

  it('reads Markdown in time linear in its size, whatever runs of emphasis marks its text holds', async () => {
    // marked's inline pass takes seconds over 128,000 characters of `*a`; only headings are read inline.
    const body = '*a'.repeat(64_000);
    const started = performance.now();
    const got = await extractText(Buffer.from(`# Intro *to* it\n\n${body}\n\n## ${'*b'.repeat(2_000)}\n\nend`), 'text/markdown', 'x.md');
    expect(performance.now() - started).toBeLessThan(3_000);
    expect('sections' in got && got.sections.map((s) => s.locator)).toEqual(['heading=Intro to it', `heading=Intro to it > ${'*b'.repeat(2_000)}`]);
  });

  it('reads Markdown nested deeper than its parser reads in time (lists, quotes) as plain text, at once', async () => {
    // marked's block pass grows with the cube of the nesting: 800 list levels took 3.5 s (1,000 here), 5,000 ran out of memory.
    const lists = Array.from({ length: 1_000 }, (_, i) => `${' '.repeat(2 * i)}- item ${i}`).join('\n');
    const quotes = Array.from({ length: 2_000 }, (_, i) => `${'>'.repeat(i)} quote ${i}`).join('\n');
    for (const text of [`# Title\n\n${lists}`, quotes]) {
      const started = performance.now();
      const got = await extractText(Buffer.from(text), 'text/markdown', 'deep.md');
      expect(performance.now() - started).toBeLessThan(3_000);
      expect(got).toEqual({ sections: [{ text, locator: 'line=1' }] });
    }
    // Ordinary nesting is still read as Markdown.
    const shallow = await extractText(Buffer.from(`# Title\n\n${Array.from({ length: 20 }, (_, i) => `${'  '.repeat(i)}- item ${i}`).join('\n')}`), 'text/markdown', 'x.md');
    expect('sections' in shallow && shallow.sections.map((s) => s.locator)).toEqual(['heading=Title']);
  });

  it(`answers parse_error for HTML nested deeper than ${MAX_HTML_DEPTH} elements, at once, and reads HTML nested up to that`, async () => {
    const nested = (n: number) => Buffer.from(`<h1>Top</h1>${'<div>'.repeat(n)}deep text${'</div>'.repeat(n)}`);
    const started = performance.now();
    expect(await extractText(nested(200_000), 'text/html', 'x.html')).toEqual({ failed: 'parse_error' });
    expect(performance.now() - started).toBeLessThan(3_000);
    const ok = await extractText(nested(MAX_HTML_DEPTH - 1), 'text/html', 'x.html');
    expect('sections' in ok && ok.sections).toEqual([{ text: 'Top\n\ndeep text', locator: 'heading=Top' }]);
  });

  it("locates a recording's segment by its time range, for transcripts", () => {
    expect(timeLocator(725, 790)).toBe('t=00:12:05-00:13:10');
    expect(timeLocator(0, 3725.9)).toBe('t=00:00:00-01:02:05');
  });
});
