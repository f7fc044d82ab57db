/** Whether a parsed JSON value nests deeper than `max` (scalars are 0, `[]` and `{}` 1); iterative, so any depth is safe. */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [1];
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) {
      if (child !== null && typeof child === 'object') {
        values.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/**
 * Whether a parsed JSON value holds a number JSON.parse could not represent (`1e400` is Infinity):
 * written again it would be `null`, so the value would not arrive as sent. Iterative, as above.
 */
export function holdsNonFiniteNumber(value: unknown): boolean {
  const values: unknown[] = [value];
  while (values.length > 0) {
    const v = values.pop();
    if (typeof v === 'number' && !Number.isFinite(v)) return true;
    if (v !== null && typeof v === 'object') for (const child of Array.isArray(v) ? v : Object.values(v)) values.push(child);
  }
  return false;
}
