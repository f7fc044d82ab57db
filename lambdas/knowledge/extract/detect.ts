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

/**
 * Headers that prove bytes are no text whatever their type or name says (a PNG sent as
 * text/markdown, a gzip as text/plain): images, archives, executables, databases, media. Each is
 * matched at its offset; an ASCII-looking one is paired with the binary bytes that follow it, so a
 * text that merely starts with such a word stays text.
 */
const BINARY_HEADERS: { kind: string; at?: number; header: (number | string)[] }[] = [
  { kind: 'a PNG image', header: [0x89, 'PNG\r\n', 0x1a, 0x0a] },
  { kind: 'a JPEG image', header: [0xff, 0xd8, 0xff] },
  { kind: 'a GIF image', header: ['GIF87a'] },
  { kind: 'a GIF image', header: ['GIF89a'] },
  { kind: 'a RIFF file', header: ['RIFF'] },
  { kind: 'a TIFF image', header: ['II*', 0x00] },
  { kind: 'a TIFF image', header: ['MM', 0x00, '*'] },
  { kind: 'a Photoshop image', header: ['8BPS', 0x00, 0x01] },
  { kind: 'a Matroska or WebM file', header: [0x1a, 0x45, 0xdf, 0xa3] },
  { kind: 'an Ogg file', header: ['OggS', 0x00] },
  { kind: 'a FLAC file', header: ['fLaC'] },
  { kind: 'a zip archive', header: ['PK', 0x03, 0x04] },
  { kind: 'a zip archive', header: ['PK', 0x05, 0x06] },
  { kind: 'a zip archive', header: ['PK', 0x07, 0x08] },
  { kind: 'a gzip archive', header: [0x1f, 0x8b, 0x08] },
  { kind: 'an xz archive', header: [0xfd, '7zXZ', 0x00] },
  { kind: 'a 7z archive', header: ['7z', 0xbc, 0xaf, 0x27, 0x1c] },
  { kind: 'a RAR archive', header: ['Rar!', 0x1a, 0x07] },
  { kind: 'a zstd archive', header: [0x28, 0xb5, 0x2f, 0xfd] },
  { kind: 'an LZ4 archive', header: [0x04, 0x22, 0x4d, 0x18] },
  { kind: 'a cabinet archive', header: ['MSCF', 0x00, 0x00, 0x00, 0x00] },
  { kind: 'a tar archive', at: 257, header: ['ustar'] },
  { kind: 'an ar archive (.deb, .a)', header: ['!<arch>\n'] },
  { kind: 'an ELF executable', header: [0x7f, 'ELF'] },
  { kind: 'a Mach-O executable', header: [0xfe, 0xed, 0xfa, 0xce] },
  { kind: 'a Mach-O executable', header: [0xfe, 0xed, 0xfa, 0xcf] },
  { kind: 'a Mach-O executable', header: [0xce, 0xfa, 0xed, 0xfe] },
  { kind: 'a Mach-O executable', header: [0xcf, 0xfa, 0xed, 0xfe] },
  { kind: 'a Mach-O universal binary or Java class', header: [0xca, 0xfe, 0xba, 0xbe] },
  { kind: 'a WebAssembly module', header: [0x00, 'asm'] },
  { kind: 'an SQLite database', header: ['SQLite format 3', 0x00] },
  { kind: 'an old Office (OLE2) file', header: [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1] },
  { kind: 'a web font', header: ['wOFF'] },
  { kind: 'a web font', header: ['wOF2'] },
];

/**
 * What binary format the bytes' header proves them to be (`a PNG image`), or undefined. Read for
 * the text formats only: PDF and DOCX are told by their own headers before.
 */
export function binaryKind(bytes: Uint8Array): string | undefined {
  for (const { kind, at = 0, header } of BINARY_HEADERS) {
    if (!matches(bytes, at, header)) continue;
    if (kind !== 'a RIFF file') return kind;
    // RIFF holds images, audio and video alike; its form type says which.
    const form = ascii(bytes, 8, 12);
    return form === 'WEBP' ? 'a WebP image' : form === 'WAVE' ? 'a WAV recording' : form === 'AVI ' ? 'an AVI video' : kind;
  }
  // ISO media (MP4, QuickTime, HEIF, AVIF): a box size, then `ftyp`.
  if (bytes[0] === 0 && matches(bytes, 4, ['ftyp'])) return 'an MP4, QuickTime or HEIF file';
  // ID3 (an MP3's tags): its version (2-4), then a zero revision byte.
  if (matches(bytes, 0, ['ID3']) && bytes[3] >= 2 && bytes[3] <= 4 && bytes[4] === 0) return 'an MP3 file';
  // bzip2: `BZh`, its block size (1-9), then a block's magic (pi's digits) or an empty stream's (sqrt(pi)'s).
  if (matches(bytes, 0, ['BZh']) && bytes[3] >= 0x31 && bytes[3] <= 0x39 && (matches(bytes, 4, ['1AY&SY']) || matches(bytes, 4, [0x17, 0x72, 0x45, 0x38, 0x50, 0x90]))) {
    return 'a bzip2 archive';
  }
  // A Windows executable: `MZ`, and where its DOS header points, `PE\0\0`.
  if (matches(bytes, 0, ['MZ']) && bytes.length >= 64) {
    const pe = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length).readUInt32LE(0x3c);
    if (matches(bytes, pe, ['PE', 0, 0])) return 'a Windows executable';
  }
  return undefined;
}

function matches(bytes: Uint8Array, at: number, header: (number | string)[]): boolean {
  let p = at;
  for (const part of header) {
    if (typeof part === 'number') {
      if (bytes[p++] !== part) return false;
    } else {
      for (let k = 0; k < part.length; k++) if (bytes[p++] !== part.charCodeAt(k)) return false;
    }
  }
  return true;
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
