/**
 * PDF (unpdf: PDF.js built for serverless runtimes, one ESM module that bundles): each page's text
 * is a section located `page=N`. A page without text (a scan, a blank page) makes no section.
 *
 * Pages are read one at a time, each released before the next, not all at once as unpdf's
 * `extractText` does (a promise per page, all held: a page tree listing one page 300,000 times
 * drove a process past 7 GB). A page the tree lists again is read once, at its first place. The
 * page count (`/Count`, checked by PDF.js against the tree's last page) is capped before any page is
 * read, and text past the output cap stops the reading there. PDF.js itself refuses a page tree that
 * loops back on itself.
 */
import { constants, inflateSync } from 'node:zlib';
import { getDocumentProxy } from 'unpdf';
import { MAX_OUTPUT_CHARS, Refusal, type Section } from './types.js';

/** A book is hundreds of pages; past ten thousand a PDF is a scan archive or made to be read forever. */
export const MAX_PDF_PAGES = 10_000;
/**
 * A deflated stream PDF.js would decode to read text (a page's content, a form, a font, an object
 * stream) inflating past this is `too_large`: PDF.js holds about 4 times a content stream's size
 * while it reads it (a 266 KB file whose one page inflates to 256 MiB peaked at 1 GB), and a page's
 * content is kilobytes to a few MiB. Images are not read for text, and not checked.
 */
export const MAX_PDF_STREAM_BYTES = 64 * 1024 * 1024;
/** And all such streams together: what the check itself may inflate. */
export const MAX_PDF_STREAMS_BYTES = 512 * 1024 * 1024;

export async function pdfSections(bytes: Uint8Array): Promise<Section[]> {
  checkStreams(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length));
  // PDF.js may take over (detach) the buffer it is given, and refuses a Node Buffer: it gets a plain
  // Uint8Array copy (a Buffer's slice() would share the memory), the caller keeps its bytes.
  const pdf = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
  try {
    if (pdf.numPages > MAX_PDF_PAGES) {
      throw new Refusal('too_large', `The PDF has ${pdf.numPages.toLocaleString('en')} pages; at most ${MAX_PDF_PAGES.toLocaleString('en')} are read. Split it and send the parts.`);
    }
    const sections: Section[] = [];
    const seen = new Set<string>();
    let chars = 0;
    for (let n = 1; n <= pdf.numPages; n++) {
      const page = await pdf.getPage(n).catch((error: unknown) => {
        // PDF.js walks the page tree remembering the nodes it passed, and stops where one comes round again.
        if (String((error as Error)?.message).includes('circular reference')) {
          throw new Refusal('parse_error', `The PDF's page tree loops back on itself before page ${n}: one of its nodes lists a node above it.`);
        }
        throw error;
      });
      const ref = page.ref ? `${page.ref.num} ${page.ref.gen}` : undefined;
      if (ref !== undefined && seen.has(ref)) continue;
      if (ref !== undefined) seen.add(ref);
      const content = await page.getTextContent();
      // As unpdf's extractText joins a page's items: each string, a line break where PDF.js saw a line end.
      const text = content.items.map((item) => ('str' in item ? item.str + (item.hasEOL ? '\n' : '') : '')).join('');
      page.cleanup();
      const clean = text
        .replace(/[^\S\n]+/g, ' ')
        .replace(/ ?\n ?/g, '\n')
        .replace(/\n{3,}/g, '\n\n')
        .trim();
      if (!clean) continue;
      chars += clean.length;
      if (chars > MAX_OUTPUT_CHARS) {
        throw new Refusal('too_large', `The PDF's text passes ${MAX_OUTPUT_CHARS.toLocaleString('en')} characters by page ${n}; split it and send the parts.`);
      }
      sections.push({ text: clean, locator: `page=${n}` });
    }
    return sections;
  } finally {
    // Frees the document's worker-side state at once rather than at garbage collection.
    await pdf.loadingTask.destroy();
  }
}

/** How far before `stream` its dictionary is looked for: a stream's dictionary is a few hundred bytes. */
const DICTIONARY_WINDOW = 4096;

/**
 * Inflates, within the caps, each deflated stream PDF.js would decode for text, found in the file's
 * bytes (`stream` ... `endstream`, its dictionary naming /FlateDecode and no /Image), before PDF.js
 * reads any: a PDF's zip bomb is refused before it is decoded. Streams that do not inflate (encrypted,
 * filtered first by another filter) are left to PDF.js.
 */
function checkStreams(pdf: Buffer): void {
  let total = 0;
  for (let at = pdf.indexOf('stream'); at !== -1; at = pdf.indexOf('stream', at + 6)) {
    if (at >= 3 && pdf.toString('latin1', at - 3, at) === 'end') continue;
    let start = at + 6;
    if (pdf[start] === 0x0d) start++;
    if (pdf[start] !== 0x0a) continue;
    start++;
    const head = pdf.toString('latin1', Math.max(0, at - DICTIONARY_WINDOW), at);
    const dictionary = head.slice(head.lastIndexOf(' obj') + 1);
    if (!dictionary.includes('/FlateDecode') || /\/Subtype\s*\/Image\b/.test(dictionary)) continue;
    let end = pdf.indexOf('endstream', start);
    if (end === -1) end = pdf.length;
    let inflated: Buffer;
    try {
      // A sync flush: a stream cut short still inflates as far as it goes, as PDF.js reads it.
      inflated = inflateSync(pdf.subarray(start, end), { maxOutputLength: MAX_PDF_STREAM_BYTES, finishFlush: constants.Z_SYNC_FLUSH });
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
        throw new Refusal('too_large', `The PDF's stream at byte ${at.toLocaleString('en')} inflates past ${MAX_PDF_STREAM_BYTES / 2 ** 20} MiB; no page's text needs that much.`);
      }
      at = end;
      continue;
    }
    total += inflated.length;
    if (total > MAX_PDF_STREAMS_BYTES) {
      throw new Refusal('too_large', `The PDF's streams inflate past ${MAX_PDF_STREAMS_BYTES / 2 ** 20} MiB in all; split it and send the parts.`);
    }
    at = end;
  }
}
