/**
 * Console passwords (docs/decisions/console-people.md): at least 12 characters, not one of the common
 * passwords of breaches that `@zxcvbn-ts/language-common` ships (its `passwords-common` list of
 * 49,233, pinned in package.json), hashed with scrypt from node:crypto with a per-password salt. The parameters are
 * stored with the hash, so raising them later leaves every stored hash verifiable.
 */
import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { PlatformError } from '../shared/errors.js';

export const MIN_PASSWORD_LENGTH = 12;
/** Longer is refused too: scrypt reads all of it, and a megabyte password is a way to spend our CPU. */
export const MAX_PASSWORD_LENGTH = 256;

/**
 * OWASP's scrypt settings: N=2^15, r=8, p=3 costs the CPU of its N=2^17, r=8, p=1 minimum with a
 * quarter of the memory (32 MiB a hash), so a few sign-ins at once fit a 1 GB function.
 */
export const SCRYPT_PARAMS = { N: 2 ** 15, r: 8, p: 3 } as const;
const KEY_BYTES = 32;
const SALT_BYTES = 16;
/** Node refuses scrypt above 32 MiB unless told: 128 * N * r bytes plus a little. */
const maxmem = (N: number, r: number) => 128 * N * r + 16 * 1024 * 1024;

const weak = (message: string) => new PlatformError('weak_password', message, 'password');

let common: Set<string> | undefined;

/** The breached-password list, loaded on first use (49,233 words: only the functions that set passwords load it). */
async function commonPasswords(): Promise<Set<string>> {
  if (common) return common;
  const { dictionary } = await import('@zxcvbn-ts/language-common');
  const list: unknown = dictionary['passwords-common'];
  if (!Array.isArray(list) || list.length < 1000) throw new Error('@zxcvbn-ts/language-common has no passwords-common list');
  common = new Set(list.map((p) => String(p).toLowerCase()));
  return common;
}

/**
 * Refuses a password a person may not set (400 weak_password, param `password`, the message saying
 * why): too short, too long, or in the breached list (compared without case: `Password1234` is
 * `password1234`).
 */
export async function checkNewPassword(password: unknown): Promise<string> {
  if (typeof password !== 'string') throw new PlatformError('invalid_body', '`password` must be a string.', 'password');
  const length = [...password].length;
  if (length < MIN_PASSWORD_LENGTH) throw weak(`A password needs at least ${MIN_PASSWORD_LENGTH} characters; this one has ${length}.`);
  if (length > MAX_PASSWORD_LENGTH) throw weak(`A password may have at most ${MAX_PASSWORD_LENGTH} characters.`);
  if ((await commonPasswords()).has(password.toLowerCase())) throw weak('This password is in a list of passwords leaked in breaches; choose another.');
  return password;
}

function derive(password: string, salt: Buffer, N: number, r: number, p: number, bytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, bytes, { N, r, p, maxmem: maxmem(N, r) }, (error, key) => (error ? reject(error) : resolve(key))),
  );
}

/** `scrypt$<N>$<r>$<p>$<salt b64url>$<hash b64url>`. */
export async function hashPassword(password: string): Promise<string> {
  const { N, r, p } = SCRYPT_PARAMS;
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, N, r, p, KEY_BYTES);
  return ['scrypt', N, r, p, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** Whether `password` is the one `stored` was made from (constant time; a malformed stored value is false). */
export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const parts = stored.split('$');
  if (parts.length !== 6 || parts[0] !== 'scrypt') return false;
  const [N, r, p] = parts.slice(1, 4).map(Number);
  if (![N, r, p].every((n) => Number.isSafeInteger(n) && n > 0)) return false;
  const salt = Buffer.from(parts[4], 'base64url');
  const expected = Buffer.from(parts[5], 'base64url');
  if (expected.length < 16 || typeof password !== 'string' || password.length > MAX_PASSWORD_LENGTH * 2) return false;
  const key = await derive(password, salt, N, r, p, expected.length);
  return timingSafeEqual(key, expected);
}

let dummy: Promise<string> | undefined;
/**
 * A sign-in for an email that belongs to nobody still spends one scrypt, on this made-up hash, so the
 * answer's time does not tell which emails have an account.
 */
export async function spendVerification(password: string): Promise<void> {
  dummy ??= hashPassword(randomBytes(18).toString('base64url'));
  await verifyPassword(password, await dummy);
}
