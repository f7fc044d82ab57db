import { expected, type FieldType } from './field-type.js';
import { encodeStringKey } from './text.js';

const DATETIME_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

/**
 * ISO 8601 UTC, stored with milliseconds (`2026-01-31T12:00:00Z` becomes `…:00.000Z`), so that string
 * order is time order (years 0000 to 9999).
 */
export const datetime: FieldType<'datetime'> = {
  name: 'datetime',
  indexable: true,
  fulltext: false,
  normalize(field, value) {
    if (typeof value !== 'string' || !DATETIME_PATTERN.test(value)) throw expected(field, 'an ISO 8601 UTC datetime like 2026-01-31T12:00:00.000Z');
    const ms = Date.parse(value);
    // Date.parse rolls 2026-02-30 over to March: a date that does not come back as written is refused.
    if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 19) !== value.slice(0, 19)) throw expected(field, 'a valid datetime');
    return new Date(ms).toISOString();
  },
  encodeKey: encodeStringKey,
};
