/**
 * OpenAI's attribute filters (docs/ai/openai-compatibility.md, "Search"): comparisons (`eq`, `ne`,
 * `gt`, `gte`, `lt`, `lte`, `in`, `nin`) and compounds (`and`, `or`) on a vector store file's
 * attributes. Parsed with bounds before anything is read (depth, comparisons, list sizes, key
 * lengths), so a hostile filter costs little; evaluated on each file's attributes.
 */
import { isJsonObject } from '../../shared/validate.js';
import { PlatformError } from '../../shared/errors.js';

/** A comparison or compound filter on a vector store file's attributes (OpenAI's shapes). */
export type ComparisonFilter = { type: 'eq' | 'ne' | 'gt' | 'gte' | 'lt' | 'lte' | 'in' | 'nin'; key: string; value: string | number | boolean | Array<string | number> };
export type CompoundFilter = { type: 'and' | 'or'; filters: Array<ComparisonFilter | CompoundFilter> };
export type AttributeFilter = ComparisonFilter | CompoundFilter;

/** Levels of nesting, the outermost filter being 1 and a comparison a level too. */
export const MAX_FILTER_DEPTH = 8;
/** Comparisons in one filter, however nested. */
export const MAX_FILTER_COMPARISONS = 64;
/** Values of an `in` / `nin` list. */
export const MAX_FILTER_VALUES = 100;
/** An attribute key's length (attributes' own bound). */
export const MAX_FILTER_KEY_CHARS = 64;

const COMPARISONS: ReadonlySet<string> = new Set(['eq', 'ne', 'gt', 'gte', 'lt', 'lte', 'in', 'nin']);
const COMPOUNDS: ReadonlySet<string> = new Set(['and', 'or']);

const invalid = (param: string, message: string) => new PlatformError('invalid_body', message, param);
const isScalar = (v: unknown): v is string | number | boolean => typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v));

/**
 * The filter as OpenAI sends it, or 400: `invalid_body` naming the faulty field (`filters.filters.1.value`),
 * `unsupported_field` for a field OpenAI's filters do not have. Recursion stops at MAX_FILTER_DEPTH
 * (checked before descending), so a 10,000-deep filter is refused at its ninth level.
 */
export function parseFilters(value: unknown, param = 'filters'): AttributeFilter {
  const count = { comparisons: 0 };
  return parseFilter(value, param, 1, count);
}

function parseFilter(value: unknown, param: string, depth: number, count: { comparisons: number }): AttributeFilter {
  if (!isJsonObject(value)) throw invalid(param, `${param} is a filter object: {type, key, value} or {type: "and" | "or", filters}.`);
  const type = value.type;
  if (typeof type !== 'string' || (!COMPARISONS.has(type) && !COMPOUNDS.has(type))) {
    throw invalid(`${param}.type`, `${param}.type is one of eq, ne, gt, gte, lt, lte, in, nin, and, or.`);
  }
  if (COMPOUNDS.has(type)) return parseCompound(value, type as CompoundFilter['type'], param, depth, count);
  return parseComparison(value, type as ComparisonFilter['type'], param, count);
}

function unknownFields(value: Record<string, unknown>, known: readonly string[], param: string): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) throw new PlatformError('unsupported_field', `Unknown field "${key.slice(0, 64)}" in ${param}.`, `${param}.${key.slice(0, 64)}`);
  }
}

function parseCompound(value: Record<string, unknown>, type: CompoundFilter['type'], param: string, depth: number, count: { comparisons: number }): CompoundFilter {
  unknownFields(value, ['type', 'filters'], param);
  const filters = value.filters;
  const at = `${param}.filters`;
  if (!Array.isArray(filters) || filters.length < 1 || filters.length > MAX_FILTER_COMPARISONS) throw invalid(at, `${at} is an array of 1 to ${MAX_FILTER_COMPARISONS} filters.`);
  const parsed: AttributeFilter[] = [];
  for (let i = 0; i < filters.length; i++) {
    if (depth + 1 > MAX_FILTER_DEPTH) throw invalid(`${at}.${i}`, `Filters nest at most ${MAX_FILTER_DEPTH} levels deep (comparisons included).`);
    parsed.push(parseFilter(filters[i] as unknown, `${at}.${i}`, depth + 1, count));
  }
  return { type, filters: parsed };
}

function parseComparison(value: Record<string, unknown>, type: ComparisonFilter['type'], param: string, count: { comparisons: number }): ComparisonFilter {
  unknownFields(value, ['type', 'key', 'value'], param);
  if (++count.comparisons > MAX_FILTER_COMPARISONS) throw invalid(param, `A filter holds at most ${MAX_FILTER_COMPARISONS} comparisons.`);
  const key = value.key;
  if (typeof key !== 'string' || key.length < 1 || key.length > MAX_FILTER_KEY_CHARS) throw invalid(`${param}.key`, `${param}.key is an attribute key of 1 to ${MAX_FILTER_KEY_CHARS} characters.`);
  const v = value.value;
  const at = `${param}.value`;
  if (type === 'in' || type === 'nin') {
    if (!Array.isArray(v) || v.length < 1 || v.length > MAX_FILTER_VALUES) throw invalid(at, `${at} is an array of 1 to ${MAX_FILTER_VALUES} strings or numbers for \`${type}\`.`);
    if (!v.every((x) => typeof x === 'string' || (typeof x === 'number' && Number.isFinite(x)))) throw invalid(at, `${at} holds strings and finite numbers only.`);
    return { type, key, value: [...(v as Array<string | number>)] };
  }
  if (type === 'eq' || type === 'ne') {
    if (!isScalar(v)) throw invalid(at, `${at} is a string, a finite number or a boolean for \`${type}\`.`);
    return { type, key, value: v };
  }
  if (typeof v !== 'string' && !(typeof v === 'number' && Number.isFinite(v))) throw invalid(at, `${at} is a string or a finite number for \`${type}\`.`);
  return { type, key, value: v };
}

/** A file's attributes from their JSON text (the `oaivsf` record's); anything but an object of scalars counts as none. */
export function attributesOf(text: unknown): Record<string, string | number | boolean> {
  if (typeof text !== 'string') return {};
  try {
    const parsed = JSON.parse(text) as unknown;
    return isJsonObject(parsed) ? (parsed as Record<string, string | number | boolean>) : {};
  } catch {
    return {};
  }
}

/** The attribute's value, own keys only: `constructor` or `toString` are attributes like any other, never the prototype's. */
const attribute = (attributes: Record<string, unknown>, key: string) => (Object.hasOwn(attributes, key) && isScalar(attributes[key]) ? attributes[key] : undefined);

/**
 * Whether the attributes match. A missing key never matches (`ne` and `nin` included, as S3
 * Vectors' filters); values of different types never match; strings order as JavaScript compares
 * them (UTF-16 code units, so ISO dates order by time); `in`/`nin` test strings and numbers only.
 */
export function evaluateFilter(filter: AttributeFilter, attributes: Record<string, unknown>): boolean {
  if ('filters' in filter) return filter.type === 'and' ? filter.filters.every((f) => evaluateFilter(f, attributes)) : filter.filters.some((f) => evaluateFilter(f, attributes));
  const a = attribute(attributes, filter.key);
  if (a === undefined) return false;
  const v = filter.value;
  switch (filter.type) {
    case 'in':
    case 'nin': {
      if (typeof a === 'boolean' || !Array.isArray(v)) return false;
      const member = v.some((x) => x === a);
      return filter.type === 'in' ? member : !member;
    }
    default: {
      if (Array.isArray(v) || typeof a !== typeof v) return false;
      switch (filter.type) {
        case 'eq':
          return a === v;
        case 'ne':
          return a !== v;
        case 'gt':
          return typeof a !== 'boolean' && a > v;
        case 'gte':
          return typeof a !== 'boolean' && a >= v;
        case 'lt':
          return typeof a !== 'boolean' && a < v;
        case 'lte':
          return typeof a !== 'boolean' && a <= v;
      }
    }
  }
}
