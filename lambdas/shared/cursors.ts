/**
 * Sealed list cursors (docs/decisions/cursors.md). A cursor is the list's position encrypted and
 * authenticated with AES-256-GCM under a key derived from the server secret, with the query and the
 * caller it was made for as additional authenticated data:
 * - opaque: nothing in it is readable (no value, id, organization or storage key), and its length
 *   says little (the plaintext is padded to a multiple of PAD bytes);
 * - tamper-proof: any altered byte fails authentication;
 * - bound: opened for another collection, filter, sort or credential, it fails the same way.
 * A cursor that does not open is one error, whatever the reason, so the answer tells nothing either.
 */
import { createCipheriv, createDecipheriv } from 'node:crypto';
import { pooledRandomBytes } from './ids.js';
import type { ServerSecret } from '../engine/ports.js';
import { derivedKey } from './server-keys.js';
import { PlatformError } from './errors.js';
import * as z from 'zod/mini';

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const PAD = 32;
/**
 * Longest cursor accepted before any work: a records cursor holds the store's position, an index key of
 * at most 1 KiB that JSON escaping can grow sixfold, base64 twice over.
 */
export const MAX_CURSOR_CHARS = 16_384;

export class InvalidCursorError extends Error {
  override name = 'InvalidCursorError';
  constructor() {
    super('invalid cursor');
  }
}

/** The cursor key: HKDF-SHA-256 of the server secret for this one purpose (`shared/server-keys.ts`). */
const CURSOR_KEY_PURPOSE = 'platform cursor key v1';
const cursorKey = (secret: ServerSecret): Promise<Buffer> => derivedKey(secret, CURSOR_KEY_PURPOSE);

const additionalData = (binding: string) => Buffer.concat([Buffer.of(VERSION), Buffer.from(binding, 'utf8')]);

/** Seals a JSON-serializable position for one query and caller (`binding`). */
export async function sealCursor(secret: ServerSecret, state: unknown, binding: string): Promise<string> {
  const json = JSON.stringify(state);
  // JSON ignores trailing whitespace: padding hides the exact length of what the position holds.
  const plain = Buffer.from(json.padEnd(Math.ceil((json.length + 1) / PAD) * PAD, ' '), 'utf8');
  const iv = pooledRandomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', await cursorKey(secret), iv);
  cipher.setAAD(additionalData(binding));
  const sealed = Buffer.concat([Buffer.of(VERSION), iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  return sealed.toString('base64url');
}

/** Opens a cursor sealed for `binding`; anything else (altered, forged, another query or caller) throws InvalidCursorError. */
export async function openCursor(secret: ServerSecret, cursor: string, binding: string): Promise<unknown> {
  if (cursor.length > MAX_CURSOR_CHARS || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw new InvalidCursorError();
  const bytes = Buffer.from(cursor, 'base64url');
  // base64url decoding skips what it cannot read: only a cursor that re-encodes to itself is ours.
  if (bytes.toString('base64url') !== cursor || bytes.length < 1 + IV_BYTES + TAG_BYTES + PAD || bytes[0] !== VERSION) throw new InvalidCursorError();
  const decipher = createDecipheriv('aes-256-gcm', await cursorKey(secret), bytes.subarray(1, 1 + IV_BYTES));
  decipher.setAAD(additionalData(binding));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  let plain: Buffer;
  try {
    plain = Buffer.concat([decipher.update(bytes.subarray(1 + IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
  } catch {
    throw new InvalidCursorError();
  }
  try {
    return JSON.parse(plain.toString('utf8'));
  } catch {
    throw new InvalidCursorError();
  }
}

/**
 * `?limit=&cursor=` as openPage reads them, for the API documents and the listings that parse their
 * query with it first (openPage still checks the range and opens the cursor): the same messages as
 * openPage's, so either check answers a fault alike.
 */
export const pageQuerySchema = (range: { max: number; fallback: number }) =>
  z.strictObject({
    limit: z.optional(z.string().check(z.regex(/^\d{1,3}$/, `limit is a whole number from 1 to ${range.max}.`), z.describe(`How many to answer: a whole number from 1 to ${range.max} (default ${range.fallback}).`))),
    cursor: z.optional(
      z.string().check(
        z.maxLength(MAX_CURSOR_CHARS, INVALID_CURSOR_MESSAGE),
        z.regex(/^[A-Za-z0-9_-]+$/, INVALID_CURSOR_MESSAGE),
        z.describe('The previous page\'s `next_cursor`, to read the next page (bound to this listing and caller).'),
      ),
    ),
  });

const INVALID_CURSOR_MESSAGE = 'This cursor is not one this listing gave.';

/**
 * A listing's page as the AI routes take it (`?limit=&cursor=`): `limit` a whole number from 1 to
 * `max` (`fallback` when absent; else 400 invalid_field), and the store position the cursor seals for
 * `binding` (undefined when absent; any other cursor is 400 invalid_cursor).
 */
export async function openPage(secret: ServerSecret, query: { limit?: string; cursor?: string }, binding: string, range: { max: number; fallback: number }): Promise<{ limit: number; position?: string }> {
  let limit = range.fallback;
  if (query.limit !== undefined) {
    if (!/^\d{1,3}$/.test(query.limit) || Number(query.limit) < 1 || Number(query.limit) > range.max) throw new PlatformError('invalid_field', `limit is a whole number from 1 to ${range.max}.`, 'limit');
    limit = Number(query.limit);
  }
  if (query.cursor === undefined) return { limit };
  try {
    const opened = (await openCursor(secret, query.cursor, binding)) as { p?: unknown };
    if (typeof opened?.p !== 'string') throw new InvalidCursorError();
    return { limit, position: opened.p };
  } catch (error) {
    if (error instanceof InvalidCursorError) throw new PlatformError('invalid_cursor', INVALID_CURSOR_MESSAGE, 'cursor');
    throw error;
  }
}

/** The next page's cursor for `openPage`, or null at the end. */
export const nextPageCursor = async (secret: ServerSecret, position: string | undefined, binding: string): Promise<string | null> =>
  position === undefined ? null : sealCursor(secret, { p: position }, binding);
