/**
 * A document's text, as sections that each say where they came from (their locator): PDF pages,
 * the headings of HTML, DOCX and Markdown, plain text's lines. A file that cannot give text answers
 * why (`unsupported_type`, `parse_error`, `empty_text`, `too_large`) instead of throwing, so an item
 * fails with its reason. Audio and video are `unsupported_type` here: their text is a transcript,
 * whose segments become sections located by time (`timeLocator`) where transcription runs.
 */
import { binaryKind, charsetOf, detectFormat, type Format } from './detect.js';
import { docxSections } from './docx.js';
import { htmlSections } from './html.js';
import { markdownSections } from './markdown.js';
import { pdfSections } from './pdf.js';
import { controlBytes, decodeText, plainTextSections } from './text.js';
import { MAX_INPUT_BYTES, MAX_OUTPUT_CHARS, Refusal, type Extracted, type Section } from './types.js';

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
  } catch (error) {
    // A parser that refuses a file says why (a cap, a forged structure).
    if (error instanceof Refusal) return { failed: error.failure, message: error.message };
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

const TEXT_FORMATS = { html: 'HTML', markdown: 'Markdown', text: 'text' } as const;

/** The sections of a file in `format`; undefined when a text format's bytes are binary (a NUL byte early on). */
async function parse(format: Exclude<Format, 'audio' | 'video'>, bytes: Uint8Array, contentType: string): Promise<Section[] | undefined> {
  if (format === 'pdf') return pdfSections(bytes);
  if (format === 'docx') return docxSections(bytes);
  // Bytes a binary header proves, or a share of control bytes shows, to be no text are refused
  // before a text parser spends time on them: a PNG as text/markdown is no Markdown.
  const binary = binaryKind(bytes);
  if (binary) throw new Refusal('unsupported_type', `The file is ${binary}, not ${TEXT_FORMATS[format]}: its bytes say so, whatever its type or name says. Items read PDF, DOCX, HTML, Markdown, plain text and recordings.`);
  const charset = charsetOf(contentType);
  const text = decodeText(bytes, charset);
  if (text === undefined) return undefined;
  const controls = controlBytes(bytes, charset);
  if (controls) throw new Refusal('unsupported_type', `The file is ${controls}, not ${TEXT_FORMATS[format]}. Items read PDF, DOCX, HTML, Markdown, plain text and recordings.`);
  if (format === 'html') return htmlSections(text);
  if (format === 'markdown') return markdownSections(text);
  return plainTextSections(text);
}
