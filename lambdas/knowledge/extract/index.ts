/**
 * A document's text, as sections that each say where they came from (their locator): PDF pages,
 * the headings of HTML, DOCX and Markdown, plain text's lines. A file that cannot give text answers
 * why (`unsupported_type`, `parse_error`, `empty_text`, `too_large`) instead of throwing, so an item
 * fails with its reason. Audio and video are `unsupported_type` here: their text is a transcript,
 * whose segments become sections located by time (`timeLocator`) where transcription runs.
 */
import { charsetOf, detectFormat, type Format } from './detect.js';
import { docxSections } from './docx.js';
import { htmlSections } from './html.js';
import { markdownSections } from './markdown.js';
import { pdfSections } from './pdf.js';
import { decodeText, plainTextSections } from './text.js';
import { MAX_INPUT_BYTES, MAX_OUTPUT_CHARS, type Extracted, type Section } from './types.js';

export { timeLocator, MAX_INPUT_BYTES, MAX_OUTPUT_CHARS } from './types.js';
export type { Extracted, ExtractFailure, Locator, Section } from './types.js';
export { detectFormat, type Format } from './detect.js';

export async function extractText(bytes: Uint8Array, contentType: string, filename: string): Promise<Extracted> {
  const format = detectFormat(bytes, contentType, filename);
  if (format === undefined || format === 'audio' || format === 'video') return { failed: 'unsupported_type' };
  if (bytes.length > MAX_INPUT_BYTES) return { failed: 'too_large' };
  let sections: Section[] | undefined;
  try {
    sections = await parse(format, bytes, contentType);
  } catch {
    // The parsers throw on whatever they cannot read (a corrupt or encrypted file): that is the file's fault.
    return { failed: 'parse_error' };
  }
  if (sections === undefined) return { failed: 'unsupported_type' };
  let chars = 0;
  for (const s of sections) chars += s.text.length;
  if (chars > MAX_OUTPUT_CHARS) return { failed: 'too_large' };
  const withText = sections.filter((s) => /\S/.test(s.text));
  return withText.length > 0 ? { sections: withText } : { failed: 'empty_text' };
}

/** The sections of a file in `format`; undefined when a text format's bytes are binary. */
async function parse(format: Exclude<Format, 'audio' | 'video'>, bytes: Uint8Array, contentType: string): Promise<Section[] | undefined> {
  if (format === 'pdf') return pdfSections(bytes);
  if (format === 'docx') return docxSections(bytes);
  const text = decodeText(bytes, charsetOf(contentType));
  if (text === undefined) return undefined;
  if (format === 'html') return htmlSections(text);
  if (format === 'markdown') return markdownSections(text);
  return plainTextSections(text);
}
