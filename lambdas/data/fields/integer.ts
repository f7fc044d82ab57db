import { expected, type FieldType } from './field-type.js';
import { encodeNumberKey, parseNumberQuery } from './number.js';

/** A safe integer, within ±(2^53 - 1): every one is exact as a JSON number and a double. */
export const integer: FieldType<'integer'> = {
  name: 'integer',
  indexable: true,
  fulltext: false,
  normalize(field, value) {
    if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw expected(field, 'an integer within ±(2^53 - 1)');
    return value + 0; // -0 becomes 0, as JSON stores it
  },
  encodeKey: encodeNumberKey,
  parseQuery: parseNumberQuery,
};
