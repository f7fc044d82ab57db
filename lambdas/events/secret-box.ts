/**
 * Webhook signing secrets at rest (docs/decisions/webhook-secrets.md): sealed with AES-256-GCM under
 * a key derived from the server secret for this one purpose, bound to their subscription.
 *
 * Sealed form: base64url(version ‖ 96-bit random nonce ‖ ciphertext ‖ 128-bit tag); the additional
 * authenticated data is the version byte and the subscription id, so a sealed secret copied into
 * another subscription does not open. Whatever fails (altered byte, other subscription, other server
 * secret), `openSigningSecret` throws one `SealedSecretError` carrying no detail; neither function
 * logs, and no error message ever holds a secret.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { ServerSecret } from '../engine/ports.js';
import { derivedKey } from '../shared/server-keys.js';

export const SIGNING_SECRET_KEY_PURPOSE = 'webhook signing secrets v1';
const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
/** Far more than a sealed `whsec_` secret needs (about 110 characters): refuse anything longer unread. */
const MAX_SEALED_CHARS = 1024;

export class SealedSecretError extends Error {
  override name = 'SealedSecretError';
  constructor() {
    super('signing secret does not open');
  }
}

const key = (serverSecret: ServerSecret) => derivedKey(serverSecret, SIGNING_SECRET_KEY_PURPOSE);
const additionalData = (subscriptionId: string) => Buffer.concat([Buffer.of(VERSION), Buffer.from(subscriptionId, 'utf8')]);

/** Seals a plain `whsec_...` secret for one subscription. */
export async function sealSigningSecret(serverSecret: ServerSecret, subscriptionId: string, plain: string): Promise<string> {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', await key(serverSecret), iv);
  cipher.setAAD(additionalData(subscriptionId));
  const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.of(VERSION), iv, body, cipher.getAuthTag()]).toString('base64url');
}

/** Opens a secret sealed for `subscriptionId` under this server secret; anything else throws SealedSecretError. */
export async function openSigningSecret(serverSecret: ServerSecret, subscriptionId: string, sealed: string): Promise<string> {
  if (typeof sealed !== 'string' || sealed.length > MAX_SEALED_CHARS || !/^[A-Za-z0-9_-]+$/.test(sealed)) throw new SealedSecretError();
  const bytes = Buffer.from(sealed, 'base64url');
  // base64url decoding skips what it cannot read: only a string that re-encodes to itself is ours.
  if (bytes.toString('base64url') !== sealed || bytes.length < 1 + IV_BYTES + TAG_BYTES + 1 || bytes[0] !== VERSION) throw new SealedSecretError();
  const decipher = createDecipheriv('aes-256-gcm', await key(serverSecret), bytes.subarray(1, 1 + IV_BYTES));
  decipher.setAAD(additionalData(subscriptionId));
  decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
  try {
    return Buffer.concat([decipher.update(bytes.subarray(1 + IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
  } catch {
    throw new SealedSecretError();
  }
}
