/**
 * Hostile files are refused before they are read (issue 32): each of the attack's files, and a PDF
 * flate bomb, gets its failure, with a message naming the cap, within a couple of seconds and
 * without the process's peak memory growing by more than a little (before: 2-7 GB and 3 s to
 * hours); and ordinary files read as before.
 */
import { deflateRawSync, crc32 } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { extractText, type Extracted } from '../../lambdas/knowledge/extract/index.js';
import { MAX_DOCX_DEPTH, MAX_DOCX_ELEMENTS } from '../../lambdas/knowledge/extract/docx.js';
import { MAX_PDF_PAGES, MAX_PDF_STREAM_BYTES } from '../../lambdas/knowledge/extract/pdf.js';
import { BoundedZip, MAX_INFLATED_BYTES, MAX_RATIO } from '../../lambdas/knowledge/extract/zip.js';
import {
  BINARY_HEADS,
  binaryAsText,
  deepNestingDocx,
  docxWithBody,
  docxWithDocument,
  DOCX_TYPE,
  exeAsText,
  flateBombPdf,
  loopingPageTreePdf,
  noiseAsText,
  pngAsMarkdown,
  repeatedPagePdf,
  tinyParagraphsDocx,
  zipBombDocx,
  zipFile,
  type BinaryKind,
  type HostileFile,
} from '../helpers/hostile-files.js';
import { docxFile, OUTLINE, pdfFile } from '../helpers/knowledge-files.js';

/** A couple of seconds of this process's CPU: each refusal takes well under one here (before: 3 s to hours). */
const BUDGET_MS = 2_500;
/** And of wall time, which a shared machine's load stretches two or three times. */
const WALL_BUDGET_MS = 10_000;
/** What a refusal may add to the process's peak memory (before: 2-7 GB). */
const MEMORY_BUDGET = 256 * 1024 * 1024;

/** The file's extraction, timed (CPU and wall), with how much it raised the process's peak memory (resident set). */
async function extract(file: HostileFile): Promise<{ result: Extracted; cpuMs: number; wallMs: number; peakGrowth: number }> {
  const peakBefore = process.resourceUsage().maxRSS * 1024;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const result = await extractText(file.bytes, file.contentType, file.filename);
  const wallMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  return { result, cpuMs: (cpu.user + cpu.system) / 1000, wallMs, peakGrowth: process.resourceUsage().maxRSS * 1024 - peakBefore };
}

async function expectRefused(file: HostileFile, failed: string, message: RegExp): Promise<void> {
  const { result, cpuMs, wallMs, peakGrowth } = await extract(file);
  expect(result).toEqual({ failed, message: expect.stringMatching(message) });
  expect(cpuMs).toBeLessThan(BUDGET_MS);
  expect(wallMs).toBeLessThan(WALL_BUDGET_MS);
  expect(peakGrowth).toBeLessThan(MEMORY_BUDGET);
}

const utf8 = (s: string) => new TextEncoder().encode(s);

describe('DOCX (any zip): entries inflated within caps, XML scanned before mammoth reads it', () => {
  it(`refuses a DOCX whose one entry inflates to 1 GiB (1 MB sent) as too_large at once: more than ${MAX_INFLATED_BYTES / 2 ** 20} MiB`, async () => {
    const bomb = zipBombDocx();
    expect(bomb.bytes.length).toBeLessThan(1.2e6);
    await expectRefused(bomb, 'too_large', /word\/document\.xml inflates to 1,024 MiB; at most 64 MiB/);
  });

  it('refuses a DOCX of 400 MiB of tiny paragraphs (1.2 MB sent) as too_large', async () => {
    const tiny = tinyParagraphsDocx();
    expect(tiny.bytes.length).toBeLessThan(1.5e6);
    await expectRefused(tiny, 'too_large', /inflates to 400 MiB; at most 64 MiB/);
  });

  it(`refuses an entry under the total cap that inflates more than ${MAX_RATIO}:1 (repetition made to inflate)`, async () => {
    await expectRefused(zipBombDocx({ inflatedBytes: 48 * 2 ** 20 }), 'too_large', /inflates to 48 MiB from \d+(\.\d)? KiB, more than 100:1/);
  });

  it('stops inflating where the size its directory declares ends: a bomb that lies is parse_error after 10 MiB, not 1 GiB', async () => {
    await expectRefused(zipBombDocx({ declaredBytes: 10 * 2 ** 20 }), 'parse_error', /inflates past the 10,485,760 bytes its directory declares/);
  });

  it(`refuses more than ${MAX_DOCX_ELEMENTS.toLocaleString('en')} XML elements as too_large before mammoth builds a DOM of them`, async () => {
    // Paragraphs of differing words deflate as a document does (not 100:1): only the count refuses them.
    const words = ['vector', 'index', 'chunk', 'page', 'query', 'answer', 'cites', 'heading'];
    const body = Array.from({ length: MAX_DOCX_ELEMENTS / 3 + 1 }, (_, i) => `<w:p><w:r><w:t>${words[i % 8]} ${i} ${words[(i * 7) % 8]}</w:t></w:r></w:p>`).join('');
    await expectRefused(docxWithBody(body), 'too_large', /more than 200,000 XML elements/);
  });

  it(`refuses a DOCX nesting 200,000 elements as parse_error at once: deeper than ${MAX_DOCX_DEPTH}`, async () => {
    const deep = deepNestingDocx();
    expect(deep.bytes.length).toBeLessThan(100_000);
    await expectRefused(deep, 'parse_error', /nests elements more than 1,024 deep/);
  });

  it('reads a DOCX nested within the cap, and a part whose attribute values hold `>` or `/>`', async () => {
    expect(await extractText(deepNestingDocx(1_000).bytes, DOCX_TYPE, 'deep.docx')).toEqual({ sections: [{ text: 'deep', locator: 'top' }] });
    // A quoted `/>` is no self-closing tag: the nesting is still counted (1,025 levels).
    const tricky = `<w:p>${'<w:ins w:author="a/>b">'.repeat(MAX_DOCX_DEPTH + 1)}<w:r><w:t>x</w:t></w:r>${'</w:ins>'.repeat(MAX_DOCX_DEPTH + 1)}</w:p>`;
    expect(await extractText(docxWithBody(tricky).bytes, DOCX_TYPE, 't.docx')).toEqual({ failed: 'parse_error', message: expect.stringMatching(/more than 1,024 deep/) });
  });

  it('refuses a DTD in a DOCX part (parse_error): Word never writes one, and entities are how XML is made to expand', async () => {
    const dtd = `<?xml version="1.0"?><!DOCTYPE w:document [<!ENTITY a "${'x'.repeat(10)}">]><w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>&a;</w:t></w:r></w:p></w:body></w:document>`;
    await expectRefused(docxWithDocument(dtd), 'parse_error', /declares a DTD/);
  });

  it('reads ordinary DOCX as before: deflated (Word, the docx package) and stored entries alike, zip64 too', async () => {
    const expected = ['top', 'heading=Install', 'heading=Install > Linux', 'heading=Install > Linux > Debian', 'heading=Install > macOS', 'heading=Use'];
    const got = await extractText(await docxFile(OUTLINE), DOCX_TYPE, 'guide.docx');
    expect('sections' in got && got.sections.map((s) => s.locator)).toEqual(expected);
    // The same document re-zipped with every entry stored, and a comment after the directory.
    const zip = new BoundedZip(Buffer.from(await docxFile(OUTLINE)), 'DOCX');
    const stored = zipFile(
      zip.names().map((name) => {
        const data = zip.read(name);
        return { name, data, method: 0, size: data.length, crc: crc32(data) };
      }),
    );
    const withComment = new Uint8Array([...stored.subarray(0, stored.length - 2), 5, 0, ...utf8('hello')]);
    const again = await extractText(withComment, DOCX_TYPE, 'stored.docx');
    expect('sections' in again && again.sections.map((s) => s.locator)).toEqual(expected);
    // And in zip64's records, as writers that stream write them.
    const zip64 = zipFile(
      zip.names().map((name) => {
        const data = zip.read(name);
        return { name, data: deflateRawSync(data), method: 8, size: data.length, crc: crc32(data) };
      }),
      { zip64: true },
    );
    const wide = await extractText(zip64, DOCX_TYPE, 'zip64.docx');
    expect('sections' in wide && wide.sections.map((s) => s.locator)).toEqual(expected);
  });

  it('answers parse_error, without a message, for a zip that is merely damaged (as before)', async () => {
    const good = await docxFile(OUTLINE);
    expect(await extractText(good.subarray(0, good.length - 30), DOCX_TYPE, 'cut.docx')).toEqual({ failed: 'parse_error' });
    const raw = Buffer.from('<w:document/>');
    const corrupt = zipFile([{ name: 'word/document.xml', data: new Uint8Array([0xff, 0xff, 0xff]), method: 8, size: raw.length, crc: crc32(raw) }]);
    expect(await extractText(corrupt, DOCX_TYPE, 'bad.docx')).toEqual({ failed: 'parse_error' });
    // A deflated entry smaller than it declares is a forged one, and says so.
    const short = zipFile([{ name: 'word/document.xml', data: deflateRawSync(raw), method: 8, size: raw.length + 5, crc: crc32(raw) }]);
    expect(await extractText(short, DOCX_TYPE, 'short.docx')).toEqual({ failed: 'parse_error', message: expect.stringMatching(/inflates to 13 bytes, not the 18/) });
  });
});

describe('PDF: pages read one at a time, each listed page once, at most 10,000', () => {
  it(`refuses a PDF whose page tree lists one page 300,000 times (1.8 MB) as too_large before reading a page: more than ${MAX_PDF_PAGES.toLocaleString('en')}`, async () => {
    const pdf = repeatedPagePdf();
    expect(pdf.bytes.length).toBeLessThan(2e6);
    await expectRefused(pdf, 'too_large', /has 300,000 pages; at most 10,000/);
    await expectRefused(repeatedPagePdf(MAX_PDF_PAGES + 1), 'too_large', /has 10,001 pages/);
  });

  it(`refuses a PDF whose one page's content inflates to 1 GiB (1 MB sent) as too_large before PDF.js decodes it: past ${MAX_PDF_STREAM_BYTES / 2 ** 20} MiB`, async () => {
    const bomb = flateBombPdf();
    expect(bomb.bytes.length).toBeLessThan(1.2e6);
    await expectRefused(bomb, 'too_large', /stream at byte \d[\d,]* inflates past 64 MiB/);
    // A page whose content inflates to 8 MiB is no bomb: it reads.
    const eight = flateBombPdf(8 * 2 ** 20);
    expect(await extractText(eight.bytes, eight.contentType, eight.filename)).toEqual({ sections: [{ text: 'The page under the bomb.', locator: 'page=1' }] });
  });

  it('reads a page the tree lists again once, at its first place', async () => {
    expect(await extractText(repeatedPagePdf(5).bytes, 'application/pdf', 'five.pdf')).toEqual({
      sections: [{ text: 'The one page, listed many times.', locator: 'page=1' }],
    });
  });

  it('answers parse_error for a page tree that loops back on itself, saying so', async () => {
    await expectRefused(loopingPageTreePdf(), 'parse_error', /page tree loops back on itself/);
  });

  it('reads ordinary PDFs as before, page by page', async () => {
    const pdf = await pdfFile([['Alpha one.'], [], ['Gamma three.']]);
    expect(await extractText(pdf, 'application/pdf', 'a.pdf')).toEqual({
      sections: [
        { text: 'Alpha one.', locator: 'page=1' },
        { text: 'Gamma three.', locator: 'page=3' },
      ],
    });
  });
});

describe('binary bytes under a text type are unsupported_type, saying what they are', () => {
  it('refuses a PNG sent as Markdown', async () => {
    await expectRefused(pngAsMarkdown(), 'unsupported_type', /^The file is a PNG image, not Markdown/);
  });

  it.each(Object.keys(BINARY_HEADS) as BinaryKind[])('refuses %s under text/plain and text/markdown by its header', async (kind) => {
    const names: Record<BinaryKind, RegExp> = {
      png: /PNG image/,
      jpeg: /JPEG image/,
      gif: /GIF image/,
      webp: /WebP image/,
      zip: /zip archive/,
      gzip: /gzip archive/,
      bzip2: /bzip2 archive/,
      xz: /xz archive/,
      '7z': /7z archive/,
      rar: /RAR archive/,
      zstd: /zstd archive/,
      elf: /ELF executable/,
      'mach-o': /Mach-O executable/,
      wasm: /WebAssembly module/,
      sqlite: /SQLite database/,
      ole2: /OLE2/,
    };
    for (const as of ['text', 'markdown'] as const) {
      const file = binaryAsText(kind, as);
      const got = await extractText(file.bytes, file.contentType, file.filename);
      // A zip that is no DOCX is told apart before the text path, as before (no message there).
      if (kind === 'zip') expect(got).toEqual({ failed: 'unsupported_type' });
      else expect(got).toEqual({ failed: 'unsupported_type', message: expect.stringMatching(names[kind]) });
    }
  });

  it('refuses a Windows executable, and bytes with a share of control bytes no text has', async () => {
    await expectRefused(exeAsText(), 'unsupported_type', /Windows executable/);
    await expectRefused(noiseAsText(), 'unsupported_type', /binary data \(\d+ % of its first bytes are control bytes\)/);
  });

  it('keeps text that merely starts like a header, terminal colors, and UTF-16 as text', async () => {
    for (const text of ['GIF89 is a format.', 'BZh is no bzip2 without its block magic.', 'MZ and PE are letters.', 'ID3 tags hold titles.', 'Rar! said the lion.', 'ustar']) {
      expect(await extractText(utf8(text), 'text/plain', 'a.txt')).toEqual({ sections: [{ text, locator: 'line=1' }] });
    }
    const log = '\x1b[31merror\x1b[0m: disk full\n'.repeat(100);
    expect(await extractText(utf8(log), 'text/plain', 'build.log')).toEqual({ sections: [{ text: log, locator: 'line=1' }] });
    const utf16 = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('Приве́т, мир', 'utf16le')]);
    expect(await extractText(utf16, 'text/plain', 'ru.txt')).toEqual({ sections: [{ text: 'Приве́т, мир', locator: 'line=1' }] });
  });
});
