/**
 * ES256 JWTs (RFC 7519 / 7515, compact form) signed by the engine's Signer. Only ES256 is ever
 * accepted: the algorithm comes from this code, never from the token, so `none` and HS256-with-the-
 * public-key tricks fail. Public keys are cached per signer for 10 minutes; an unknown key id makes
 * one refresh at most every 60 s, so a freshly rotated key is picked up without letting forged key ids
 * hammer the key service.
 */
import { createPublicKey, randomBytes, verify, type KeyObject } from 'node:crypto';
import type { PublicJwk, Signer } from '../engine/ports.js';

/** The token is malformed, forged, for someone else, or out of its time window. */
export class InvalidTokenError extends Error {
  override name = 'InvalidTokenError';
}

export interface SignJwtOptions {
  audience: string;
  issuer: string;
  ttlSeconds: number;
  /** Unix milliseconds; `iat` is its whole second. */
  nowMs: number;
  subject: string;
}

export interface VerifyJwtOptions {
  audience: string;
  /** Unix milliseconds. */
  nowMs: number;
  /** Clock skew tolerated on `exp` and `iat`; default 30. */
  leewaySeconds?: number;
}

/** Claims every token of ours has, plus whatever the caller put in. */
export interface JwtClaims {
  iss: string;
  sub: string;
  aud: string | string[];
  iat: number;
  exp: number;
  jti: string;
  [claim: string]: unknown;
}

const ALG = 'ES256';
const KEY_TTL_MS = 10 * 60_000;
const UNKNOWN_KID_REFRESH_MS = 60_000;
const DEFAULT_LEEWAY_SECONDS = 30;
/** Ours are a few hundred bytes; refuse to parse anything absurd. */
const MAX_TOKEN_CHARS = 16 * 1024;
const B64URL = /^[A-Za-z0-9_-]+$/;
const REGISTERED = ['iss', 'sub', 'aud', 'iat', 'exp', 'nbf', 'jti'];

const b64url = (data: Uint8Array | string) => Buffer.from(data).toString('base64url');

export async function signJwt(signer: Signer, claims: Record<string, unknown>, options: SignJwtOptions): Promise<string> {
  const { audience, issuer, subject, ttlSeconds, nowMs } = options;
  for (const [name, value] of Object.entries({ audience, issuer, subject })) {
    if (typeof value !== 'string' || value === '') throw new TypeError(`signJwt: ${name} must be a non-empty string`);
  }
  if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0) throw new TypeError('signJwt: ttlSeconds must be a positive integer');
  if (!Number.isFinite(nowMs)) throw new TypeError('signJwt: nowMs must be a number');
  const custom = Object.fromEntries(Object.entries(claims).filter(([name]) => !REGISTERED.includes(name)));
  const iat = Math.floor(nowMs / 1000);
  const payload = b64url(
    JSON.stringify({ ...custom, iss: issuer, sub: subject, aud: audience, iat, exp: iat + ttlSeconds, jti: randomBytes(16).toString('base64url') }),
  );

  // The header names the key, so it must be known before signing: guess the current key, and if a
  // rotation landed in between (the signer used another key), sign again under the key it used.
  let kid = lastKid.get(signer) ?? (await signer.publicKeys())[0]?.kid;
  if (!kid) throw new Error('signJwt: the signer has no key');
  for (let attempt = 0; attempt < 3; attempt++) {
    const input = `${b64url(JSON.stringify({ alg: ALG, typ: 'JWT', kid }))}.${payload}`;
    const { keyId, signature } = await signer.sign(Buffer.from(input, 'ascii'));
    lastKid.set(signer, keyId);
    if (keyId === kid) return `${input}.${b64url(signature)}`;
    kid = keyId;
  }
  throw new Error('signJwt: the signing key keeps changing');
}

export async function verifyJwt(signer: Signer, token: string, options: VerifyJwtOptions): Promise<JwtClaims> {
  const { audience, nowMs } = options;
  const leeway = options.leewaySeconds ?? DEFAULT_LEEWAY_SECONDS;
  if (typeof token !== 'string' || token.length > MAX_TOKEN_CHARS) throw invalid('malformed token');
  const parts = token.split('.');
  if (parts.length !== 3 || !parts.every((p) => B64URL.test(p))) throw invalid('malformed token');
  const [h, p, s] = parts;

  const header = decodeJson(h, 'header');
  if (header.alg !== ALG) throw invalid('unsupported algorithm');
  if (header.typ !== undefined && header.typ !== 'JWT') throw invalid('unsupported token type');
  if (header.crit !== undefined) throw invalid('unsupported critical header');
  if (typeof header.kid !== 'string' || header.kid === '') throw invalid('no key id');
  const signature = decode(s, 'signature');
  if (signature.length !== 64) throw invalid('bad signature');

  const key = await publicKey(signer, header.kid, nowMs);
  if (!key) throw invalid('unknown key id');
  if (!verify('sha256', Buffer.from(`${h}.${p}`, 'ascii'), { key, dsaEncoding: 'ieee-p1363' }, signature)) throw invalid('bad signature');

  // Only a genuine token gets this far: its claims are ours, but still check them.
  const claims = decodeJson(p, 'payload');
  const now = nowMs / 1000;
  const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
  if (!audiences.includes(audience)) throw invalid('wrong audience');
  if (typeof claims.exp !== 'number' || !Number.isFinite(claims.exp)) throw invalid('no expiry');
  if (claims.exp + leeway <= now) throw invalid('expired');
  if (typeof claims.iat !== 'number' || !Number.isFinite(claims.iat)) throw invalid('no issue time');
  if (claims.iat - leeway > now) throw invalid('issued in the future');
  if (claims.nbf !== undefined && (typeof claims.nbf !== 'number' || claims.nbf - leeway > now)) throw invalid('not yet valid');
  return claims as JwtClaims;
}

function invalid(why: string): InvalidTokenError {
  return new InvalidTokenError(`invalid token: ${why}`);
}

function decode(part: string, what: string): Buffer {
  const bytes = Buffer.from(part, 'base64url');
  // Only the canonical encoding: no stray bits in the last character.
  if (bytes.toString('base64url') !== part) throw invalid(`malformed ${what}`);
  return bytes;
}

function decodeJson(part: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(decode(part, what)));
  } catch (error) {
    if (error instanceof InvalidTokenError) throw error;
    throw invalid(`malformed ${what}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalid(`malformed ${what}`);
  return value as Record<string, unknown>;
}

// ---------- public key cache, per signer ----------

interface KeyCache {
  keys: Map<string, KeyObject>;
  fetchedAt: number;
  /** When an unknown key id last caused a refresh. */
  missRefreshAt: number;
  refreshing?: Promise<void>;
}

const keyCaches = new WeakMap<Signer, KeyCache>();
/** The key id each signer last signed with: the header's first guess. */
const lastKid = new WeakMap<Signer, string>();

async function publicKey(signer: Signer, kid: string, nowMs: number): Promise<KeyObject | undefined> {
  let cache = keyCaches.get(signer);
  if (!cache) {
    cache = { keys: new Map(), fetchedAt: -Infinity, missRefreshAt: -Infinity };
    keyCaches.set(signer, cache);
  }
  if (nowMs - cache.fetchedAt >= KEY_TTL_MS) {
    try {
      await refresh(signer, cache, nowMs);
    } catch (error) {
      if (!cache.keys.has(kid)) throw error;
      // The key service is down but this key is known: keep verifying with what we have, and ask
      // again in a minute rather than on every request.
      cache.fetchedAt = nowMs - KEY_TTL_MS + UNKNOWN_KID_REFRESH_MS;
    }
  } else if (!cache.keys.has(kid) && nowMs - cache.missRefreshAt >= UNKNOWN_KID_REFRESH_MS) {
    cache.missRefreshAt = nowMs;
    await refresh(signer, cache, nowMs);
  }
  return cache.keys.get(kid);
}

function refresh(signer: Signer, cache: KeyCache, nowMs: number): Promise<void> {
  cache.refreshing ??= (async () => {
    try {
      const jwks = await signer.publicKeys();
      cache.keys = new Map(jwks.map((jwk) => [jwk.kid, toKeyObject(jwk)]));
      cache.fetchedAt = nowMs;
    } finally {
      cache.refreshing = undefined;
    }
  })();
  return cache.refreshing;
}

function toKeyObject(jwk: PublicJwk): KeyObject {
  return createPublicKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, y: jwk.y }, format: 'jwk' });
}

/** Forgets cached public keys (tests, or an operator-forced reload). */
export function clearJwtKeyCache(signer: Signer): void {
  keyCaches.delete(signer);
  lastKid.delete(signer);
}
