/**
 * Credential resolution (spec section 5) for the four credentials: secret keys `aik_…`, publishable
 * keys `apb_…`, and signed tokens (OAuth client access tokens, end-user access tokens).
 *
 * A resolved credential is cached for CREDENTIAL_CACHE_MS (default 30 s) so the hot path neither reads
 * the store nor checks a signature on every call; a disabled key, a revoked OAuth client or a disabled
 * organization therefore stops working within that time, well inside rule 5's minute. A token's entry
 * never outlives the token.
 */
import type { Engine } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import type { Permission } from './permissions.js';
import type { Principal } from './principal.js';
import { SECRET_KEY_PATTERN, hashSecret } from './secret-keys.js';
import { PUBLISHABLE_KEY_PATTERN, PublishableKeys } from './publishable-keys.js';
import { OAuthClients } from './oauth-clients.js';
import { Tenants, type Application, type Organization } from './tenants.js';
import { verifyToken } from './tokens.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { settings } from '../shared/settings.js';

interface Resolved {
  principal: Principal;
  /** Why a recognised credential may not be used: 403 key_disabled (the key, or its application) / organization_disabled. */
  refusal?: 'key_disabled' | 'application_disabled' | 'organization_disabled';
  /** Unix ms after which the credential itself is invalid (token expiry). */
  expiresAt?: number;
}

/** Unknown credentials are cached briefly too, so a flood of bad ones cannot hammer the store. */
const NEGATIVE_CACHE_MS = 5_000;
const JWT_PATTERN = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
/** Resolved credentials by the hash of the token; null for one that resolved to nothing. */
const cache = new TtlCache<Resolved | null>();

export const missingCredentials = () =>
  new PlatformError('missing_credentials', 'Send your credential as "Authorization: Bearer <credential>".');
export const invalidCredentials = (message = 'The credential is malformed, unknown or expired.') =>
  new PlatformError('invalid_credentials', message);

export function bearerToken(authorization: string | undefined): string {
  if (!authorization || !authorization.trim()) throw missingCredentials();
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw invalidCredentials();
  return match[1];
}

const blank = { userId: null, claims: null, origins: null } as const;
/** What a publishable key may do on Events (spec 5 rule 6: open a stream, nothing else). */
export const PUBLISHABLE_KEY_PERMISSIONS: readonly Permission[] = Object.freeze(['events:stream.open']);
/** End-user tokens hold no Events permission (spec 5: nothing on Events). */
export const END_USER_PERMISSIONS: readonly Permission[] = Object.freeze([]);

function refusal(org: Organization, disabled: boolean, app?: Application | null): Resolved['refusal'] {
  if (org.disabled) return 'organization_disabled';
  if (app?.disabled) return 'application_disabled';
  return disabled ? 'key_disabled' : undefined;
}

async function resolve(engine: Engine, token: string): Promise<Resolved | undefined> {
  const now = () => engine.clock.now();
  const tenants = new Tenants(engine.kv, now);
  const orgAndApp = (orgId: string, appId: string | null) =>
    Promise.all([tenants.getOrganization(orgId), appId ? tenants.getApplication(appId) : Promise.resolve(undefined)]);

  if (SECRET_KEY_PATTERN.test(token)) {
    const key = await tenants.findSecretKey(token);
    if (!key) return undefined;
    const [org, app] = await orgAndApp(key.organization_id, key.application_id);
    if (!org || (key.application_id && !app)) return undefined;
    return { principal: principalFor('secret_key', key.id, org, app ?? null, key.permissions), refusal: refusal(org, key.disabled, app) };
  }

  if (PUBLISHABLE_KEY_PATTERN.test(token)) {
    const key = await new PublishableKeys(engine.kv, now).find(token);
    if (!key) return undefined;
    const [org, app] = await orgAndApp(key.organization_id, key.application_id);
    if (!org || !app) return undefined;
    return {
      principal: { ...principalFor('publishable_key', key.id, org, app, PUBLISHABLE_KEY_PERMISSIONS), origins: key.origins },
      refusal: refusal(org, key.disabled, app),
    };
  }

  if (JWT_PATTERN.test(token)) {
    const claims = await verifyToken(engine, token).catch(() => undefined);
    if (!claims) return undefined;
    const [org, app] = await orgAndApp(claims.org, claims.app);
    if (!org || !app || app.organization_id !== org.id) return undefined;
    const expiresAt = claims.exp * 1000;
    if (claims.kind === 'oauth_client') {
      // A revoked client's tokens are dead (rule 5), like any revoked bearer token: 401. Its permissions
      // come from the record too, not from the token: a narrowed client takes effect within the cache time.
      const client = await new OAuthClients(engine.kv, now).get(claims.sub);
      if (!client || client.revoked || client.application_id !== app.id) return undefined;
      return { principal: principalFor('oauth_client', client.client_id, org, app, client.permissions), refusal: refusal(org, false, app), expiresAt };
    }
    return {
      principal: { ...principalFor('end_user', claims.sub, org, app, END_USER_PERMISSIONS), userId: claims.sub, claims: claims.ext ?? {} },
      refusal: refusal(org, false, app),
      expiresAt,
    };
  }
  return undefined;
}

function principalFor(
  kind: Principal['kind'],
  credentialId: string,
  org: Organization,
  app: Application | null,
  permissions: readonly Permission[] | null,
): Principal {
  return {
    kind,
    credentialId,
    organizationId: org.id,
    applicationId: app?.id ?? null,
    workspaceId: app?.workspace_id ?? null,
    capabilities: app ? app.capabilities : null,
    permissions,
    ...blank,
  };
}

/** Resolves the Authorization header to a principal, or throws the spec's 401/403 error. */
export async function authenticate(engine: Engine, authorization: string | undefined): Promise<Principal> {
  const token = bearerToken(authorization);
  const cacheKey = hashSecret(token);
  const now = engine.clock.now();
  let resolved = cache.get(cacheKey, now);
  if (resolved === undefined) {
    resolved = (await resolve(engine, token)) ?? null;
    const until = now + (resolved ? settings().credentialCacheMs : Math.min(settings().credentialCacheMs, NEGATIVE_CACHE_MS));
    cache.set(cacheKey, resolved, Math.min(until, resolved?.expiresAt ?? until));
  }
  if (!resolved || (resolved.expiresAt !== undefined && resolved.expiresAt <= now)) throw invalidCredentials();
  if (resolved.refusal === 'organization_disabled') throw new PlatformError('organization_disabled', 'The organization is disabled.');
  if (resolved.refusal === 'key_disabled') throw new PlatformError('key_disabled', 'This key is disabled.');
  // The spec's code for a credential that may not be used; the message says it is the application's doing.
  if (resolved.refusal === 'application_disabled') throw new PlatformError('key_disabled', "This credential's application is disabled.");
  return resolved.principal;
}
