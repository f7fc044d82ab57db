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
import { getDocumentProxy } from 'unpdf';
import { MAX_OUTPUT_CHARS, Refusal, type Section } from './types.js';

/** A book is hundreds of pages; past ten thousand a PDF is a scan archive or made to be read forever. */
export const MAX_PDF_PAGES = 10_000;

export async function pdfSections(bytes: Uint8Array): Promise<Section[]> {
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
