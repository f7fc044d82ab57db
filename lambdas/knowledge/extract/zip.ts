/**
 * A zip's entries read with their cost bounded before it is paid: the central directory is walked
 * here (not by a zip library that inflates whatever it is asked), and an entry is inflated only
 * when the size its directory declares fits the caps, then stopped at that size while inflating, so
 * a zip bomb (1 MB declaring, or hiding, a GiB) costs at most what the caps allow.
 *
 * Caps, each `too_large` with a message naming it:
 * - `MAX_ZIP_ENTRIES` entries in the directory;
 * - `MAX_INFLATED_BYTES` inflated in all, across every entry read (overlapping entries count each time);
 * - past its first `RATIO_FREE_BYTES`, an entry inflates at most `MAX_RATIO` times its compressed size.
 * An entry that inflates past the size it declares, or to less, is a forged zip: `parse_error`,
 * saying so; a zip that is merely damaged is `parse_error` as any unreadable file is.
 */
import { inflateRawSync } from 'node:zlib';
import { Refusal } from './types.js';

const MiB = 1024 * 1024;

/** Word documents hold tens to hundreds of parts (one per image); ten thousand is no document. */
export const MAX_ZIP_ENTRIES = 10_000;
/** All the XML a DOCX's reader needs: 64 MiB is ~10 times the largest Word documents' main part. */
export const MAX_INFLATED_BYTES = 64 * MiB;
/** Word's XML deflates 5-15:1; a hundred times, past the first MiB, is repetition made to inflate. */
export const MAX_RATIO = 100;
export const RATIO_FREE_BYTES = MiB;

const END_OF_DIRECTORY = 0x06054b50;
const ZIP64_LOCATOR = 0x07064b50;
const ZIP64_END_OF_DIRECTORY = 0x06064b50;
const DIRECTORY_ENTRY = 0x02014b50;
const LOCAL_HEADER = 0x04034b50;
const UNKNOWN32 = 0xffffffff;

interface Entry {
  name: string;
  flags: number;
  method: number;
  compressedSize: number;
  size: number;
  localOffset: number;
}

export class BoundedZip {
  private readonly entries = new Map<string, Entry>();
  private inflated = 0;

  /** `kind` names the file in messages (`DOCX`). Throws Refusal for a directory that is no zip's or too big. */
  constructor(
    private readonly bytes: Buffer,
    private readonly kind: string,
  ) {
    const { count, offset } = this.directory();
    if (offset + count * 46 > bytes.length) throw this.corrupt(`its directory lists ${count} files it has no room for`);
    if (count > MAX_ZIP_ENTRIES) throw new Refusal('too_large', `The ${kind} holds ${count.toLocaleString('en')} files; at most ${MAX_ZIP_ENTRIES.toLocaleString('en')} are read.`);
    let p = offset;
    for (let i = 0; i < count; i++) {
      if (p + 46 > bytes.length || bytes.readUInt32LE(p) !== DIRECTORY_ENTRY) throw this.corrupt('its directory is cut short');
      const flags = bytes.readUInt16LE(p + 8);
      const nameLength = bytes.readUInt16LE(p + 28);
      const extraLength = bytes.readUInt16LE(p + 30);
      const end = p + 46 + nameLength + extraLength + bytes.readUInt16LE(p + 32);
      if (end > bytes.length) throw this.corrupt('its directory is cut short');
      const entry: Entry = {
        name: bytes.toString(flags & 0x800 ? 'utf8' : 'latin1', p + 46, p + 46 + nameLength),
        flags,
        method: bytes.readUInt16LE(p + 10),
        compressedSize: bytes.readUInt32LE(p + 20),
        size: bytes.readUInt32LE(p + 24),
        localOffset: bytes.readUInt32LE(p + 42),
      };
      this.zip64Sizes(entry, p + 46 + nameLength, extraLength);
      if (!this.entries.has(entry.name)) this.entries.set(entry.name, entry);
      p = end;
    }
  }

  has(name: string): boolean {
    return this.entries.has(name);
  }

  /** The entries' names, in directory order. */
  names(): string[] {
    return [...this.entries.keys()];
  }

  /**
   * The entry's bytes, inflated within the caps. Throws Refusal: `too_large` past a cap (before
   * inflating when the declared size says so), `parse_error` for an entry that is corrupt,
   * encrypted, in a method other than stored or deflate, or not the size it declares.
   */
  read(name: string): Buffer {
    const entry = this.entries.get(name);
    if (!entry) throw this.corrupt(`it has no ${name}`);
    if (entry.flags & 1) throw new Refusal('parse_error', `The ${this.kind} is encrypted (${name}); save it without a password and send it again.`);
    const { bytes } = this;
    const at = entry.localOffset;
    if (at + 30 > bytes.length || bytes.readUInt32LE(at) !== LOCAL_HEADER) throw this.corrupt(`${name} is not where its directory says`);
    const start = at + 30 + bytes.readUInt16LE(at + 26) + bytes.readUInt16LE(at + 28);
    if (start + entry.compressedSize > bytes.length) throw this.corrupt(`${name} is cut short`);
    const data = bytes.subarray(start, start + entry.compressedSize);

    const left = MAX_INFLATED_BYTES - this.inflated;
    const byRatio = Math.max(RATIO_FREE_BYTES, MAX_RATIO * entry.compressedSize);
    if (entry.size > left || entry.size > byRatio) throw this.tooLarge(name, entry, entry.size > left ? 'total' : 'ratio');
    let out: Buffer;
    if (entry.method === 0) {
      if (entry.compressedSize !== entry.size) throw this.forged(`${name} is stored as ${entry.compressedSize} bytes but declares ${entry.size}`);
      out = data;
    } else if (entry.method === 8) {
      try {
        // Stops as soon as the output passes the declared size: a lie costs no more than the truth would.
        out = inflateRawSync(data, { maxOutputLength: Math.max(1, entry.size) });
      } catch (error) {
        if ((error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') {
          throw this.forged(`${name} inflates past the ${entry.size.toLocaleString('en')} bytes its directory declares`);
        }
        throw this.corrupt(`${name} does not inflate (${(error as Error).message})`);
      }
      if (out.length !== entry.size) throw this.forged(`${name} inflates to ${out.length.toLocaleString('en')} bytes, not the ${entry.size.toLocaleString('en')} its directory declares`);
    } else {
      throw new Refusal('parse_error', `The ${this.kind}'s ${name} is compressed with method ${entry.method}; only stored and deflated entries are read.`);
    }
    this.inflated += out.length;
    return out;
  }

  /** The central directory's entry count and offset, from the end-of-directory record (zip64 too). */
  private directory(): { count: number; offset: number } {
    const { bytes } = this;
    // The record is the last 22 bytes, unless a comment (at most 64 KiB) follows it.
    for (let p = bytes.length - 22; p >= Math.max(0, bytes.length - 22 - 0xffff); p--) {
      if (bytes.readUInt32LE(p) !== END_OF_DIRECTORY) continue;
      let count = bytes.readUInt16LE(p + 10);
      let offset = bytes.readUInt32LE(p + 16);
      if ((count === 0xffff || offset === UNKNOWN32) && p >= 20 && bytes.readUInt32LE(p - 20) === ZIP64_LOCATOR) {
        const at = safeNumber(bytes.readBigUInt64LE(p - 12));
        if (at + 56 > bytes.length || bytes.readUInt32LE(at) !== ZIP64_END_OF_DIRECTORY) throw this.corrupt('its zip64 directory is missing');
        count = safeNumber(bytes.readBigUInt64LE(at + 32));
        offset = safeNumber(bytes.readBigUInt64LE(at + 48));
      }
      if (offset > bytes.length) throw this.corrupt('its directory is not where it says');
      return { count, offset };
    }
    throw this.corrupt('it is not a zip (no directory at its end)');
  }

  /** Sizes and offset past 4 GiB are in the zip64 extra field, in this order, only those marked unknown. */
  private zip64Sizes(entry: Entry, at: number, length: number): void {
    if (entry.size !== UNKNOWN32 && entry.compressedSize !== UNKNOWN32 && entry.localOffset !== UNKNOWN32) return;
    const { bytes } = this;
    for (let p = at; p + 4 <= at + length; ) {
      const id = bytes.readUInt16LE(p);
      const size = bytes.readUInt16LE(p + 2);
      if (id === 1) {
        let q = p + 4;
        const next = () => {
          if (q + 8 > p + 4 + size) throw this.corrupt(`${entry.name}'s zip64 sizes are cut short`);
          const value = safeNumber(bytes.readBigUInt64LE(q));
          q += 8;
          return value;
        };
        if (entry.size === UNKNOWN32) entry.size = next();
        if (entry.compressedSize === UNKNOWN32) entry.compressedSize = next();
        if (entry.localOffset === UNKNOWN32) entry.localOffset = next();
        return;
      }
      p += 4 + size;
    }
  }

  private tooLarge(name: string, entry: Entry, cap: 'total' | 'ratio'): Refusal {
    const size = mib(entry.size);
    return new Refusal(
      'too_large',
      cap === 'total'
        ? `The ${this.kind}'s ${name} inflates to ${size}; at most ${mib(MAX_INFLATED_BYTES)} of a ${this.kind}'s parts is read. Split the document, or send it as PDF.`
        : `The ${this.kind}'s ${name} inflates to ${size} from ${mib(entry.compressedSize)}, more than ${MAX_RATIO}:1; no document compresses that much, repetition made to inflate does.`,
    );
  }

  /** A damaged zip is `parse_error` as any unreadable file is (no message: nothing to do but send a good one). */
  private corrupt(why: string): Error {
    return new Error(`The ${this.kind} is not a readable zip: ${why}.`);
  }

  /** A zip whose sizes lie is made to mislead a reader: `parse_error`, saying so. */
  private forged(why: string): Refusal {
    return new Refusal('parse_error', `The ${this.kind} is not a readable zip: ${why}.`);
  }
}

function safeNumber(value: bigint): number {
  // Past 2^53 nothing fits in memory anyway; the caps refuse it.
  return value > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(value);
}

function mib(bytes: number): string {
  return bytes >= MiB ? `${(bytes / MiB).toLocaleString('en', { maximumFractionDigits: 1 })} MiB` : `${(bytes / 1024).toLocaleString('en', { maximumFractionDigits: 1 })} KiB`;
}
