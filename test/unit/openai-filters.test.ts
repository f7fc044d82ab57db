/**
 * OpenAI's attribute filters (lambdas/ai/openai-compat/filters.ts): evaluation against a plain reference
 * written from the documented rules (missing key never matches, mixed types never match, strings order
 * lexicographically, in/nin on strings and numbers), on random filters and attributes; the parser's
 * bounds (depth, comparisons, list sizes, key lengths) and its 400s naming the field; keys named like
 * Object.prototype's members are data.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  attributesOf,
  evaluateFilter,
  MAX_FILTER_COMPARISONS,
  MAX_FILTER_DEPTH,
  MAX_FILTER_KEY_CHARS,
  MAX_FILTER_VALUES,
  parseFilters,
  type AttributeFilter,
} from '../../lambdas/ai/openai-compat/filters.js';
import { parseVectorStoreSearch } from '../../lambdas/ai/openai-compat/search.js';
import { PlatformError } from '../../lambdas/shared/errors.js';

type Scalar = string | number | boolean;

/** The rules as plainly as they read: a Map, so no prototype can answer for a key. */
function reference(filter: AttributeFilter, attributes: Map<string, Scalar>): boolean {
  if (filter.type === 'and') return (filter.filters as AttributeFilter[]).every((f) => reference(f, attributes));
  if (filter.type === 'or') return (filter.filters as AttributeFilter[]).some((f) => reference(f, attributes));
  const { key, value } = filter as { key: string; value: Scalar | Array<string | number> };
  if (!attributes.has(key)) return false;
  const a = attributes.get(key)!;
  if (filter.type === 'in' || filter.type === 'nin') {
    if (typeof a === 'boolean') return false;
    const found = (value as Array<string | number>).some((x) => typeof x === typeof a && x === a);
    return filter.type === 'in' ? found : !found;
  }
  if (typeof a !== typeof value) return false;
  if (filter.type === 'eq') return a === value;
  if (filter.type === 'ne') return a !== value;
  if (typeof a === 'boolean') return false;
  const cmp = a < (value as string | number) ? -1 : a > (value as string | number) ? 1 : 0;
  return { gt: cmp > 0, gte: cmp >= 0, lt: cmp < 0, lte: cmp <= 0 }[filter.type as 'gt'];
}

const KEYS = ['lang', 'year', 'draft', '__proto__', 'constructor', 'toString', 'hasOwnProperty', 'a'];
const key = fc.constantFrom(...KEYS);
const str = fc.constantFrom('', 'a', 'b', 'en', 'fr', '2024-01-01', '2025-06-30', 'Z', 'é');
const num = fc.oneof(fc.integer({ min: -3, max: 3 }), fc.constantFrom(0.5, 2024, -0));
const scalar: fc.Arbitrary<Scalar> = fc.oneof(str, num, fc.boolean());
const comparison: fc.Arbitrary<AttributeFilter> = fc.oneof(
  fc.record({ type: fc.constantFrom('eq' as const, 'ne' as const), key, value: scalar }),
  fc.record({ type: fc.constantFrom('gt' as const, 'gte' as const, 'lt' as const, 'lte' as const), key, value: fc.oneof(str, num) }),
  fc.record({ type: fc.constantFrom('in' as const, 'nin' as const), key, value: fc.array(fc.oneof(str, num), { minLength: 1, maxLength: 4 }) }),
);
const filter: fc.Arbitrary<AttributeFilter> = fc.letrec<{ f: AttributeFilter }>((tie) => ({
  f: fc.oneof({ depthSize: 'small', withCrossShrink: true }, comparison, fc.record({ type: fc.constantFrom('and' as const, 'or' as const), filters: fc.array(tie('f'), { minLength: 1, maxLength: 3 }) })),
})).f;
const attributes = fc.array(fc.tuple(key, scalar), { maxLength: 6 }).map((pairs) => new Map(pairs));

/** The attributes as the vector store file record keeps them: JSON text. */
const asText = (m: Map<string, Scalar>) => {
  // Built with defineProperty so a key named __proto__ is an own key, as JSON.parse makes it.
  const o: Record<string, Scalar> = {};
  for (const [k, v] of m) Object.defineProperty(o, k, { value: v, enumerable: true, writable: true, configurable: true });
  return JSON.stringify(o);
};

const depthOf = (f: AttributeFilter): number => ('filters' in f ? 1 + Math.max(...f.filters.map(depthOf)) : 1);
const comparisonsOf = (f: AttributeFilter): number => ('filters' in f ? f.filters.reduce((n, g) => n + comparisonsOf(g), 0) : 1);

function faultOf(run: () => unknown): { code: string; param: string | null } | undefined {
  try {
    run();
    return undefined;
  } catch (error) {
    if (!(error instanceof PlatformError)) throw error;
    return { code: error.code, param: error.param };
  }
}

describe('evaluateFilter', () => {
  it('agrees with the reference on random filters and attributes (as stored: JSON text)', () => {
    fc.assert(
      fc.property(filter, attributes, (f, attrs) => {
        // Round-tripped through the parser and JSON: what the route evaluates.
        const parsed = parseFilters(JSON.parse(JSON.stringify(f)));
        expect(evaluateFilter(parsed, attributesOf(asText(attrs)))).toBe(reference(f, attrs));
      }),
      { numRuns: 2000 },
    );
  });

  it('never matches a missing key, not even with ne or nin', () => {
    for (const type of ['eq', 'ne', 'gt', 'gte', 'lt', 'lte'] as const) expect(evaluateFilter({ type, key: 'year', value: 1 }, { lang: 'en' })).toBe(false);
    expect(evaluateFilter({ type: 'nin', key: 'year', value: [1] }, {})).toBe(false);
  });

  it('never matches mixed types, and orders strings lexicographically (ISO dates by time)', () => {
    expect(evaluateFilter({ type: 'eq', key: 'year', value: '2024' }, { year: 2024 })).toBe(false);
    expect(evaluateFilter({ type: 'ne', key: 'year', value: '2024' }, { year: 2024 })).toBe(false);
    expect(evaluateFilter({ type: 'gt', key: 'year', value: '1' }, { year: 2 })).toBe(false);
    expect(evaluateFilter({ type: 'in', key: 'draft', value: ['true'] }, { draft: true })).toBe(false);
    expect(evaluateFilter({ type: 'gte', key: 'd', value: '2024-06-01' }, { d: '2024-12-31' })).toBe(true);
    expect(evaluateFilter({ type: 'lt', key: 'd', value: 'b' }, { d: 'abc' })).toBe(true);
    expect(evaluateFilter({ type: 'gte', key: 'n', value: 10 }, { n: 9 })).toBe(false);
  });

  it('reads only own keys: __proto__, constructor and toString are attributes like any other', () => {
    const attrs = attributesOf('{"__proto__":"x","constructor":3}');
    expect(evaluateFilter({ type: 'eq', key: '__proto__', value: 'x' }, attrs)).toBe(true);
    expect(evaluateFilter({ type: 'eq', key: 'constructor', value: 3 }, attrs)).toBe(true);
    expect(evaluateFilter({ type: 'ne', key: 'toString', value: 'x' }, attrs)).toBe(false);
    expect(evaluateFilter({ type: 'ne', key: 'hasOwnProperty', value: 'x' }, {})).toBe(false);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // A parsed filter keyed __proto__ is a plain comparison, not a prototype.
    const parsed = parseFilters(JSON.parse('{"type":"eq","key":"__proto__","value":"x"}'));
    expect(parsed).toEqual({ type: 'eq', key: '__proto__', value: 'x' });
    expect(Object.getPrototypeOf(parsed)).toBe(Object.prototype);
  });

  it('takes broken stored attributes as none', () => {
    expect(attributesOf('not json')).toEqual({});
    expect(attributesOf('[1,2]')).toEqual({});
    expect(attributesOf(undefined)).toEqual({});
    expect(evaluateFilter({ type: 'eq', key: 'a', value: 1 }, attributesOf('{"a":{"b":1}}'))).toBe(false);
  });
});

describe('parseFilters', () => {
  const nested = (depth: number): unknown => {
    let f: unknown = { type: 'eq', key: 'a', value: 1 };
    for (let i = 1; i < depth; i++) f = { type: 'and', filters: [f] };
    return f;
  };

  it(`takes ${MAX_FILTER_DEPTH} levels and refuses the next, however deep the body (no recursion past the bound)`, () => {
    expect(depthOf(parseFilters(nested(MAX_FILTER_DEPTH)))).toBe(MAX_FILTER_DEPTH);
    expect(faultOf(() => parseFilters(nested(MAX_FILTER_DEPTH + 1)))).toEqual({ code: 'invalid_body', param: `filters${'.filters.0'.repeat(MAX_FILTER_DEPTH)}` });
    // 10,000 levels: refused at the ninth (a parse that recursed all the way would overflow the stack).
    expect(faultOf(() => parseFilters(nested(10_000)))?.code).toBe('invalid_body');
  });

  it(`takes ${MAX_FILTER_COMPARISONS} comparisons and refuses the next, nested or not`, () => {
    const flat = (n: number) => ({ type: 'or', filters: Array.from({ length: n }, (_, i) => ({ type: 'eq', key: 'k', value: i })) });
    expect(comparisonsOf(parseFilters(flat(MAX_FILTER_COMPARISONS)))).toBe(MAX_FILTER_COMPARISONS);
    expect(faultOf(() => parseFilters(flat(MAX_FILTER_COMPARISONS + 1)))?.code).toBe('invalid_body');
    const split = { type: 'and', filters: [flat(40), flat(25)] };
    expect(faultOf(() => parseFilters(split))).toEqual({ code: 'invalid_body', param: 'filters.filters.1.filters.24' });
  });

  it('bounds in/nin lists and key lengths', () => {
    const list = (n: number) => ({ type: 'in', key: 'k', value: Array.from({ length: n }, (_, i) => i) });
    expect(parseFilters(list(MAX_FILTER_VALUES))).toMatchObject({ type: 'in' });
    expect(faultOf(() => parseFilters(list(MAX_FILTER_VALUES + 1)))).toEqual({ code: 'invalid_body', param: 'filters.value' });
    expect(faultOf(() => parseFilters(list(1_000_000)))).toEqual({ code: 'invalid_body', param: 'filters.value' });
    expect(faultOf(() => parseFilters(list(0)))).toEqual({ code: 'invalid_body', param: 'filters.value' });
    expect(parseFilters({ type: 'eq', key: 'k'.repeat(MAX_FILTER_KEY_CHARS), value: 1 })).toMatchObject({ type: 'eq' });
    expect(faultOf(() => parseFilters({ type: 'eq', key: 'k'.repeat(MAX_FILTER_KEY_CHARS + 1), value: 1 }))).toEqual({ code: 'invalid_body', param: 'filters.key' });
    expect(faultOf(() => parseFilters({ type: 'eq', key: '', value: 1 }))).toEqual({ code: 'invalid_body', param: 'filters.key' });
  });

  it('refuses wrong types naming the field, and unknown fields as unsupported', () => {
    const cases: Array<[unknown, string, string]> = [
      [null, 'invalid_body', 'filters'],
      [[], 'invalid_body', 'filters'],
      [{ type: 'like', key: 'k', value: 'a' }, 'invalid_body', 'filters.type'],
      [{ key: 'k', value: 'a' }, 'invalid_body', 'filters.type'],
      [{ type: 'eq', key: 1, value: 'a' }, 'invalid_body', 'filters.key'],
      [{ type: 'eq', key: 'k' }, 'invalid_body', 'filters.value'],
      [{ type: 'eq', key: 'k', value: [1] }, 'invalid_body', 'filters.value'],
      [{ type: 'eq', key: 'k', value: { $ne: 1 } }, 'invalid_body', 'filters.value'],
      [{ type: 'gt', key: 'k', value: true }, 'invalid_body', 'filters.value'],
      [{ type: 'gt', key: 'k', value: 1e400 }, 'invalid_body', 'filters.value'],
      [{ type: 'in', key: 'k', value: [true] }, 'invalid_body', 'filters.value'],
      [{ type: 'in', key: 'k', value: 'a' }, 'invalid_body', 'filters.value'],
      [{ type: 'and', filters: [] }, 'invalid_body', 'filters.filters'],
      [{ type: 'and', filters: {} }, 'invalid_body', 'filters.filters'],
      [{ type: 'or', filters: [{ type: 'eq', key: 'k', value: 1 }, 7] }, 'invalid_body', 'filters.filters.1'],
      [{ type: 'eq', key: 'k', value: 1, extra: 1 }, 'unsupported_field', 'filters.extra'],
      [{ type: 'and', filters: [{ type: 'eq', key: 'k', value: 1 }], key: 'k' }, 'unsupported_field', 'filters.key'],
      [JSON.parse('{"type":"eq","key":"k","value":1,"__proto__":{"x":1}}'), 'unsupported_field', 'filters.__proto__'],
    ];
    for (const [value, code, param] of cases) expect(faultOf(() => parseFilters(value)), JSON.stringify(value)).toEqual({ code, param });
  });
});

describe('parseVectorStoreSearch', () => {
  it('reads OpenAI’s body: a query or 1 to 5, max_num_results 1…50 (default 10), score_threshold 0…1', () => {
    expect(parseVectorStoreSearch({ query: 'volcanic' })).toEqual({ queries: ['volcanic'], filters: undefined, maxResults: 10 });
    expect(
      parseVectorStoreSearch({ query: ['a', 'b'], max_num_results: 50, ranking_options: { ranker: 'none', score_threshold: 0.5 }, rewrite_query: true, filters: { type: 'eq', key: 'k', value: 1 } }),
    ).toEqual({ queries: ['a', 'b'], filters: { type: 'eq', key: 'k', value: 1 }, maxResults: 50, scoreThreshold: 0.5 });
  });

  it('refuses what is out of bounds with 400 naming the field', () => {
    const cases: Array<[unknown, string, string | null]> = [
      ['x', 'invalid_body', null],
      [{}, 'invalid_body', 'query'],
      [{ query: '' }, 'invalid_body', 'query'],
      [{ query: '   ' }, 'invalid_body', 'query'],
      [{ query: 'x'.repeat(8001) }, 'invalid_body', 'query'],
      [{ query: [] }, 'invalid_body', 'query'],
      [{ query: ['a', 'b', 'c', 'd', 'e', 'f'] }, 'invalid_body', 'query'],
      [{ query: ['a', 3] }, 'invalid_body', 'query.1'],
      [{ query: 'a', max_num_results: 0 }, 'invalid_body', 'max_num_results'],
      [{ query: 'a', max_num_results: 51 }, 'invalid_body', 'max_num_results'],
      [{ query: 'a', max_num_results: 1e9 }, 'invalid_body', 'max_num_results'],
      [{ query: 'a', max_num_results: 2.5 }, 'invalid_body', 'max_num_results'],
      [{ query: 'a', ranking_options: { score_threshold: -1 } }, 'invalid_body', 'ranking_options.score_threshold'],
      [{ query: 'a', ranking_options: { score_threshold: 2 } }, 'invalid_body', 'ranking_options.score_threshold'],
      [{ query: 'a', ranking_options: { ranker: 'bm25' } }, 'invalid_body', 'ranking_options.ranker'],
      [{ query: 'a', ranking_options: { hybrid_search: {} } }, 'unsupported_field', 'ranking_options.hybrid_search'],
      [{ query: 'a', ranking_options: 'auto' }, 'invalid_body', 'ranking_options'],
      [{ query: 'a', rewrite_query: 'yes' }, 'invalid_body', 'rewrite_query'],
      [{ query: 'a', top_k: 3 }, 'unsupported_field', 'top_k'],
      [{ query: 'a', filters: { type: 'eq', key: 'k' } }, 'invalid_body', 'filters.value'],
    ];
    for (const [body, code, param] of cases) expect(faultOf(() => parseVectorStoreSearch(body)), JSON.stringify(body).slice(0, 80)).toEqual({ code, param });
  });
});
