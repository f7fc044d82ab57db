import { expected, type FieldType } from './field-type.js';
import { encodeStringKey } from './text.js';

/** A record id: 1 to 64 letters, digits, `_` or `-`. */
export const RECORD_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** The id of a record of the field's `target` collection; writes check that it exists. */
export const relation: FieldType<'relation'> = {
  name: 'relation',
  indexable: true,
  fulltext: false,
  references: 'record',
  normalize(field, value) {
    if (typeof value !== 'string' || !RECORD_ID_PATTERN.test(value)) throw expected(field, `the id of a record in ${field.target}`);
    return value;
  },
  encodeKey: encodeStringKey,
};
