/**
 * Collection schemas (spec 4.14): field definitions, their validation, and checking and normalizing
 * record values against them. What each type accepts, allows and how it sorts is its module's, in
 * `fields/` (the registry); this module holds the schema-level rules.
 */
import * as z from 'zod/mini';
import { PlatformError } from '../shared/errors.js';
import { onFirstUse } from '../shared/validate.js';
import { FIELD_TYPES, fieldType, isFieldTypeName, type FieldTypeName } from './fields/index.js';

export { FIELD_TYPES, RECORD_ID_PATTERN, type FieldTypeName } from './fields/index.js';
export { invalidValue } from './fields/field-type.js';
export const RESERVED_FIELDS = ['id', 'version', 'created_at', 'updated_at'];
export const MAX_FIELDS = 64;
export const COLLECTION_NAME_PATTERN = /^[a-z][a-z0-9_]{0,62}$/;
const FIELD_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,62}$/;

export interface FieldDef {
  name: string;
  type: FieldTypeName;
  required?: boolean;
  unique?: boolean;
  indexed?: boolean;
  fulltext?: boolean;
  target?: string;
}

/** A field as stored: `generation` is the schema_version that added it (never shown). */
export interface StoredField extends FieldDef {
  generation: number;
}

const FLAGS = ['required', 'unique', 'indexed', 'fulltext'] as const;
const FULLTEXT_TYPES = FIELD_TYPES.filter((name) => fieldType(name).fulltext).join(', ');
const invalidSchema = (message: string, param: string | null = 'fields') => new PlatformError('invalid_schema', message, param);

/** Checks a `fields` array from a collection PUT and returns it in canonical form (flags false dropped). */
export function checkFields(value: unknown): FieldDef[] {
  if (value === undefined) return [];
  if (!Array.isArray(value)) throw invalidSchema('fields must be an array');
  if (value.length > MAX_FIELDS) throw invalidSchema(`at most ${MAX_FIELDS} fields`);
  const seen = new Set<string>();
  return value.map((raw, i) => {
    const at = `fields.${i}`;
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) throw invalidSchema(`${at} must be an object`, at);
    const f = raw as Record<string, unknown>;
    for (const key of Object.keys(f)) {
      if (!['name', 'type', 'target', ...FLAGS].includes(key)) throw invalidSchema(`${at}: unknown property "${key}"`, at);
    }
    if (typeof f.name !== 'string' || !FIELD_NAME_PATTERN.test(f.name)) {
      throw invalidSchema(`${at}.name must be 1 to 63 letters, digits or "_", starting with a letter`, at);
    }
    if (RESERVED_FIELDS.includes(f.name)) throw invalidSchema(`${at}.name "${f.name}" is reserved`, at);
    if (seen.has(f.name)) throw invalidSchema(`field "${f.name}" is declared twice`, at);
    seen.add(f.name);
    if (!isFieldTypeName(f.type)) throw invalidSchema(`${at}.type must be one of ${FIELD_TYPES.join(', ')}`, at);
    const type = fieldType(f.type);
    const def: FieldDef = { name: f.name, type: f.type };
    for (const flag of FLAGS) {
      if (f[flag] === undefined) continue;
      if (typeof f[flag] !== 'boolean') throw invalidSchema(`${at}.${flag} must be a boolean`, at);
      if (f[flag]) def[flag] = true;
    }
    if ((def.unique || def.indexed) && !type.indexable) {
      throw invalidSchema(`${at}: unique and indexed are not allowed on ${def.type} fields`, at);
    }
    if (def.fulltext && !type.fulltext) throw invalidSchema(`${at}: fulltext is only allowed on ${FULLTEXT_TYPES} fields`, at);
    if (type.references === 'record') {
      if (typeof f.target !== 'string' || !COLLECTION_NAME_PATTERN.test(f.target)) throw invalidSchema(`${at}: a relation needs a target collection`, at);
      def.target = f.target;
    } else if (f.target !== undefined) {
      throw invalidSchema(`${at}: target is only for relation fields`, at);
    }
    return def;
  });
}

export const sameField = (a: FieldDef, b: FieldDef) =>
  a.type === b.type && (a.target ?? null) === (b.target ?? null) && FLAGS.every((flag) => !!a[flag] === !!b[flag]);

export const fieldView = ({ generation: _g, ...def }: StoredField): FieldDef => def;

/**
 * A field definition as collections answer it (fieldView) and as a PUT sends it: checkFields takes
 * exactly these properties and keeps a flag only when true, so an answer's flags are `true` or absent.
 */
export const fieldDefSchema = onFirstUse(() => {
  const flag = (description: string) => z.optional(z.boolean().check(z.describe(description)));
  return z
    .strictObject({
      name: z.string().check(z.regex(FIELD_NAME_PATTERN), z.describe('1 to 63 letters, digits or `_`, starting with a letter; not `id`, `version`, `created_at`, `updated_at`.')),
      type: z.enum(FIELD_TYPES),
      required: flag('Checked on every write.'),
      unique: flag('Not on `json` or `blob`.'),
      indexed: flag('For filters and sorts. Not on `json` or `blob`.'),
      fulltext: flag('Searchable with `q`. Only on `text`.'),
      target: z.optional(z.string().check(z.regex(COLLECTION_NAME_PATTERN), z.describe('For `relation`: the collection whose record ids it points at.'))),
    })
    .check(z.meta({ id: 'CollectionField' }));
});

// ---------- values ----------

/**
 * Checks one value against its field and returns it normalized (datetimes as ISO 8601 with
 * milliseconds, `-0` as `0`). `null` means "unset" and is handled by the caller.
 */
export const normalizeValue = (field: FieldDef, value: unknown): unknown => fieldType(field.type).normalize(field, value);

/** A query-string value (`?filter[f]=v`) read as the field's type and normalized; throws `invalid_value`. */
export function parseQueryValue(field: FieldDef, raw: string): unknown {
  const type = fieldType(field.type);
  return type.normalize(field, type.parseQuery ? type.parseQuery(raw) : raw);
}

// ---------- sortable encoding for index and guard keys ----------

/** Separates an encoded value from the record id in index keys; string keys escape \u0001 (`encodeStringKey`, fields/text.ts). */
export const SEP = '\u0001\u0001';
const AFTER_SEP = '\u0001\u0002';
/** DynamoDB sort keys are at most 1024 bytes: an indexed or unique value must leave room for the id. */
export const MAX_KEY_VALUE_BYTES = 900;

/**
 * Encodes a (normalized) value so that byte order of the encoding is the order of the values (strings
 * by UTF-8 bytes, numbers numerically), as both SQLite's BINARY collation and DynamoDB compare sort
 * keys. Only types that may be unique or indexed have keys.
 */
export function encodeKeyValue(type: FieldTypeName, value: unknown): string {
  const t = fieldType(type);
  if (!t.indexable) throw new Error(`${type} values are never keys`);
  return t.encodeKey(value);
}

export function checkKeyValueSize(field: FieldDef, encoded: string): void {
  if (Buffer.byteLength(encoded) > MAX_KEY_VALUE_BYTES) {
    throw new PlatformError('field_too_large', `${field.name}: unique and indexed values are at most ${MAX_KEY_VALUE_BYTES} bytes`, field.name);
  }
}

/** Sort-key bounds for a comparison on an encoded value, for an index whose keys are `value SEP id`. */
export const keyBounds = {
  eq: (enc: string) => ({ lo: enc + SEP, hi: enc + AFTER_SEP }),
  gt: (enc: string) => ({ lo: enc + AFTER_SEP }),
  gte: (enc: string) => ({ lo: enc + SEP }),
  lt: (enc: string) => ({ hi: enc + SEP }),
  lte: (enc: string) => ({ hi: enc + AFTER_SEP }),
};
