/** The field-type registry: every type a collection schema may name, one module each. */
import type { FieldType } from './field-type.js';
import { text } from './text.js';
import { integer } from './integer.js';
import { number } from './number.js';
import { bool } from './bool.js';
import { datetime } from './datetime.js';
import { json } from './json.js';
import { relation } from './relation.js';
import { blob } from './blob.js';

export type { FieldRef, FieldType } from './field-type.js';
export { RECORD_ID_PATTERN } from './relation.js';

/** The type names, in the order the spec lists them. */
export const FIELD_TYPES = ['text', 'integer', 'number', 'bool', 'datetime', 'json', 'relation', 'blob'] as const;
export type FieldTypeName = (typeof FIELD_TYPES)[number];

const REGISTRY: { readonly [N in FieldTypeName]: FieldType<N> } = { text, integer, number, bool, datetime, json, relation, blob };

export const isFieldTypeName = (name: unknown): name is FieldTypeName => typeof name === 'string' && (FIELD_TYPES as readonly string[]).includes(name);

/** The module of a type name (a stored field's `type` was checked when its collection was saved). */
export function fieldType<N extends FieldTypeName>(name: N): FieldType<N> {
  if (!isFieldTypeName(name)) throw new Error(`unknown field type "${String(name)}"`);
  return REGISTRY[name] as FieldType<N>;
}
