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

/** How much of a file is read for its control bytes: a sample, as the NUL check's, and enough to tell. */
const CONTROL_SAMPLE_BYTES = 64 * 1024;
/**
 * Control bytes (other than tab, line breaks, form feed and the escape of terminal colors) past
 * which bytes are binary: text holds next to none, random bytes about 10 % (27 of 256 values).
 */
export const MAX_CONTROL_SHARE = 0.05;

/**
 * Why bytes with no NUL early on are still no text (`binary data: 12 % control bytes`), or
 * undefined. UTF-16 and UTF-32 are not judged: their high bytes are control bytes by nature.
 */
export function controlBytes(bytes: Uint8Array, charset?: string): string | undefined {
  if (isUtf16(bytes) || /^utf-?(16|32)/.test(charset ?? '')) return undefined;
  const sample = bytes.subarray(0, CONTROL_SAMPLE_BYTES);
  let controls = 0;
  for (const b of sample) if ((b < 0x20 && b !== 0x09 && b !== 0x0a && b !== 0x0c && b !== 0x0d && b !== 0x1b && b !== 0x00) || b === 0x7f) controls++;
  const share = controls / Math.max(1, sample.length);
  return share > MAX_CONTROL_SHARE ? `binary data (${Math.round(share * 100)} % of its first bytes are control bytes)` : undefined;
}

function isUtf16(bytes: Uint8Array): boolean {
  return (bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff);
}

/** Plain text is one section from line 1: chunking gives each chunk its own line range. */
export function plainTextSections(text: string): Section[] {
  return [{ text: text.replace(/\r\n?/g, '\n'), locator: 'line=1' }];
}
