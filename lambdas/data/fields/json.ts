import { invalidValue, type FieldType } from './field-type.js';

/**
 * Checks that a JSON value holds only finite numbers: a body's `1e400` parses to Infinity, which JSON
 * cannot store (it would be kept as `null`). Walks without recursion; bodies are at most 64 levels
 * deep anyway (MAX_JSON_DEPTH, lambdas/http/middleware/json-body.ts). Throws `invalid_value`.
 */
export function checkFiniteNumbers(fieldName: string, value: unknown): void {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const v = pending.pop();
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) throw invalidValue(fieldName, 'numbers must be finite');
    } else if (v !== null && typeof v === 'object') {
      for (const child of Array.isArray(v) ? v : Object.values(v)) pending.push(child);
    }
  }
}

/** Any JSON value with finite numbers. Never a key: it has no order, and its size is unbounded. */
export const json: FieldType<'json'> = {
  name: 'json',
  indexable: false,
  fulltext: false,
  normalize: (field, value) => {
    checkFiniteNumbers(field.name, value);
    return value;
  },
};
