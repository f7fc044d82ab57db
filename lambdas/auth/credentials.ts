/**
 * Credential resolution (spec section 5). A resolved credential is cached for a short time so the hot
 * path does not read the store on every call; a disabled key or organization still stops working
 * within CREDENTIAL_CACHE_MS (default 30 s, well inside rule 5's minute).
 */
import type { Engine } from '../engine/ports.js';
import { ApiError } from '../http/errors.js';
import type { Principal } from './principal.js';
import { SECRET_KEY_PATTERN, hashSecret } from './secret-keys.js';
import { Tenants } from './tenants.js';

interface Resolved {
  principal: Principal;
  keyDisabled: boolean;
  organizationDisabled: boolean;
}

interface Entry {
  resolved: Resolved | undefined;
  until: number;
}

const MAX_ENTRIES = 10_000;
const cache = new Map<string, Entry>();

export const cacheMs = () => Number(process.env.CREDENTIAL_CACHE_MS ?? 30_000);

/** Unknown credentials are cached briefly too, so a flood of bad keys cannot hammer the store. */
const NEGATIVE_CACHE_MS = 5_000;

export const missingCredentials = () =>
  new ApiError(401, 'missing_credentials', 'Send your credential as "Authorization: Bearer <credential>".');
export const invalidCredentials = () => new ApiError(401, 'invalid_credentials', 'The credential is malformed, unknown or expired.');

export function bearerToken(authorization: string | undefined): string {
  if (!authorization || !authorization.trim()) throw missingCredentials();
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  if (!match) throw invalidCredentials();
  return match[1];
}

async function resolveSecretKey(engine: Engine, secret: string): Promise<Resolved | undefined> {
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const key = await tenants.findSecretKey(secret);
  if (!key) return undefined;
  const [org, app] = await Promise.all([
    tenants.getOrganization(key.organization_id),
    key.application_id ? tenants.getApplication(key.application_id) : Promise.resolve(undefined),
  ]);
  if (!org || (key.application_id && !app)) return undefined;
  return {
    principal: {
      kind: 'secret_key',
      credentialId: key.id,
      organizationId: org.id,
      applicationId: app?.id ?? null,
      workspaceId: app?.workspace_id ?? null,
      capabilities: app ? app.capabilities : null,
    },
    keyDisabled: key.disabled,
    organizationDisabled: org.disabled,
  };
}

/** Resolves the Authorization header to a principal, or throws the spec's 401/403 error. */
export async function authenticate(engine: Engine, authorization: string | undefined): Promise<Principal> {
  const token = bearerToken(authorization);
  if (!SECRET_KEY_PATTERN.test(token)) throw invalidCredentials();

  const cacheKey = hashSecret(token);
  const now = engine.clock.now();
  let entry = cache.get(cacheKey);
  if (!entry || entry.until <= now) {
    const resolved = await resolveSecretKey(engine, token);
    entry = { resolved, until: now + (resolved ? cacheMs() : Math.min(cacheMs(), NEGATIVE_CACHE_MS)) };
    if (cache.size >= MAX_ENTRIES) cache.delete(cache.keys().next().value as string);
    cache.set(cacheKey, entry);
  }
  const resolved = entry.resolved;
  if (!resolved) throw invalidCredentials();
  if (resolved.organizationDisabled) throw new ApiError(403, 'organization_disabled', 'The organization is disabled.');
  if (resolved.keyDisabled) throw new ApiError(403, 'key_disabled', 'This key is disabled.');
  return resolved.principal;
}

/** For tests that change keys underneath a running process. */
export function clearCredentialCache(): void {
  cache.clear();
}
