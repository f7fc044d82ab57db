/**
 * JSON Schema (2020-12, the part zod's toJSONSchema writes) to fast-check: values a schema accepts, and
 * the ways to break one of them in a single field (wrong type, out of range, too long, off the pattern,
 * a required field left out, a field the schema does not know, deep nesting). A keyword it does not
 * know leaves the value free (any JSON).
 */
import fc from 'fast-check';
import { asParsed, clone, getAt, nested, own, RawNumber, withAt, type Path } from './json.js';

type Json = Record<string, any>;
export type Schema = Json | boolean;

/** Whether a value is valid against a schema of the document (ajv over the document's components). */
export type Validates = (schema: Schema, value: unknown) => boolean;

export interface SchemaContext {
  /** The document, for `$ref: #/components/schemas/X`. */
  document: Json;
  validates: Validates;
  /**
   * Values worth sending at a place (the document's examples, real ids of the test's fixtures): a
   * generated value is mostly nonsense to the handler, these reach its deeper code. Keyed by the
   * dotted path with `*` for array indexes.
   */
  hints?: (key: string) => unknown[];
}

/** Keys named like Object.prototype's: a handler that builds objects from input must not be fooled by them. */
export const PROTOTYPE_KEYS = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'];

const MAX_DEPTH = 5;
/** The most a generated string or array grows past its minimum, unless a bound says otherwise. */
const SPAN = 12;

export function deref(ctx: SchemaContext, schema: Schema): Schema {
  let s = schema;
  for (let i = 0; i < 20 && typeof s === 'object' && typeof s.$ref === 'string'; i++) {
    const m = /^#\/components\/schemas\/(.+)$/.exec(s.$ref);
    if (!m) return true;
    const { $ref: _, ...rest } = s;
    const target = ctx.document.components?.schemas?.[decodeURIComponent(m[1])] ?? true;
    s = Object.keys(rest).filter((k) => k !== 'description').length ? { ...target, ...rest } : target;
  }
  return s;
}

export const hintKey = (path: Path) => path.map((k) => (typeof k === 'number' ? '*' : k)).join('.');

/** Any JSON value, now and then an object with prototype-named keys. */
export const anyJson = (): fc.Arbitrary<unknown> =>
  fc.oneof(
    { weight: 6, arbitrary: fc.jsonValue({ maxDepth: 2 }) },
    { weight: 1, arbitrary: fc.tuple(fc.constantFrom(...PROTOTYPE_KEYS), fc.jsonValue({ maxDepth: 1 })).map(([k, v]) => own({}, k, v)) },
  );

const types = (s: Json): string[] => (Array.isArray(s.type) ? s.type : typeof s.type === 'string' ? [s.type] : []);

/** A schema that only refuses (`not: {}`): the property must be absent. */
const forbids = (s: Schema) => typeof s === 'object' && s.not !== undefined && (s.not === true || (typeof s.not === 'object' && Object.keys(s.not).length === 0));

/** Values `schema` accepts (mostly: a pattern with lookarounds, or `allOf`, may miss; the caller checks). */
export function valueOf(ctx: SchemaContext, schema: Schema, path: Path = [], depth = 0): fc.Arbitrary<unknown> {
  const core = coreOf(ctx, deref(ctx, schema), path, depth);
  const hints = ctx.hints?.(hintKey(path)) ?? [];
  // A parameter's schema is mostly a bare string (a sort key, a filter value): its hints are what reach the handler.
  const weight = typeof path[0] === 'string' && path[0].startsWith('$') ? 3 : 2;
  return hints.length ? fc.oneof({ weight, arbitrary: fc.constantFrom(...hints).map((v) => clone(v)) }, { weight: 5 - weight, arbitrary: core }) : core;
}

function coreOf(ctx: SchemaContext, s: Schema, path: Path, depth: number): fc.Arbitrary<unknown> {
  if (s === true || (typeof s === 'object' && Object.keys(s).every((k) => ['description', 'title', 'examples', 'example', 'default', 'deprecated', 'readOnly', 'writeOnly', 'id'].includes(k)))) return anyJson();
  if (s === false) return fc.constant(undefined);
  if ('const' in s) return fc.constant(s.const);
  if (Array.isArray(s.enum)) return fc.constantFrom(...s.enum);
  const union = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
  if (union) return fc.oneof(...union.map((b) => valueOf(ctx, typeof b === 'object' ? { ...withoutUnion(s), ...b } : b, path, depth)));
  if (Array.isArray(s.allOf)) return valueOf(ctx, mergeAll(ctx, s), path, depth);
  const ts = types(s);
  if (ts.length > 1) return fc.oneof(...ts.map((t) => coreOf(ctx, { ...s, type: t }, path, depth)));
  const t = ts[0] ?? (s.properties || s.additionalProperties !== undefined ? 'object' : s.items ? 'array' : undefined);
  switch (t) {
    case 'string':
      return stringOf(s);
    case 'integer':
    case 'number':
      return numberOf(s, t === 'integer');
    case 'boolean':
      return fc.boolean();
    case 'null':
      return fc.constant(null);
    case 'object':
      return objectOf(ctx, s, path, depth);
    case 'array': {
      const min = s.minItems ?? 0;
      const max = Math.min(s.maxItems ?? Infinity, depth >= MAX_DEPTH ? min : min + (depth > 1 ? 2 : 4));
      return fc.array(valueOf(ctx, s.items ?? true, [...path, 0], depth + 1), { minLength: min, maxLength: Math.max(min, max) });
    }
    default:
      return anyJson();
  }
}

const withoutUnion = (s: Json) => {
  const { anyOf: _a, oneOf: _o, description: _d, ...rest } = s;
  return rest;
};

function mergeAll(ctx: SchemaContext, s: Json): Json {
  const { allOf, ...rest } = s;
  const out: Json = { ...rest };
  for (const part of (allOf as Schema[]).map((p) => deref(ctx, p))) {
    if (typeof part !== 'object') continue;
    for (const [k, v] of Object.entries(part)) {
      if (k === 'properties') out.properties = { ...out.properties, ...v };
      else if (k === 'required') out.required = [...(out.required ?? []), ...v];
      else out[k] ??= v;
    }
  }
  return out;
}

/** Built arbitraries of string schemas by their text: fast-check takes long to build a pattern's (its slices). */
const strings = new Map<string, fc.Arbitrary<string>>();

function stringOf(s: Json): fc.Arbitrary<string> {
  const key = JSON.stringify([s.pattern, s.format, s.minLength, s.maxLength]);
  let arb = strings.get(key);
  if (!arb) strings.set(key, (arb = buildStringOf(s)));
  return arb;
}

function buildStringOf(s: Json): fc.Arbitrary<string> {
  const min: number = s.minLength ?? 0;
  const max: number = s.maxLength ?? Infinity;
  const fits = (x: string) => [...x].length >= min && [...x].length <= max;
  if (s.format === 'date-time') return fc.date({ min: new Date('1970-01-01T00:00:00Z'), max: new Date('2999-12-31T00:00:00Z'), noInvalidDate: true }).map((d) => d.toISOString());
  if (typeof s.pattern === 'string') {
    let re: RegExp;
    try {
      re = new RegExp(s.pattern, 'u');
    } catch {
      re = new RegExp(s.pattern);
    }
    try {
      return fc.stringMatching(re, { size: 'small' }).filter(fits);
    } catch {
      return fc.string({ minLength: min, maxLength: Math.min(max, min + SPAN) }).filter((x) => re.test(x));
    }
  }
  const upTo = Math.min(max, min + SPAN);
  const edges: string[] = [];
  if (Number.isFinite(max) && max <= 100_000) edges.push('x'.repeat(max), '\u00e9'.repeat(max));
  if (min === 0) edges.push('');
  edges.push(' '.repeat(Math.max(min, 1)), '\u{1F600}'.repeat(Math.max(min, 1)), '\u0000'.repeat(Math.max(min, 1)), ...PROTOTYPE_KEYS);
  return fc.oneof(
    { weight: 6, arbitrary: fc.string({ minLength: min, maxLength: upTo }) },
    { weight: 3, arbitrary: fc.string({ minLength: min, maxLength: upTo, unit: exoticChar() }) },
    { weight: 1, arbitrary: fc.constantFrom(...edges.filter(fits)) },
  );
}

/**
 * One character beyond printable ASCII: any code point, a lone surrogate, a control character. Built
 * once, by hand: fast-check's `grapheme` and `binary` units map every code point when built (seconds).
 */
let exotic: fc.Arbitrary<string> | undefined;
const exoticChar = () =>
  (exotic ??= fc.oneof(
    fc.integer({ min: 0xa0, max: 0xd7ff }).map((n) => String.fromCodePoint(n)),
    fc.integer({ min: 0xe000, max: 0x10ffff }).map((n) => String.fromCodePoint(n)),
    fc.integer({ min: 0xd800, max: 0xdfff }).map((n) => String.fromCharCode(n)),
    fc.integer({ min: 0, max: 0x1f }).map((n) => String.fromCharCode(n)),
  ));

interface Range {
  min: number;
  max: number;
  minOpen: boolean;
  maxOpen: boolean;
}

function rangeOf(s: Json): Range {
  let min = -Infinity;
  let max = Infinity;
  let minOpen = false;
  let maxOpen = false;
  if (typeof s.minimum === 'number') min = s.minimum;
  if (typeof s.exclusiveMinimum === 'number' && s.exclusiveMinimum >= min) [min, minOpen] = [s.exclusiveMinimum, true];
  if (typeof s.maximum === 'number') max = s.maximum;
  if (typeof s.exclusiveMaximum === 'number' && s.exclusiveMaximum <= max) [max, maxOpen] = [s.exclusiveMaximum, true];
  return { min, max, minOpen, maxOpen };
}

const inRange = (r: Range, n: number) => (r.minOpen ? n > r.min : n >= r.min) && (r.maxOpen ? n < r.max : n <= r.max);

function numberOf(s: Json, integer: boolean): fc.Arbitrary<unknown> {
  const r = rangeOf(s);
  const edges: unknown[] = [0, -0, 1, -1, r.min, r.max, Number.MAX_SAFE_INTEGER, -Number.MAX_SAFE_INTEGER, 1e308, -1e308, 0.5, 1e-300].filter(
    (n) => Number.isFinite(n) && inRange(r, n as number) && (!integer || Number.isInteger(n)),
  );
  // Beyond a double's integers, and beyond a double (JSON.parse reads Infinity): only where no bound stops them.
  if (r.max === Infinity) edges.push(new RawNumber('9007199254740993'), new RawNumber('1e400'));
  if (r.min === -Infinity) edges.push(new RawNumber('-1e400'));
  const lo = Number.isFinite(r.min) ? r.min : -1e6;
  const hi = Number.isFinite(r.max) ? r.max : 1e6;
  const body = integer
    ? fc.integer({ min: Math.max(Math.ceil(lo + (r.minOpen ? 1e-9 : 0)), Number.MIN_SAFE_INTEGER), max: Math.min(Math.floor(hi - (r.maxOpen ? 1e-9 : 0)), Number.MAX_SAFE_INTEGER) })
    : fc.double({ min: lo, max: hi, noNaN: true, noDefaultInfinity: true, minExcluded: r.minOpen, maxExcluded: r.maxOpen });
  return edges.length ? fc.oneof({ weight: 4, arbitrary: body }, { weight: 1, arbitrary: fc.constantFrom(...edges) }) : body;
}

function objectOf(ctx: SchemaContext, s: Json, path: Path, depth: number): fc.Arbitrary<unknown> {
  const props = Object.entries((s.properties ?? {}) as Record<string, Schema>).filter(([, p]) => !forbids(p));
  const required = new Set<string>(s.required ?? []);
  const shallow = depth >= MAX_DEPTH;
  const fields = props.filter(([k]) => !shallow || required.has(k));
  const values = new Map(fields.map(([k, p]) => [k, valueOf(ctx, p, [...path, k], depth + 1)]));
  const optional = fields.map(([k]) => k).filter((k) => !required.has(k));
  // Mostly a few of the optional fields: a request carrying all of a wide schema's (a chat's thirty)
  // is refused for one of them more often than not, and the handler's later code is never reached.
  const chosen = optional.length > 3 ? fc.oneof({ weight: 3, arbitrary: fc.subarray(optional, { maxLength: 3 }) }, { weight: 1, arbitrary: fc.subarray(optional) }) : fc.subarray(optional);
  const known = chosen.chain((some) => {
    const names = fields.map(([k]) => k).filter((k) => required.has(k) || some.includes(k));
    return fc.tuple(...names.map((k) => values.get(k)!)).map((vs) => names.map((k, i) => [k, vs[i]] as const));
  });
  const open = s.additionalProperties !== false && !shallow;
  const extraValue = typeof s.additionalProperties === 'object' ? valueOf(ctx, s.additionalProperties, [...path, '*'], depth + 1) : anyJson();
  const names = s.propertyNames ? (valueOf(ctx, s.propertyNames, [...path, '$name'], depth + 1) as fc.Arbitrary<string>) : fc.oneof(fc.string({ maxLength: 10 }), fc.constantFrom(...PROTOTYPE_KEYS), fc.stringMatching(/^[a-z][a-z0-9_]{0,8}$/));
  const extra = open ? fc.array(fc.tuple(names, extraValue), { maxLength: props.length ? 1 : 4 }) : fc.constant([] as [string, unknown][]);
  const min = s.minProperties ?? 0;
  return fc.tuple(known, extra).map(([k, e]) => {
    const out = {};
    for (const pair of k) if (pair) own(out, pair[0], pair[1]);
    for (const [name, v] of e) if (typeof name === 'string' && !(name in (s.properties ?? {})) && v !== undefined) own(out, name, v);
    for (let i = Object.keys(out).length; i < min; i++) own(out, `f${i}`, 1);
    return out;
  });
}

// ---------------------------------------------------------------------------------------------
// Breaking a valid value in one place.

export type BreakKind = 'wrong_type' | 'out_of_range' | 'too_long' | 'too_short' | 'pattern' | 'not_in_enum' | 'missing_required' | 'unknown_field' | 'too_many' | 'too_few' | 'deep_nesting' | 'format';

export interface Break {
  kind: BreakKind;
  /** Where the fault is: the field (for an unknown field, the field itself). */
  path: Path;
  /** The whole value with the fault in it (`undefined` at `path` when the field is left out). */
  value: unknown;
  /**
   * Other places an answer may name instead: a field left out of (or added to) an object that is one
   * branch of a union makes it match no branch, and the other branches' fields are as right to name.
   */
  alsoNamed?: string[];
}

/** Every single-field way to break `value` (valid against `schema`), in a fixed order. */
export function breaksOf(ctx: SchemaContext, schema: Schema, value: unknown, path: Path = []): Break[] {
  const out: Break[] = [];
  walk(ctx, schema, value, path, out, 0);
  return out;
}

/** Replacements of a value that `s` refuses, by kind (the caller checks each against the whole schema). */
function replacements(ctx: SchemaContext, s: Json, v: unknown): { kind: BreakKind; value: unknown }[] {
  const out: { kind: BreakKind; value: unknown }[] = [];
  const ts = types(s);
  const t = ts[0] ?? (s.properties ? 'object' : s.items ? 'array' : undefined);
  // A value of another JSON type than the schema takes.
  for (const w of [12345, 'text', true, null, {}, [], 1.5]) out.push({ kind: 'wrong_type', value: w });
  if (Array.isArray(s.enum) || 'const' in s) {
    const first = String(s.enum?.[0] ?? s.const);
    out.push({ kind: 'not_in_enum', value: `${first}_x` }, { kind: 'not_in_enum', value: first.toUpperCase() === first ? first.toLowerCase() + 'x' : first.toUpperCase() });
  }
  if (t === 'string') {
    if (typeof s.maxLength === 'number' && s.maxLength < 1_000_000) out.push({ kind: 'too_long', value: 'x'.repeat(s.maxLength + 1) }, { kind: 'too_long', value: '\u{1F600}'.repeat(s.maxLength + 1) });
    if (typeof s.minLength === 'number' && s.minLength > 0) out.push({ kind: 'too_short', value: 'x'.repeat(s.minLength - 1) });
    if (typeof s.pattern === 'string') {
      const base = typeof v === 'string' ? v : '';
      for (const c of ['', ' ', 'A', '!', '../x', '\u00e9', `${base}\n`, ` ${base}`, `${base}!`, base.toUpperCase(), '\u0000', 'x'.repeat(1000)]) out.push({ kind: 'pattern', value: c });
    }
    if (s.format === 'date-time') out.push({ kind: 'format', value: 'yesterday' }, { kind: 'format', value: '2026-13-01T00:00:00Z' });
  }
  if (t === 'integer' || t === 'number') {
    const r = rangeOf(s);
    if (Number.isFinite(r.min)) out.push({ kind: 'out_of_range', value: r.minOpen ? r.min : r.min - 1 }, { kind: 'out_of_range', value: -1e308 }, { kind: 'out_of_range', value: new RawNumber('-1e400') });
    if (Number.isFinite(r.max)) out.push({ kind: 'out_of_range', value: r.maxOpen ? r.max : r.max + 1 }, { kind: 'out_of_range', value: 1e308 }, { kind: 'out_of_range', value: new RawNumber('1e400') });
    if (t === 'integer') out.push({ kind: 'wrong_type', value: (Number.isFinite(r.min) ? r.min : 0) + 0.5 });
  }
  if (t === 'array' && Array.isArray(v)) {
    if (typeof s.maxItems === 'number' && s.maxItems < 10_000) {
      const filler = v.length ? v : [null];
      out.push({ kind: 'too_many', value: Array.from({ length: s.maxItems + 1 }, (_, i) => clone(filler[i % filler.length])) });
    }
    if (typeof s.minItems === 'number' && s.minItems > 0) out.push({ kind: 'too_few', value: v.slice(0, s.minItems - 1) });
  }
  out.push({ kind: 'deep_nesting', value: nested(100) });
  return out.filter((r) => !ctx.validates(s, asParsed(r.value)));
}

function walk(ctx: SchemaContext, schema: Schema, v: unknown, path: Path, out: Break[], depth: number): void {
  let s = deref(ctx, schema);
  if (typeof s !== 'object' || depth > 8) return;
  const union = (s.anyOf ?? s.oneOf) as Schema[] | undefined;
  if (union) {
    // The branch the value took: its fields are the ones to break.
    const branch = union.find((b) => ctx.validates(typeof b === 'object' ? { ...withoutUnion(s as Json), ...b } : b, asParsed(v)));
    for (const r of replacements(ctx, s, v)) out.push({ kind: r.kind, path, value: r.value });
    const names = union.flatMap((b) => {
      const d = deref(ctx, b);
      return typeof d === 'object' ? [...Object.keys(d.properties ?? {}), ...((d.required ?? []) as string[])] : [];
    });
    if (branch !== undefined) walkInside(ctx, deref(ctx, typeof branch === 'object' ? { ...withoutUnion(s), ...branch } : branch), v, path, out, depth, [...new Set(names)].map((n) => [...path, n].join('.')));
    return;
  }
  if (Array.isArray(s.allOf)) s = mergeAll(ctx, s);
  for (const r of replacements(ctx, s as Json, v)) out.push({ kind: r.kind, path, value: r.value });
  walkInside(ctx, s, v, path, out, depth);
}

function walkInside(ctx: SchemaContext, s: Schema, v: unknown, path: Path, out: Break[], depth: number, alsoNamed?: string[]): void {
  if (typeof s !== 'object') return;
  if (v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof RawNumber)) {
    const record = v as Record<string, unknown>;
    const props = (s.properties ?? {}) as Record<string, Schema>;
    const also = alsoNamed ? { alsoNamed } : {};
    for (const k of (s.required ?? []) as string[]) if (Object.hasOwn(record, k)) out.push({ kind: 'missing_required', path: [...path, k], value: undefined, ...also });
    if (s.additionalProperties === false) {
      for (const k of ['fuzz_unknown', ...PROTOTYPE_KEYS]) if (!Object.hasOwn(props, k) && !Object.hasOwn(record, k)) out.push({ kind: 'unknown_field', path: [...path, k], value: 'x', ...also });
    }
    if (s.propertyNames && typeof s.propertyNames === 'object') {
      for (const k of ['fuzz_unknown', '__proto__', 'constructor']) if (!Object.hasOwn(record, k) && !ctx.validates(s.propertyNames, k)) out.push({ kind: 'unknown_field', path: [...path, k], value: null });
    }
    for (const k of Object.keys(record)) {
      const p = Object.hasOwn(props, k) ? props[k] : typeof s.additionalProperties === 'object' ? s.additionalProperties : undefined;
      if (p !== undefined) walk(ctx, p, record[k], [...path, k], out, depth + 1);
    }
  } else if (Array.isArray(v) && s.items !== undefined && v.length > 0) {
    walk(ctx, s.items, v[0], [...path, 0], out, depth + 1);
    if (v.length > 1) walk(ctx, s.items, v[v.length - 1], [...path, v.length - 1], out, depth + 1);
  }
}

/**
 * `value` broken at one of its places (the `pick`th of those that make the whole invalid), or
 * undefined when none does (a schema that takes anything).
 */
export function breakAt(ctx: SchemaContext, schema: Schema, value: unknown, pick: number): Break | undefined {
  const all = breaksOf(ctx, schema, value);
  for (let i = 0; i < all.length; i++) {
    const b = all[(pick + i) % all.length];
    const whole = withAt(value, b.path, b.value);
    if (!ctx.validates(schema, asParsed(whole))) return { ...b, value: whole };
  }
  return undefined;
}

export { getAt };
