/**
 * JSON values as the fuzzer sends them: what JSON.stringify cannot write (`-0`, a number beyond a
 * double such as `1e400`, which JSON.parse reads as Infinity) and keys named like the prototype's
 * (`__proto__` as an own key, as JSON.parse makes it on the server).
 */

/** A number written as this text in the body (`1e400`, `9007199254740993`). */
export class RawNumber {
  constructor(readonly text: string) {}
}

export type Path = (string | number)[];

/** The body text: JSON, with -0 and raw numbers written as they are. */
export function toJson(value: unknown): string {
  if (value instanceof RawNumber) return value.text;
  if (typeof value === 'number') return Object.is(value, -0) ? '-0' : Number.isFinite(value) ? String(value) : 'null';
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map((v) => toJson(v)).join(',')}]`;
  return `{${Object.keys(value)
    .map((k) => `${JSON.stringify(k)}:${toJson((value as Record<string, unknown>)[k])}`)
    .join(',')}}`;
}

/** The value the server sees once it parsed the body (raw numbers read as JSON.parse reads them). */
export const asParsed = (value: unknown): unknown => (value === undefined ? undefined : JSON.parse(toJson(value)));

/** Sets an own property, also one named `__proto__` (an assignment would set the prototype). */
export function own<T extends object>(target: T, key: string, value: unknown): T {
  Object.defineProperty(target, key, { value, enumerable: true, writable: true, configurable: true });
  return target;
}

/** A deep copy keeping own `__proto__` keys, -0 and raw numbers. */
export function clone<T>(value: T): T {
  if (value === null || typeof value !== 'object' || value instanceof RawNumber) return value;
  if (Array.isArray(value)) return value.map((v) => clone(v)) as T;
  const out = {};
  for (const k of Object.keys(value)) own(out, k, clone((value as Record<string, unknown>)[k]));
  return out as T;
}

export function getAt(root: unknown, path: Path): unknown {
  let v = root;
  for (const k of path) v = v === null || typeof v !== 'object' ? undefined : (v as Record<string | number, unknown>)[k];
  return v;
}

/** A copy of `root` with the value at `path` replaced (`undefined`: removed). */
export function withAt(root: unknown, path: Path, value: unknown): unknown {
  if (path.length === 0) return value;
  const copy = clone(root) as Record<string | number, unknown>;
  const parent = getAt(copy, path.slice(0, -1)) as Record<string | number, unknown>;
  const last = path[path.length - 1];
  if (value === undefined) {
    if (Array.isArray(parent)) parent.splice(Number(last), 1);
    else delete parent[last];
  } else if (Array.isArray(parent)) parent[Number(last)] = value;
  else own(parent, String(last), value);
  return copy;
}

/** `[[[…]]]`, `depth` arrays deep: past the platform's JSON depth limit (64) at 100. */
export function nested(depth: number): unknown {
  let v: unknown = 1;
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
}

export const dotted = (path: Path) => path.join('.');
