import type { FieldType } from './field-type.js';

/** Any JSON value. Never a key: it has no order, and its size is unbounded. */
export const json: FieldType<'json'> = {
  name: 'json',
  indexable: false,
  fulltext: false,
  normalize: (_field, value) => value,
};
