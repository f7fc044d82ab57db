import { expected, type FieldType } from './field-type.js';

const SHA256_PATTERN = /^[0-9a-f]{64}$/;

/** The SHA-256 of a blob stored in the database (docs/data/blobs.md); writes check that it exists. */
export const blob: FieldType<'blob'> = {
  name: 'blob',
  indexable: false,
  fulltext: false,
  references: 'blob',
  normalize(field, value) {
    if (typeof value !== 'string' || !SHA256_PATTERN.test(value)) throw expected(field, 'the SHA-256 (64 lowercase hex) of a stored blob');
    return value;
  },
};
