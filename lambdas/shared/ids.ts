import { randomBytes, randomFillSync } from 'node:crypto';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

// One getrandom call per 256 ids instead of one per id (ids are made on every write and every call).
const pool = Buffer.alloc(4096);
let pos = pool.length;
/** Offset of 16 fresh random bytes in `pool`. */
function take16(): number {
  if (pos + 16 > pool.length) {
    randomFillSync(pool);
    pos = 0;
  }
  pos += 16;
  return pos - 16;
}

/**
 * A ULID in lowercase Crockford base32: 10 characters of milliseconds, 16 of randomness, 26 in all.
 * Ids sort by creation time, which keeps listings and cursors cheap.
 */
export function ulid(nowMs = Date.now()): string {
  let time = '';
  let t = nowMs;
  for (let i = 0; i < 10; i++) {
    time = CROCKFORD[t % 32] + time;
    t = Math.floor(t / 32);
  }
  const at = take16();
  let rand = '';
  for (let i = 0; i < 16; i++) rand += CROCKFORD[pool[at + i] & 31];
  return time + rand;
}

/** `prefix_` followed by a ULID, e.g. `org_01j...`. */
export const newId = (prefix: string, nowMs?: number) => `${prefix}_${ulid(nowMs)}`;

export const randomHex = (bytes: number) => randomBytes(bytes).toString('hex');
