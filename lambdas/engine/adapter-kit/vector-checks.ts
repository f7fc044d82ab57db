/**
 * Checks both vector index adapters make, so an entry or filter S3 Vectors would refuse is refused
 * locally too (Amazon S3 User Guide, "Limitations and restrictions"; the port's own limits).
 */
import { VECTOR_PAYLOAD_BYTES_MAX, type VectorEntry, type VectorFilter } from '../ports.js';
import { EngineError } from '../errors.js';

export const VECTOR_LIMITS = {
  keyBytes: 1024,
  /** The port's: 40 filterable keys, leaving room for the payload's under S3 Vectors' 50 keys a vector. */
  filterableKeys: 40,
  /** Filterable metadata as UTF-8 JSON (S3 Vectors: 2 KB). */
  filterableBytes: 2 * 1024,
  /** The payload as a JSON string, quotes and escapes included, in UTF-8 bytes (the port's 32 KiB). */
  payloadBytes: VECTOR_PAYLOAD_BYTES_MAX,
  /** Values a `$in` takes (the port's). */
  inValues: 20,
} as const;

const utf8 = (text: string) => Buffer.byteLength(text, 'utf8');

export function checkVectorKey(key: string): string {
  const size = utf8(key);
  if (size < 1 || size > VECTOR_LIMITS.keyBytes) throw new EngineError(`a vector key is 1 to ${VECTOR_LIMITS.keyBytes} bytes, not ${size}`);
  return key;
}

/** The entry's key, filterable metadata and payload within the limits; its vector is each adapter's to check. */
export function checkVectorEntry(entry: VectorEntry): void {
  checkVectorKey(entry.key);
  const keys = Object.keys(entry.filterable);
  if (keys.length > VECTOR_LIMITS.filterableKeys) throw new EngineError(`vector ${entry.key}: ${keys.length} filterable metadata keys, over the limit of ${VECTOR_LIMITS.filterableKeys}`);
  for (const [k, v] of Object.entries(entry.filterable)) {
    const ok = typeof v === 'string' || typeof v === 'boolean' || (typeof v === 'number' && Number.isFinite(v)) || (Array.isArray(v) && v.every((x) => typeof x === 'string'));
    if (!ok) throw new EngineError(`vector ${entry.key}: filterable metadata ${k} is not a string, finite number, boolean or array of strings`);
  }
  const filterableBytes = utf8(JSON.stringify(entry.filterable));
  if (filterableBytes > VECTOR_LIMITS.filterableBytes) {
    throw new EngineError(`vector ${entry.key}: filterable metadata is ${filterableBytes} bytes as JSON, over the limit of ${VECTOR_LIMITS.filterableBytes}`);
  }
  // Measured as S3 Vectors measures metadata: as JSON, escapes included (a control character is 6 bytes).
  const payloadBytes = utf8(JSON.stringify(entry.payload));
  if (payloadBytes > VECTOR_LIMITS.payloadBytes) throw new EngineError(`vector ${entry.key}: payload is ${payloadBytes} bytes as a JSON string, over the limit of ${VECTOR_LIMITS.payloadBytes}`);
}

/** Each `$in` holds 1 to VECTOR_LIMITS.inValues values and nothing else; no key is an operator. */
export function checkVectorFilter(filter: VectorFilter | undefined): void {
  for (const [key, condition] of Object.entries(filter ?? {})) {
    if (key.startsWith('$')) throw new EngineError(`a vector filter cannot test "${key}"`);
    if (typeof condition !== 'object' || condition === null) continue;
    const values = (condition as { $in?: unknown }).$in;
    if (!Array.isArray(values) || values.length < 1 || values.length > VECTOR_LIMITS.inValues || Object.keys(condition).length !== 1) {
      throw new EngineError(`the vector filter on ${key}: $in takes 1 to ${VECTOR_LIMITS.inValues} values`);
    }
  }
}
