/**
 * The platform's signed tokens (ES256 JWTs, see jwt.ts): OAuth client access tokens and end-user
 * access tokens. `kind` says which; custom end-user claims travel under `ext` so they can never
 * shadow a claim the platform reads.
 */
import type { Engine } from '../engine/ports.js';
import { signJwt, verifyJwt } from './jwt.js';

export const ISSUER = 'platform';
export const AUDIENCE = 'platform';
export const CLIENT_TOKEN_TTL_SECONDS = 3600;

export interface TokenClaims {
  kind: 'oauth_client' | 'end_user';
  /** The client id, or the application's user id. */
  sub: string;
  org: string;
  app: string;
  ws: string;
  exp: number;
  ext?: Record<string, unknown>;
}

interface Subject {
  kind: TokenClaims['kind'];
  subject: string;
  organizationId: string;
  applicationId: string;
  workspaceId: string;
  ext?: Record<string, unknown>;
}

export async function issueToken(engine: Engine, who: Subject, ttlSeconds: number): Promise<{ token: string; expiresAt: number }> {
  const nowMs = engine.clock.now();
  const claims: Record<string, unknown> = { kind: who.kind, org: who.organizationId, app: who.applicationId, ws: who.workspaceId };
  if (who.ext && Object.keys(who.ext).length) claims.ext = who.ext;
  const token = await signJwt(engine.signer, claims, { audience: AUDIENCE, issuer: ISSUER, ttlSeconds, nowMs, subject: who.subject });
  return { token, expiresAt: Math.floor(nowMs / 1000) + ttlSeconds };
}

/** Verifies signature, audience and expiry; throws InvalidTokenError otherwise. */
export async function verifyToken(engine: Engine, token: string): Promise<TokenClaims> {
  const claims = (await verifyJwt(engine.signer, token, { audience: AUDIENCE, nowMs: engine.clock.now() })) as unknown as TokenClaims;
  if ((claims.kind !== 'oauth_client' && claims.kind !== 'end_user') || !claims.sub || !claims.org || !claims.app) {
    throw new Error('token lacks platform claims');
  }
  return claims;
}
