/**
 * Keys derived from the server secret (engine port `ServerSecret`), one per purpose: HKDF-SHA-256
 * with an empty salt and the purpose as the info string, 32 bytes. Two purposes never share a key,
 * so what one seals (a list cursor, a webhook signing secret) cannot be opened as the other.
 *
 * Purposes in use (the string is part of the key: changing one voids everything sealed under it):
 * - `platform cursor key v1`: list cursors (`shared/cursors.ts`, docs/decisions/cursors.md);
 * - `webhook signing secrets v1`: sealed webhook signing secrets (`events/secret-box.ts`,
 *   docs/decisions/webhook-secrets.md).
 * - `stream credentials v1`: a stream's credential in the AWS connection table
 *   (`events/stream-credential.ts`, docs/events/stream.md "Credential changes").
 *
 * A key is derived once per (secret, purpose) and cached for the life of the `ServerSecret` object
 * (a WeakMap, so an engine that is dropped takes its keys with it); a failed load is not cached,
 * the next call tries again.
 */
import { hkdfSync } from 'node:crypto';
import type { ServerSecret } from '../engine/ports.js';

const KEY_BYTES = 32;
const cache = new WeakMap<ServerSecret, Map<string, Promise<Buffer>>>();

/** HKDF-SHA-256 of the server secret for one purpose (32 bytes, for AES-256 or HMAC-SHA-256). */
export function derivedKey(secret: ServerSecret, purpose: string): Promise<Buffer> {
  let keys = cache.get(secret);
  if (!keys) {
    keys = new Map();
    cache.set(secret, keys);
  }
  const cached = keys.get(purpose);
  if (cached) return cached;
  const key = secret.get().then((s) => Buffer.from(hkdfSync('sha256', s, Buffer.alloc(0), purpose, KEY_BYTES)));
  keys.set(purpose, key);
  // Forget a failure (only if it is still this attempt), so the next call loads the secret again.
  key.catch(() => {
    if (keys.get(purpose) === key) keys.delete(purpose);
  });
  return key;
}
