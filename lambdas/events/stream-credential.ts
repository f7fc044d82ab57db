/**
 * The credential of an open stream, checked again while the stream stays open (spec 5 rule 5: a
 * revoked credential stops working within a minute; docs/events/stream.md "Credential changes").
 * The handshake's checks are run again through the same resolver and caches (authenticate(),
 * requirePermission(), authorizeWorkspace()), so a change reaches an open stream when it reaches a
 * call: within CREDENTIAL_CACHE_MS. The local session checks before each pull; in AWS the consumer
 * checks before it posts frames, and the $default function on each client frame.
 *
 * In AWS the credential waits in the connection table between invocations: sealed with AES-256-GCM
 * under a key derived from the server secret for this one purpose, bound to the connection id.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { authenticate } from '../auth/credentials.js';
import { authorizeWorkspace, requirePermission } from '../auth/workspace-access.js';
import type { Engine, ServerSecret } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { log } from '../shared/log.js';
import { derivedKey } from '../shared/server-keys.js';

/** What the handshake presented: its Authorization header (or `bearer.` subprotocol), and its Origin. */
export interface StreamCredential {
  authorization: string;
  origin?: string;
}

/** Close codes of a stream whose credential no longer holds (4000 + the status a call would get). */
export const CREDENTIAL_CLOSE_CODES = {
  /** 401: the credential is unknown or expired (an expired OAuth token, a revoked OAuth client). */
  revoked: 4401,
  /** 403: the key or its organization is disabled, the origin is no longer listed, the permission or workspace no longer held. */
  notAllowed: 4403,
} as const;

export interface CredentialRefusal {
  code: number;
  /** `<error code>: <message>`, as a call would be answered. */
  reason: string;
}

/**
 * Why the stream's credential no longer opens this workspace's streams, or undefined while it does.
 * A store failure is not a refusal (undefined, logged): the next check tries again.
 */
export async function streamCredentialRefusal(engine: Engine, credential: StreamCredential, workspaceId: string): Promise<CredentialRefusal | undefined> {
  try {
    const principal = await authenticate(engine, credential.authorization);
    if (principal.kind === 'publishable_key' && (credential.origin === undefined || !principal.origins!.includes(credential.origin))) {
      throw new PlatformError('origin_not_allowed', 'This publishable key is not allowed from this origin.');
    }
    requirePermission(principal, 'events:stream.open');
    await authorizeWorkspace(engine, principal, workspaceId);
    return undefined;
  } catch (error) {
    if (!(error instanceof PlatformError)) {
      log.warn('stream credential check failed; trying again later', { error: String(error) });
      return undefined;
    }
    const code = error.status === 401 ? CREDENTIAL_CLOSE_CODES.revoked : CREDENTIAL_CLOSE_CODES.notAllowed;
    return { code, reason: `${error.code}: ${error.message}` };
  }
}

// ---------- sealed, for the connection table ----------

export const STREAM_CREDENTIAL_KEY_PURPOSE = 'stream credentials v1';
const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

const key = (secret: ServerSecret) => derivedKey(secret, STREAM_CREDENTIAL_KEY_PURPOSE);
const additionalData = (connectionId: string) => Buffer.concat([Buffer.of(VERSION), Buffer.from(connectionId, 'utf8')]);

/** The credential sealed for one connection: base64url(version ‖ nonce ‖ ciphertext ‖ tag). */
export async function sealStreamCredential(secret: ServerSecret, connectionId: string, credential: StreamCredential): Promise<string> {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', await key(secret), iv);
  cipher.setAAD(additionalData(connectionId));
  const body = Buffer.concat([cipher.update(JSON.stringify(credential), 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.of(VERSION), iv, body, cipher.getAuthTag()]).toString('base64url');
}

/** The credential sealed for this connection, or undefined when it does not open (altered, another connection, another secret). */
export async function openStreamCredential(secret: ServerSecret, connectionId: string, sealed: unknown): Promise<StreamCredential | undefined> {
  if (typeof sealed !== 'string') return undefined;
  const bytes = Buffer.from(sealed, 'base64url');
  if (bytes.length < 1 + IV_BYTES + TAG_BYTES + 1 || bytes[0] !== VERSION) return undefined;
  const aesKey = await key(secret);
  try {
    const decipher = createDecipheriv('aes-256-gcm', aesKey, bytes.subarray(1, 1 + IV_BYTES));
    decipher.setAAD(additionalData(connectionId));
    decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
    const plain = Buffer.concat([decipher.update(bytes.subarray(1 + IV_BYTES, bytes.length - TAG_BYTES)), decipher.final()]).toString('utf8');
    const credential = JSON.parse(plain) as StreamCredential;
    return typeof credential.authorization === 'string' ? credential : undefined;
  } catch {
    return undefined;
  }
}
