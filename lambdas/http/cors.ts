/**
 * CORS for the Data and Events APIs. Browsers may read an answer only from an origin that a live
 * publishable key lists: the caller's own key when it is one, otherwise any key (preflights carry no
 * credential, so the origin index decides). The AI API is for servers and answers no CORS at all.
 */
import type { Engine } from '../engine/ports.js';
import type { Principal } from '../auth/principal.js';
import { PublishableKeys } from '../auth/publishable-keys.js';
import { settings } from '../shared/settings.js';
import { TtlCache } from '../shared/ttl-cache.js';

/** Request headers a browser may send: the credential, JSON, and the Data API's version preconditions. */
export const ALLOWED_HEADERS = 'authorization, content-type, if-match, if-none-match';
/** Response headers a page may read besides the simple ones. */
export const EXPOSED_HEADERS = 'etag, location, x-request-id';
export const PREFLIGHT_MAX_AGE_SECONDS = 600;

const listed = new TtlCache<Set<string>>();
const LISTED_CACHE_MS = 30_000;

async function applicationsListing(engine: Engine, origin: string): Promise<Set<string>> {
  const now = engine.clock.now();
  const hit = listed.get(origin, now);
  if (hit) return hit;
  const apps = await new PublishableKeys(engine.kv, () => now).applicationsListing(origin);
  // A disabled key's origins leave as fast as the key itself stops working.
  listed.set(origin, apps, now + Math.min(LISTED_CACHE_MS, settings().credentialCacheMs));
  return apps;
}

export async function originAllowed(engine: Engine, origin: string, principal?: Principal): Promise<boolean> {
  if (principal?.kind === 'publishable_key') return principal.origins!.includes(origin);
  const apps = await applicationsListing(engine, origin);
  return principal?.applicationId ? apps.has(principal.applicationId) : apps.size > 0;
}

/** Headers for an answer to a request that carried `Origin` (always `Vary: Origin`, since they depend on it). */
export async function corsHeaders(engine: Engine, origin: string, principal?: Principal): Promise<Record<string, string>> {
  if (!(await originAllowed(engine, origin, principal))) return { vary: 'Origin' };
  return { vary: 'Origin', 'access-control-allow-origin': origin, 'access-control-expose-headers': EXPOSED_HEADERS };
}
