import { expected, type FieldType } from './field-type.js';

export const bool: FieldType<'bool'> = {
  name: 'bool',
  indexable: true,
  fulltext: false,
  normalize(field, value) {
    if (typeof value !== 'boolean') throw expected(field, 'true or false');
    return value;
  },
  encodeKey: (value) => (value ? '1' : '0'),
  parseQuery: (raw) => (raw === 'true' ? true : raw === 'false' ? false : raw),
};
