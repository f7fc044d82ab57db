/**
 * PDF (unpdf: PDF.js built for serverless runtimes, one ESM module that bundles): each page's text
 * is a section located `page=N`. A page without text (a scan, a blank page) makes no section.
 */
import { extractText, getDocumentProxy } from 'unpdf';
import type { Section } from './types.js';

export async function pdfSections(bytes: Uint8Array): Promise<Section[]> {
  // PDF.js may take over (detach) the buffer it is given, and refuses a Node Buffer: it gets a plain
  // Uint8Array copy (a Buffer's slice() would share the memory), the caller keeps its bytes.
  const pdf = await getDocumentProxy(new Uint8Array(bytes), { verbosity: 0 });
  try {
    const { text } = await extractText(pdf, { mergePages: false });
    const sections: Section[] = [];
    text.forEach((page, i) => {
      const clean = page
        .replace(/[^\S\n]+/g, ' ')
        .replace(/ ?\n ?/g, '\n')
        .replace(/\n{3,}/g, '\n\n')
        .trim();
      if (clean) sections.push({ text: clean, locator: `page=${i + 1}` });
    });
    return sections;
  } finally {
    // Frees the document's worker-side state at once rather than at garbage collection.
    await pdf.loadingTask.destroy();
  }
}
