/**
 * OpenAI's small key-value maps, checked by hand rather than through a schema that rebuilds the object:
 * a vector store's `metadata` (strings) and a vector store file's `attributes` (strings, numbers,
 * booleans). Up to 16 keys of 1 to 64 characters, strings up to 512. A key is data only: the result
 * has no prototype, so `__proto__` or `constructor` are kept as keys, never merged into an object's
 * shape; and the maps are stored as JSON text (keys.ts), never as record attributes.
 */
import { PlatformError } from '../../shared/errors.js';
import type { Attributes } from './keys.js';

export const MAX_PAIRS = 16;
export const MAX_KEY_CHARS = 64;
export const MAX_STRING_CHARS = 512;

type Kinds = 'metadata' | 'attributes';

function parseMap(value: unknown, param: string, kinds: Kinds): Attributes {
  const bad = (why: string) => new PlatformError('invalid_body', `\`${param}\` ${why}`, param);
  if (value === null || typeof value !== 'object' || Array.isArray(value)) throw bad('must be an object.');
  const keys = Object.keys(value);
  if (keys.length > MAX_PAIRS) throw bad(`may hold at most ${MAX_PAIRS} keys.`);
  const out: Attributes = Object.create(null) as Attributes;
  for (const key of keys) {
    if (key.length < 1 || key.length > MAX_KEY_CHARS) throw bad(`keys must be 1 to ${MAX_KEY_CHARS} characters.`);
    const v: unknown = (value as Record<string, unknown>)[key];
    if (typeof v === 'string') {
      if (v.length > MAX_STRING_CHARS) throw bad(`string values must be at most ${MAX_STRING_CHARS} characters.`);
      out[key] = v;
    } else if (kinds === 'attributes' && typeof v === 'number') {
      // JSON cannot say NaN, but 1e999 parses as Infinity; -0 is stored as 0 (JSON text says 0).
      if (!Number.isFinite(v)) throw bad('numbers must be finite.');
      out[key] = v === 0 ? 0 : v;
    } else if (kinds === 'attributes' && typeof v === 'boolean') out[key] = v;
    else throw bad(kinds === 'attributes' ? 'values must be strings, numbers or booleans.' : 'values must be strings.');
  }
  return out;
}

/** A vector store file's `attributes` (null: none). */
export const parseAttributes = (value: unknown, param = 'attributes'): Attributes | null => (value === null ? null : parseMap(value, param, 'attributes'));

/** A vector store's `metadata` (null: none). */
export const parseMetadata = (value: unknown, param = 'metadata'): Record<string, string> | null => (value === null ? null : (parseMap(value, param, 'metadata') as Record<string, string>));

/** The JSON text kept for a map, and the map read back (own keys only, whatever their names). */
export const mapText = (map: Attributes | null): string => JSON.stringify(map ?? {});
export function mapOf(text: unknown): Attributes {
  if (typeof text !== 'string') return {};
  try {
    const parsed: unknown = JSON.parse(text);
    return parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Attributes) : {};
  } catch {
    return {};
  }
}
