/** Bytes to text, and a plain text file as its one section. */
import type { Section } from './types.js';

/**
 * The file's text: the content type's charset when it names one we know, else a byte order mark's
 * encoding, else UTF-8, and Windows-1252 (a superset of Latin-1) when the bytes are not valid UTF-8,
 * as browsers do. Undefined for binary data (a NUL byte early on), which no text format holds.
 */
export function decodeText(bytes: Uint8Array, charset?: string): string | undefined {
  if (bytes.subarray(0, 8192).includes(0) && !isUtf16(bytes)) return undefined;
  if (charset) {
    try {
      return new TextDecoder(charset).decode(bytes);
    } catch {
      // An unknown label: fall through to the bytes' own evidence.
    }
  }
  if (isUtf16(bytes)) return new TextDecoder(bytes[0] === 0xff ? 'utf-16le' : 'utf-16be').decode(bytes);
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return new TextDecoder('windows-1252').decode(bytes);
  }
}

function isUtf16(bytes: Uint8Array): boolean {
  return (bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff);
}

/** Plain text is one section from line 1: chunking gives each chunk its own line range. */
export function plainTextSections(text: string): Section[] {
  return [{ text: text.replace(/\r\n?/g, '\n'), locator: 'line=1' }];
}
