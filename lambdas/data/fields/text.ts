import { expected, type FieldType } from './field-type.js';

/**
 * A string as a key: itself, with \u0001 written \u0001\u0002. Index keys are `value SEP id` with
 * SEP = \u0001\u0001 (schema.ts), so no encoded value contains SEP and a value's entries sort together.
 */
export const encodeStringKey = (value: unknown) => String(value).replaceAll('\u0001', '\u0001\u0002');

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
