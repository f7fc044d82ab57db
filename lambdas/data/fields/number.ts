import { expected, type FieldType } from './field-type.js';

/**
 * A number as a key: its IEEE 754 double, big-endian, in hex, with the sign bit flipped for
 * positives and every bit flipped for negatives, so that byte order is numeric order. `-0` is
 * encoded as `0` (JSON, and so the stored record, knows no `-0`).
 */
export function encodeNumberKey(value: unknown): string {
  const buf = Buffer.alloc(8);
  buf.writeDoubleBE((value as number) + 0); // -0 + 0 is 0
  if (buf[0] & 0x80) for (let i = 0; i < 8; i++) buf[i] = ~buf[i] & 0xff;
  else buf[0] |= 0x80;
  return buf.toString('hex');
}

/** A query-string number: `Number(raw)`, but an empty or blank value is no number (not 0). */
export const parseNumberQuery = (raw: string): unknown => (raw.trim() === '' ? NaN : Number(raw));

export const number: FieldType<'number'> = {
  name: 'number',
  indexable: true,
  fulltext: false,
  normalize(field, value) {
    if (typeof value !== 'number' || !Number.isFinite(value)) throw expected(field, 'a finite number');
    return value + 0; // -0 becomes 0, as JSON stores it
  },
  encodeKey: encodeNumberKey,
  parseQuery: parseNumberQuery,
};
