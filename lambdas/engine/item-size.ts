/**
 * How the key-value port counts an item's size against its 400 KB limit (`LIMITS.itemBytes`), and
 * what it cannot store: the port's item rule, which a domain module may use to decide what fits in
 * an item. The adapters enforce it with adapter-kit/kv-checks.ts.
 */
import type { KvItem, KvValue } from './ports.js';

/** Size of a value as DynamoDB counts it (see "Item sizes and formats" in the DynamoDB guide). */
function valueSize(value: KvValue): number {
  if (value === null || typeof value === 'boolean') return 1;
  if (typeof value === 'string') return Buffer.byteLength(value, 'utf8');
  if (typeof value === 'number') {
    // Significant digits; safe integers (the common case) without building a string.
    let digits: number;
    if (Number.isSafeInteger(value)) {
      let v = Math.abs(value);
      while (v !== 0 && v % 10 === 0) v /= 10;
      digits = v === 0 ? 1 : Math.floor(Math.log10(v)) + 1;
    } else {
      digits = String(Math.abs(value)).replace(/e.*$/, '').replace(/\./, '').replace(/^0+/, '').replace(/0+$/, '').length || 1;
    }
    return Math.ceil(digits / 2) + 1;
  }
  let n = 3;
  if (Array.isArray(value)) {
    for (const v of value) n += 1 + valueSize(v);
    return n;
  }
  for (const k in value) {
    const v = value[k];
    if (v !== undefined) n += 1 + Buffer.byteLength(k, 'utf8') + valueSize(v);
  }
  return n;
}

/** DynamoDB nests attribute values at most 32 levels deep (an item's attribute is level 1). */
export const MAX_VALUE_DEPTH = 32;
/** DynamoDB numbers range over 1e-130 to under 1e126 in magnitude. */
const MIN_MAGNITUDE = 1e-130;

/**
 * Why DynamoDB, through the SDK's document client, would not store `value` exactly as given, or
 * undefined when it would: a number the client refuses (beyond 2^53 - 1 in magnitude: it would lose
 * digits) or DynamoDB refuses (non-zero under 1e-130), nesting past MAX_VALUE_DEPTH, or a key named
 * `__proto__` or `constructor`: the client's marshaller assigns keys onto plain objects, which drops
 * `__proto__` silently, and picks a value's type by `value.constructor.name`, which such a key fools.
 * An empty key is refused too: DynamoDB attribute names are at least one character. `depth` is the
 * level `value` sits at. The embedded store refuses the same (engine parity).
 */
export function unstorableValue(value: unknown, depth = 1): string | undefined {
  if (typeof value === 'number') {
    const m = Math.abs(value);
    return m > Number.MAX_SAFE_INTEGER || (m !== 0 && m < MIN_MAGNITUDE) ? `the number ${value} is outside what DynamoDB stores exactly` : undefined;
  }
  if (value === null || typeof value !== 'object') return undefined;
  if (depth > MAX_VALUE_DEPTH) return `values nest deeper than ${MAX_VALUE_DEPTH} levels`;
  if (Array.isArray(value)) {
    for (const v of value) {
      const why = unstorableValue(v, depth + 1);
      if (why) return why;
    }
    return undefined;
  }
  for (const k in value) {
    if (k === '__proto__' || k === 'constructor') return `a key is named ${k}`;
    if (k === '') return 'a key is empty (DynamoDB names are at least one character)';
    const why = unstorableValue((value as Record<string, unknown>)[k], depth + 1);
    if (why) return why;
  }
  return undefined;
}

export function itemSize(item: KvItem): number {
  let size = 0;
  for (const [name, value] of Object.entries(item)) {
    if (value === undefined) continue;
    size += Buffer.byteLength(name, 'utf8') + valueSize(value);
  }
  return size;
}
