/**
 * One field type of a collection schema (spec 4.14), in the manner of PocketBase's `core/field_*.go`:
 * each type is one module under `lambdas/data/fields/` that says what its values are and how they
 * behave in keys and queries. `schema.ts` keeps the schema-level rules (names, flags, key sizes) and
 * asks the type for the rest; `index.ts` is the registry.
 */
import { PlatformError } from '../../shared/errors.js';

/** What a type needs of its field: the name (errors name it) and, for a relation, its target. */
export interface FieldRef {
  name: string;
  target?: string;
}

interface FieldTypeBase<N extends string> {
  /** The `type` a schema names it by. */
  readonly name: N;
  /** May a field of this type be `fulltext`? */
  readonly fulltext: boolean;
  /**
   * What a value points at, checked to exist whenever a write sets it: a record of the field's
   * `target` collection (such a field needs a `target`), or a blob stored in the database.
   */
  readonly references?: 'record' | 'blob';
  /**
   * Checks a value (never `null`, which unsets and is the caller's) and returns it in stored form.
   * Throws `invalid_value` with `param` = the field's name.
   */
  normalize(field: FieldRef, value: unknown): unknown;
  /**
   * Reads a query-string value (`?filter[f]=v`) into the JSON value it stands for, which `normalize`
   * then checks. Without it the string is taken as it is.
   */
  parseQuery?(raw: string): unknown;
}

/**
 * A type whose values can become storage keys (`unique`, `indexed`, so also `filter` and `sort`)
 * encodes them so that the UTF-8 byte order of the encoding is the order of the values, as both
 * SQLite's BINARY collation and DynamoDB compare sort keys. `encodeKey` takes normalized values.
 */
export type FieldType<N extends string = string> = FieldTypeBase<N> &
  ({ readonly indexable: true; encodeKey(value: unknown): string } | { readonly indexable: false; encodeKey?: undefined });

export const invalidValue = (field: string, message: string) => new PlatformError('invalid_value', `${field}: ${message}`, field);

/** The `invalid_value` error for a value that is not `what` (e.g. "a string"). */
export const expected = (field: FieldRef, what: string) => invalidValue(field.name, `expected ${what}`);
