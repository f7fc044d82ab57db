import { describe, expect, it } from 'vitest';
import { FIELD_TYPES, fieldType, isFieldTypeName, type FieldType, type FieldTypeName } from '../../lambdas/data/fields/index.js';
import { checkFields, encodeKeyValue, normalizeValue, parseQueryValue, SEP } from '../../lambdas/data/schema.js';
import { PlatformError } from '../../lambdas/shared/errors.js';

const field = (type: FieldTypeName, extra: Record<string, unknown> = {}) => ({ name: 'f', type, ...extra });
const normalize = (type: FieldTypeName, value: unknown) => fieldType(type).normalize(field(type, type === 'relation' ? { target: 'people' } : {}), value);

/** The error a call throws (the test fails when it throws none). */
function thrown(fn: () => unknown): PlatformError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(PlatformError);
    return error as PlatformError;
  }
  throw new Error('expected an error');
}

function key(type: FieldTypeName, value: unknown): string {
  const t: FieldType = fieldType(type);
  if (!t.indexable) throw new Error(`${type} has no keys`);
  return t.encodeKey(value);
}

const byUtf8 = (a: string, b: string) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));

describe('the registry', () => {
  it('lists the spec types in order, each module under its own name', () => {
    expect(FIELD_TYPES).toEqual(['text', 'integer', 'number', 'bool', 'datetime', 'json', 'relation', 'blob']);
    for (const name of FIELD_TYPES) expect(fieldType(name).name).toBe(name);
    expect(isFieldTypeName('text')).toBe(true);
    expect(isFieldTypeName('string')).toBe(false);
    expect(isFieldTypeName(5)).toBe(false);
    expect(() => fieldType('toString' as FieldTypeName)).toThrow(/unknown field type/);
  });

  it('says which types may be keys, fulltext, and what they reference', () => {
    const flags = Object.fromEntries(FIELD_TYPES.map((n) => [n, [fieldType(n).indexable, fieldType(n).fulltext, fieldType(n).references ?? null]]));
    expect(flags).toEqual({
      text: [true, true, null],
      integer: [true, false, null],
      number: [true, false, null],
      bool: [true, false, null],
      datetime: [true, false, null],
      json: [false, false, null],
      relation: [true, false, 'record'],
      blob: [false, false, 'blob'],
    });
    for (const n of FIELD_TYPES) expect(typeof fieldType(n).encodeKey === 'function').toBe(fieldType(n).indexable);
  });

  it('drives checkFields: unique/indexed only on key types, fulltext only on text, a target for relations', () => {
    const schemaError = (f: Record<string, unknown>) => thrown(() => checkFields([{ name: 'f', ...f }]));
    for (const type of ['json', 'blob']) {
      for (const flag of ['unique', 'indexed']) {
        const e = schemaError({ type, [flag]: true });
        expect([e.code, e.message]).toEqual(['invalid_schema', `fields.0: unique and indexed are not allowed on ${type} fields`]);
      }
    }
    for (const type of FIELD_TYPES.filter((t) => t !== 'text')) {
      expect(schemaError({ type, fulltext: true, ...(type === 'relation' ? { target: 'x' } : {}) }).message).toBe('fields.0: fulltext is only allowed on text fields');
    }
    expect(schemaError({ type: 'relation' }).message).toBe('fields.0: a relation needs a target collection');
    expect(schemaError({ type: 'text', target: 'x' }).message).toBe('fields.0: target is only for relation fields');
    expect(schemaError({ type: 'string' }).message).toBe(`fields.0.type must be one of ${FIELD_TYPES.join(', ')}`);
    expect(checkFields([{ name: 'r', type: 'relation', target: 'x', indexed: true, unique: true }, { name: 't', type: 'text', fulltext: true }])).toEqual([
      { name: 'r', type: 'relation', target: 'x', indexed: true, unique: true },
      { name: 't', type: 'text', fulltext: true },
    ]);
  });
});

describe('normalize', () => {
  const good: Array<[FieldTypeName, unknown, unknown]> = [
    ['text', '', ''],
    ['text', 'héllo \u0001', 'héllo \u0001'],
    ['integer', 2 ** 53 - 1, 2 ** 53 - 1],
    ['integer', -(2 ** 53 - 1), -(2 ** 53 - 1)],
    ['integer', 42, 42],
    ['number', -1.25e300, -1.25e300],
    ['number', 0.1, 0.1],
    ['number', Number.MIN_VALUE, Number.MIN_VALUE],
    ['bool', true, true],
    ['bool', false, false],
    ['datetime', '2026-01-31T12:00:00Z', '2026-01-31T12:00:00.000Z'],
    ['datetime', '2026-01-31T12:00:00.5Z', '2026-01-31T12:00:00.500Z'],
    ['datetime', '2028-02-29T23:59:59.999Z', '2028-02-29T23:59:59.999Z'],
    ['json', { a: [1, null] }, { a: [1, null] }],
    ['json', 'x', 'x'],
    ['relation', 'rec_01-AZ_z', 'rec_01-AZ_z'],
    ['blob', 'a'.repeat(64), 'a'.repeat(64)],
  ];
  it.each(good)('%s accepts %j', (type, value, out) => {
    expect(normalize(type, value)).toEqual(out);
  });

  const bad: Array<[FieldTypeName, unknown, string]> = [
    ['text', 5, 'f: expected a string'],
    ['text', ['a'], 'f: expected a string'],
    ['integer', 1.5, 'f: expected an integer within ±(2^53 - 1)'],
    ['integer', 2 ** 53, 'f: expected an integer within ±(2^53 - 1)'],
    ['integer', -(2 ** 53), 'f: expected an integer within ±(2^53 - 1)'],
    ['integer', '1', 'f: expected an integer within ±(2^53 - 1)'],
    ['integer', NaN, 'f: expected an integer within ±(2^53 - 1)'],
    ['number', NaN, 'f: expected a finite number'],
    ['number', Infinity, 'f: expected a finite number'],
    ['number', -Infinity, 'f: expected a finite number'],
    ['number', '1.5', 'f: expected a finite number'],
    ['number', false, 'f: expected a finite number'],
    ['bool', 'true', 'f: expected true or false'],
    ['bool', 0, 'f: expected true or false'],
    ['datetime', '2026-01-31T12:00:00+01:00', 'f: expected an ISO 8601 UTC datetime like 2026-01-31T12:00:00.000Z'],
    ['datetime', '2026-01-31T12:00:00.1234Z', 'f: expected an ISO 8601 UTC datetime like 2026-01-31T12:00:00.000Z'],
    ['datetime', 1769860800000, 'f: expected an ISO 8601 UTC datetime like 2026-01-31T12:00:00.000Z'],
    ['datetime', '2026-02-30T00:00:00Z', 'f: expected a valid datetime'],
    ['datetime', '2026-01-31T24:00:00Z', 'f: expected a valid datetime'],
    ['relation', 'bad id!', 'f: expected the id of a record in people'],
    ['relation', 'x'.repeat(65), 'f: expected the id of a record in people'],
    ['relation', 7, 'f: expected the id of a record in people'],
    ['blob', 'A'.repeat(64), 'f: expected the SHA-256 (64 lowercase hex) of a stored blob'],
    ['blob', 'abc', 'f: expected the SHA-256 (64 lowercase hex) of a stored blob'],
  ];
  it.each(bad)('%s refuses %j with invalid_value', (type, value, message) => {
    const e = thrown(() => normalize(type, value));
    expect([e.code, e.message, e.param]).toEqual(['invalid_value', message, 'f']);
  });

  it('turns -0 into 0 for integer and number (JSON stores 0), through normalizeValue too', () => {
    for (const type of ['integer', 'number'] as const) {
      expect(Object.is(normalize(type, -0), 0)).toBe(true);
      expect(Object.is(normalizeValue(field(type), -0), 0)).toBe(true);
      expect(Object.is(normalize(type, 0), 0)).toBe(true);
    }
    expect(Object.is(normalize('number', -0.5), -0.5)).toBe(true);
  });
});

describe('key encoding', () => {
  it('orders numbers numerically by bytes, negatives, -0/0, fractions and big values included', () => {
    const sorted = [-Number.MAX_VALUE, -1e300, -(2 ** 53 - 1), -1024, -1.5, -1, -0.5, -Number.MIN_VALUE, 0, Number.MIN_VALUE, 1e-10, 0.5, 1, 1.5, 2, 10, 1024, 2 ** 53 - 1, 2 ** 53, 1e300, Number.MAX_VALUE];
    for (const type of ['number', 'integer'] as const) {
      const keys = sorted.map((v) => key(type, v));
      expect([...keys].sort(byUtf8)).toEqual(keys);
      expect(new Set(keys).size).toBe(keys.length);
      for (const k of keys) expect(k).toMatch(/^[0-9a-f]{16}$/);
    }
    // -0 and 0 are one value, one key (a unique guard cannot tell them apart).
    expect(key('number', -0)).toBe(key('number', 0));
    expect(key('integer', -0)).toBe(key('integer', 0));
    expect(key('number', 0)).toBe('8000000000000000');
  });

  it('orders strings by UTF-8 bytes, and keeps \\u0000 and \\u0001 away from the separator', () => {
    const sorted = ['', '\u0000', '\u0000\u0000', '\u0001', '\u0001x', 'A', 'Z', 'a', 'a\u0000', 'a\u0000b', 'a\u0001', 'ab', 'b', 'é', '\uE000', '😀', '\uFFFF'].sort(byUtf8);
    for (const type of ['text', 'relation', 'datetime'] as const) {
      const keys = sorted.map((v) => key(type, v));
      expect([...keys].sort(byUtf8)).toEqual(keys);
    }
    // JavaScript's < would put U+E000 after the emoji; bytes put it before.
    expect(byUtf8(key('text', '\uE000'), key('text', '😀'))).toBeLessThan(0);
    expect(key('text', 'a\u0001b')).toBe('a\u0001\u0003b');
    expect(key('text', 'a\u0000b')).toBe('a\u0001\u0002b');
    for (const v of sorted) expect(key('text', v)).not.toContain(SEP);
    // A value's entries (`value SEP id`) sort before every longer value's, also one that adds a NUL.
    for (const longer of ['a\u0001', 'a\u0000', 'a\u0000\u0000']) expect(byUtf8(key('text', 'a') + SEP + 'zzz', key('text', longer) + SEP)).toBeLessThan(0);
    // Each value's entries sort together: "a\u0000"'s lie between "a"'s and "a\u0001"'s.
    const entries = sorted.map((v) => key('text', v) + SEP + 'id');
    expect([...entries].sort(byUtf8)).toEqual(entries);
  });

  it('orders datetimes in time order and bools false before true', () => {
    const times = ['0001-01-01T00:00:00Z', '1969-12-31T23:59:59.999Z', '2026-01-31T12:00:00Z', '2026-01-31T12:00:00.5Z', '9999-12-31T23:59:59.999Z'].map((d) => normalize('datetime', d));
    const keys = times.map((t) => key('datetime', t));
    expect([...keys].sort(byUtf8)).toEqual(keys);
    expect([key('bool', false), key('bool', true)]).toEqual(['0', '1']);
  });

  it('has no keys for json and blob', () => {
    expect(fieldType('json').indexable).toBe(false);
    expect(fieldType('blob').encodeKey).toBeUndefined();
    expect(() => encodeKeyValue('json', {})).toThrow(/never keys/);
    expect(encodeKeyValue('integer', 5)).toBe(key('integer', 5));
  });
});

describe('query parsing', () => {
  const parse = (type: FieldTypeName, raw: string) => parseQueryValue(field(type, type === 'relation' ? { target: 'people' } : {}), raw);

  it('reads numbers, bools and datetimes as their type', () => {
    expect(parse('integer', '42')).toBe(42);
    expect(parse('integer', '-7')).toBe(-7);
    expect(Object.is(parse('integer', '-0'), 0)).toBe(true);
    expect(parse('number', '1.5e3')).toBe(1500);
    expect(parse('number', '-0.25')).toBe(-0.25);
    expect(Object.is(parse('number', '-0'), 0)).toBe(true);
    expect(parse('bool', 'true')).toBe(true);
    expect(parse('bool', 'false')).toBe(false);
    expect(parse('datetime', '2026-01-31T12:00:00Z')).toBe('2026-01-31T12:00:00.000Z');
    expect(parse('text', ' 42 ')).toBe(' 42 ');
    expect(parse('text', '')).toBe('');
    expect(parse('relation', 'rec_1')).toBe('rec_1');
  });

  it.each<[FieldTypeName, string]>([
    ['integer', ''],
    ['integer', '  '],
    ['integer', '1.5'],
    ['integer', '9007199254740992'],
    ['integer', 'abc'],
    ['number', ''],
    ['number', 'NaN'],
    ['number', 'Infinity'],
    ['number', '1e400'],
    ['bool', 'TRUE'],
    ['bool', '1'],
    ['datetime', '2026-01-31'],
    ['relation', 'bad id!'],
  ])('%s refuses %j', (type, raw) => {
    expect(thrown(() => parse(type, raw)).code).toBe('invalid_value');
  });
});
