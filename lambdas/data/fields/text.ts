import { expected, type FieldType } from './field-type.js';

/**
 * A string as a key: itself, with \u0000 written \u0001\u0002 and \u0001 written \u0001\u0003. Index keys
 * are `value SEP id` with SEP = \u0001\u0001 (schema.ts): no encoded value contains SEP, a value's
 * entries sort together, and a value sorts before every longer value it begins (the end, SEP, is below
 * every escaped or plain character that may follow). Found by the model test (test/model): with NUL
 * left as it is, "a\u0000" sorted before "a" and `filter[f][gt]=a` missed it.
 */
export const encodeStringKey = (value: unknown) => {
  const s = String(value);
  return s.includes('\u0000') || s.includes('\u0001') ? s.replace(/[\u0000\u0001]/g, (c) => (c === '\u0000' ? '\u0001\u0002' : '\u0001\u0003')) : s;
};

export const text: FieldType<'text'> = {
  name: 'text',
  indexable: true,
  fulltext: true,
  normalize(field, value) {
    if (typeof value !== 'string') throw expected(field, 'a string');
    return value;
  },
  encodeKey: encodeStringKey,
};
