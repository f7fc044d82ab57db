/**
 * Verifying a webhook on the receiver's side (docs/events/verifying-webhooks.md). Self-contained:
 * it imports nothing but `node:crypto`, so a receiver can copy this one file.
 *
 * A request is genuine when `x-event-timestamp` is within `toleranceSeconds` of the receiver's clock
 * (either direction) and any `v1=` entry of `x-event-signature` equals
 * hex(HMAC-SHA256(key = the whole `whsec_...` string as UTF-8, `${timestamp}.` ‖ raw body bytes)),
 * compared in constant time. Entries of other versions, and malformed ones, are ignored.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** A fetch `Headers` object, or a plain record such as Node's `req.headers` (names in any case). */
export type WebhookHeaders = { get(name: string): string | null } | Record<string, string | readonly string[] | undefined>;

export interface VerifyWebhookInput {
  /** The subscription's `whsec_...` secret; several while you switch to a rotated one. */
  secret: string | readonly string[];
  headers: WebhookHeaders;
  /** The body exactly as received, before any JSON parsing. */
  body: string | Uint8Array | ArrayBuffer;
  /** Largest accepted distance between the timestamp and `now`, in seconds (default 300). */
  toleranceSeconds?: number;
  /** The receiver's clock, Unix milliseconds (default `Date.now()`). */
  now?: number;
}

export type VerifyWebhookResult =
  | { ok: true }
  | { ok: false; reason: 'missing_headers' | 'timestamp_out_of_tolerance' | 'no_matching_signature' };

const TIMESTAMP = /^\d{1,15}$/;
const V1_ENTRY = /^v1=([0-9a-f]{64})$/i;

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    const v = (headers as { get(name: string): string | null }).get(name);
    return v ?? undefined;
  }
  const record = headers as Record<string, string | readonly string[] | undefined>;
  for (const key of Object.keys(record)) {
    if (key.toLowerCase() !== name) continue;
    const v = record[key];
    return typeof v === 'string' ? v : Array.isArray(v) ? v.join(',') : undefined;
  }
  return undefined;
}

const bytesOf = (body: string | Uint8Array | ArrayBuffer): Uint8Array =>
  typeof body === 'string' ? Buffer.from(body, 'utf8') : body instanceof Uint8Array ? body : new Uint8Array(body);

/**
 * Checks one webhook request. `missing_headers`: no `x-event-timestamp` or `x-event-signature`, or a
 * timestamp that is not whole Unix seconds; `timestamp_out_of_tolerance`: more than
 * `toleranceSeconds` before or after `now`; `no_matching_signature`: no `v1=` entry matches any secret.
 */
export function verifyWebhook({ secret, headers, body, toleranceSeconds = 300, now = Date.now() }: VerifyWebhookInput): VerifyWebhookResult {
  const timestamp = header(headers, 'x-event-timestamp')?.trim();
  const signature = header(headers, 'x-event-signature');
  if (!timestamp || !signature || !TIMESTAMP.test(timestamp)) return { ok: false, reason: 'missing_headers' };
  const nowSeconds = Math.floor(now / 1000);
  if (Math.abs(nowSeconds - Number(timestamp)) > toleranceSeconds) return { ok: false, reason: 'timestamp_out_of_tolerance' };

  const given = signature
    .split(',')
    .map((entry) => V1_ENTRY.exec(entry.trim())?.[1])
    .filter((hex): hex is string => hex !== undefined)
    .map((hex) => Buffer.from(hex, 'hex'));
  const raw = bytesOf(body);
  const secrets = typeof secret === 'string' ? [secret] : secret;
  let match = false;
  for (const s of secrets) {
    if (typeof s !== 'string' || s.length === 0) continue;
    const expected = createHmac('sha256', Buffer.from(s, 'utf8')).update(`${timestamp}.`, 'utf8').update(raw).digest();
    // Every entry is compared (no early exit): 32 bytes against 32 bytes, in constant time.
    for (const g of given) if (timingSafeEqual(g, expected)) match = true;
  }
  return match ? { ok: true } : { ok: false, reason: 'no_matching_signature' };
}
