/**
 * Which parser reads a file. The bytes win where they can prove a format (a PDF's `%PDF-`, a DOCX's
 * zip with `word/document.xml`), so a wrong or generic content type does not mislead; then the
 * content type; then the file name's extension. Audio and video are recognized so they can be sent
 * to transcription; extraction itself does not read them.
 */

export type Format = 'pdf' | 'docx' | 'html' | 'markdown' | 'text' | 'audio' | 'video';

const BY_TYPE: Record<string, Format> = {
  'application/pdf': 'pdf',
  'application/vnd.openxmlformats-officedocument.wordprocessingml.document': 'docx',
  'text/html': 'html',
  'application/xhtml+xml': 'html',
  'text/markdown': 'markdown',
  'text/x-markdown': 'markdown',
  'text/plain': 'text',
};

const BY_EXTENSION: Record<string, Format> = {
  pdf: 'pdf',
  docx: 'docx',
  html: 'html',
  htm: 'html',
  xhtml: 'html',
  md: 'markdown',
  markdown: 'markdown',
  txt: 'text',
  text: 'text',
};

const PDF_MAGIC = '%PDF-';
const ZIP_MAGIC = 'PK\x03\x04';
/** A DOCX names its main part in a local file header near the start; names in a zip are stored uncompressed. */
const DOCX_PART = 'word/document.xml';
const DOCX_SCAN_BYTES = 64 * 1024;

/** The format to parse the file as, or undefined when none of ours reads it. */
export function detectFormat(bytes: Uint8Array, contentType: string, filename: string): Format | undefined {
  const head = ascii(bytes, 0, 8);
  // At the very start only: a text about PDFs may well quote the header further in.
  if (head.startsWith(PDF_MAGIC)) return 'pdf';
  if (head.startsWith(ZIP_MAGIC)) return ascii(bytes, 0, DOCX_SCAN_BYTES).includes(DOCX_PART) ? 'docx' : undefined;

  const type = mediaType(contentType);
  const extension = /\.([a-z0-9]+)$/i.exec(filename)?.[1]?.toLowerCase();
  const named = extension === undefined ? undefined : BY_EXTENSION[extension];
  if (type.startsWith('audio/')) return 'audio';
  if (type.startsWith('video/')) return 'video';
  const typed = BY_TYPE[type];
  // Many clients send Markdown as text/plain; the name says which.
  if (typed === 'text' && named === 'markdown') return 'markdown';
  if (typed) return typed;
  if (named) return named;
  // Some other text/* (text/csv, text/x-log...) is still text.
  return type.startsWith('text/') ? 'text' : undefined;
}

/** `text/html; charset=utf-8` → `text/html`. */
export function mediaType(contentType: string): string {
  return contentType.split(';')[0].trim().toLowerCase();
}

/** The `charset` parameter of a content type, if any. */
export function charsetOf(contentType: string): string | undefined {
  return /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(contentType)?.[1]?.toLowerCase();
}

function ascii(bytes: Uint8Array, start: number, end: number): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset + start, Math.max(0, Math.min(end, bytes.length) - start)).toString('latin1');
}
