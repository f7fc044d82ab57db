/**
 * DOCX (mammoth): converted to HTML, whose headings are the document's Heading styles, then read as
 * HTML is. Images are dropped at conversion: they would be inlined as data URIs only to be skipped.
 */
import mammoth from 'mammoth';
import { htmlSections } from './html.js';
import type { Section } from './types.js';

const NO_IMAGES = mammoth.images.imgElement(async () => ({ src: '' }));

export async function docxSections(bytes: Uint8Array): Promise<Section[]> {
  const { value } = await mammoth.convertToHtml({ buffer: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length) }, { convertImage: NO_IMAGES });
  return htmlSections(value);
}
