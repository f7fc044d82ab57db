/**
 * Webhook signatures (spec 4.21 "Webhook delivery request") and the bookkeeping of signing-secret
 * rotation (spec 3 "Secret rotation"). Pure functions: no I/O, no clock of their own.
 *
 * - A signing secret is `whsec_` + standard base64 (RFC 4648 section 4, with `+`, `/` and `=`
 *   padding, as Svix writes its secrets) of 32 random bytes: 50 characters. Unlike Svix, the HMAC
 *   key is the whole string as UTF-8, prefix included, never the decoded bytes (the spec says so).
 * - Signature = lowercase hex HMAC-SHA256(key, `${timestamp}.` ‖ raw body bytes), timestamp in
 *   Unix seconds. Header `x-event-signature: v1=<hex>[,v1=<hex>...]`, one entry per live secret,
 *   newest first. Sign at every attempt with the time of that attempt: receivers refuse a
 *   timestamp more than 5 minutes from their clock, and retries run for minutes.
 * - Rotation: the stored list holds the sealed secrets (`events/secret-box.ts`), newest first;
 *   `rotate` puts a new one first and gives every live previous one at most `graceMs` more.
 *
 * The receiver's side is `events/verify.ts` (dependency-free) and docs/events/verifying-webhooks.md.
 */
import { createHmac, randomBytes } from 'node:crypto';

export const SIGNING_SECRET_PREFIX = 'whsec_';
const SECRET_BYTES = 32;
/** How long the previous secrets keep signing after a rotation (spec 3: 24 hours). */
export const ROTATION_GRACE_MS = 24 * 60 * 60 * 1000;

/** A signing secret as stored in the subscription: sealed, never in plain text. */
export interface StoredSecret {
  /** `sealSigningSecret(...)` of the `whsec_...` string. */
  sealed: string;
  /** RFC 3339 UTC with milliseconds. */
  created_at: string;
  /** RFC 3339 UTC with milliseconds; null: the current secret, valid until the next rotation. */
  expires_at: string | null;
}

/** A fresh signing secret: `whsec_` + standard base64 of 32 random bytes (50 characters). */
export function newSigningSecret(): string {
  return SIGNING_SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

function checkTimestamp(timestamp: number): void {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) throw new RangeError('the signature timestamp must be whole Unix seconds');
}

/** Lowercase hex HMAC-SHA256 with key = the whole secret string (UTF-8), over `${timestamp}.` and the raw body. */
export function signPayload(secret: string, timestamp: number, body: string | Uint8Array): string {
  checkTimestamp(timestamp);
  return createHmac('sha256', Buffer.from(secret, 'utf8'))
    .update(`${timestamp}.`, 'utf8')
    .update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body)
    .digest('hex');
}

/** The `x-event-signature` value: `v1=<hex>` per secret, in the order given (newest first), comma-separated. */
export function signatureHeader(secrets: readonly string[], timestamp: number, body: string | Uint8Array): string {
  if (secrets.length === 0) throw new RangeError('no signing secret to sign with');
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  return secrets.map((s) => `v1=${signPayload(s, timestamp, bytes)}`).join(',');
}

const iso = (ms: number) => new Date(ms).toISOString();
const isLive = (s: StoredSecret, now: number) => s.expires_at === null || Date.parse(s.expires_at) > now;

/**
 * A rotation over the stored list: `sealed` (the new secret, already sealed) first, with no expiry;
 * every previous secret still live at `now` keeps signing until min(its own expiry, now + graceMs)
 * (one without expiry gets now + graceMs); those already expired are dropped.
 * `previousValidUntil` is now + graceMs (the rotate answer's `previous_valid_until`).
 */
export function rotate(
  secrets: readonly StoredSecret[],
  sealed: string,
  now: number,
  graceMs: number = ROTATION_GRACE_MS,
): { secrets: StoredSecret[]; previousValidUntil: string } {
  const until = now + graceMs;
  const previous = liveSecrets(secrets, now).map((s) => ({
    ...s,
    expires_at: s.expires_at === null ? iso(until) : iso(Math.min(Date.parse(s.expires_at), until)),
  }));
  return { secrets: [{ sealed, created_at: iso(now), expires_at: null }, ...previous], previousValidUntil: iso(until) };
}

/** The secrets that still sign at `now`, newest first (by `created_at`; ties keep the stored order). */
export function liveSecrets(secrets: readonly StoredSecret[], now: number): StoredSecret[] {
  return secrets.filter((s) => isLive(s, now)).sort((a, b) => Date.parse(b.created_at) - Date.parse(a.created_at));
}
