/**
 * Collection schemas (spec 4.14): field definitions, their validation, and checking and normalizing
 * record values against them.
 */
import { PlatformError } from '../shared/errors.js';

export const FIELD_TYPES = ['text', 'integer', 'number', 'bool', 'datetime', 'json', 'relation', 'blob'] as const;
export type FieldType = (typeof FIELD_TYPES)[number];
export const RESERVED_FIELDS = ['id', 'version', 'created_at', 'updated_at'];
export const MAX_FIELDS = 64;
export const COLLECTION_NAME_PATTERN = /^[a-z][a-z0-9_]{0,62}$/;
const FIELD_NAME_PATTERN = /^[A-Za-z][A-Za-z0-9_]{0,62}$/;
export const RECORD_ID_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;
const SHA256_PATTERN = /^[0-9a-f]{64}$/;
const DATETIME_PATTERN = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

export interface FieldDef {
  name: string;
  type: FieldType;
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
    if (typeof f.type !== 'string' || !FIELD_TYPES.includes(f.type as FieldType)) {
      throw invalidSchema(`${at}.type must be one of ${FIELD_TYPES.join(', ')}`, at);
    }
    const def: FieldDef = { name: f.name, type: f.type as FieldType };
    for (const flag of FLAGS) {
      if (f[flag] === undefined) continue;
      if (typeof f[flag] !== 'boolean') throw invalidSchema(`${at}.${flag} must be a boolean`, at);
      if (f[flag]) def[flag] = true;
    }
    if ((def.unique || def.indexed) && (def.type === 'json' || def.type === 'blob')) {
      throw invalidSchema(`${at}: unique and indexed are not allowed on ${def.type} fields`, at);
    }
    if (def.fulltext && def.type !== 'text') throw invalidSchema(`${at}: fulltext is only allowed on text fields`, at);
    if (def.type === 'relation') {
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

// ---------- values ----------

export const invalidValue = (field: string, message: string) => new PlatformError('invalid_value', `${field}: ${message}`, field);

/**
 * Checks one value against its field and returns it normalized (datetimes as ISO 8601 with
 * milliseconds). `null` means "unset" and is handled by the caller.
 */
export function normalizeValue(field: FieldDef, value: unknown): unknown {
  const bad = (what: string) => invalidValue(field.name, `expected ${what}`);
  switch (field.type) {
    case 'text':
      if (typeof value !== 'string') throw bad('a string');
      return value;
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw bad('an integer within ±(2^53 - 1)');
      return value;
    case 'number':
      if (typeof value !== 'number' || !Number.isFinite(value)) throw bad('a finite number');
      return value;
    case 'bool':
      if (typeof value !== 'boolean') throw bad('true or false');
      return value;
    case 'datetime': {
      if (typeof value !== 'string' || !DATETIME_PATTERN.test(value)) throw bad('an ISO 8601 UTC datetime like 2026-01-31T12:00:00.000Z');
      const ms = Date.parse(value);
      if (Number.isNaN(ms) || new Date(ms).toISOString().slice(0, 19) !== value.slice(0, 19)) throw bad('a valid datetime');
      return new Date(ms).toISOString();
    }
    case 'json':
      return value;
    case 'relation':
      if (typeof value !== 'string' || !RECORD_ID_PATTERN.test(value)) throw bad(`the id of a record in ${field.target}`);
      return value;
    case 'blob':
      if (typeof value !== 'string' || !SHA256_PATTERN.test(value)) throw bad('the SHA-256 (64 lowercase hex) of a stored blob');
      return value;
  }
}

// ---------- sortable encoding for index and guard keys ----------

/** Separates an encoded value from the record id in index keys; \u0001 inside text is escaped. */
export const SEP = '\u0001\u0001';
const AFTER_SEP = '\u0001\u0002';
/** DynamoDB sort keys are at most 1024 bytes: an indexed or unique value must leave room for the id. */
export const MAX_KEY_VALUE_BYTES = 900;

/**
 * Encodes a value so that byte order of the encoding is the order of the values (strings by UTF-8
 * bytes, numbers numerically), as both SQLite's BINARY collation and DynamoDB compare sort keys.
 */
export function encodeKeyValue(type: FieldType, value: unknown): string {
  if (type === 'integer' || type === 'number') {
    const buf = Buffer.alloc(8);
    buf.writeDoubleBE(value as number);
    if (buf[0] & 0x80) for (let i = 0; i < 8; i++) buf[i] = ~buf[i] & 0xff;
    else buf[0] |= 0x80;
    return buf.toString('hex');
  }
  if (type === 'bool') return value ? '1' : '0';
  return String(value).replaceAll('\u0001', AFTER_SEP);
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
