/**
 * The model routes a secret key may call (`key routes` in the admin CLI; docs/decisions/ai-key-routes.md),
 * as LiteLLM's and Portkey's keys carry a list of allowed models. Item `keyid#<key id>` / `ai-key-routes`,
 * next to the key's id pointer, `{ routes: [...] }`; no item, or `routes: null`, is every route of the
 * organization. A call to another route, named or reached as the default, is `403 route_forbidden`, and
 * `GET /v1/models` lists only the key's routes. Cached as the routes are (MODEL_ROUTES_CACHE_MS).
 */
import type { Principal } from '../auth/principal.js';
import { secretKeyPointer } from '../auth/tenants.js';
import type { Engine, KeyValueStore, KvKey } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { settings } from '../shared/settings.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { ROUTE_ID_PATTERN, type ModelRoute } from './model-routes.js';

export class AiKeyRoutesError extends Error {
  override name = 'AiKeyRoutesError';
}

const itemKey = (keyId: string): KvKey => ({ ...secretKeyPointer(keyId), sk: 'ai-key-routes' });
/** null: every route. */
const cache = new TtlCache<readonly string[] | null>();

export class AiKeyRoutes {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  /** The route ids the key may call, or null for all of its organization's. */
  get(keyId: string): Promise<readonly string[] | null> {
    return cache.getOrLoad(keyId, this.now(), settings().modelRoutesCacheMs, () => this.read(keyId));
  }

  private async read(keyId: string): Promise<readonly string[] | null> {
    const routes = (await this.kv.get(itemKey(keyId)))?.routes;
    return Array.isArray(routes) ? routes.filter((r): r is string => typeof r === 'string') : null;
  }

  /** Sets the routes of an existing secret key (null: every route again). Ids are not checked against the routes: a route may be added later. */
  async set(keyId: string, routes: string[] | null): Promise<{ key_id: string; routes: string[] | null }> {
    if (!(await this.kv.get(secretKeyPointer(keyId)))) throw new AiKeyRoutesError(`no secret key ${keyId}`);
    if (routes !== null && (!routes.length || routes.some((r) => !ROUTE_ID_PATTERN.test(r)))) {
      throw new AiKeyRoutesError('routes must be a comma-separated list of route ids');
    }
    const unique = routes === null ? null : [...new Set(routes)];
    await this.kv.put({ ...itemKey(keyId), key_id: keyId, routes: unique });
    cache.delete(keyId);
    return { key_id: keyId, routes: unique };
  }
}

/** The routes of `all` that `principal` may call: all of them unless it is a secret key with its own list. */
export async function routesFor(engine: Engine, principal: Principal, all: readonly ModelRoute[]): Promise<readonly ModelRoute[]> {
  const allowed = await allowedRoutes(engine, principal);
  return allowed === null ? all : all.filter((r) => allowed.includes(r.id));
}

/** Throws 403 route_forbidden when `principal` (a secret key with its own list) may not call `route` (chat.ts resolveRoute asks, for every endpoint). */
export async function checkRouteAllowed(engine: Engine, principal: Principal, route: Pick<ModelRoute, 'id'>): Promise<void> {
  const allowed = await allowedRoutes(engine, principal);
  if (allowed !== null && !allowed.includes(route.id)) {
    throw new PlatformError('route_forbidden', `This key may not call the route "${route.id}". GET /v1/models lists the routes it may call.`, 'model');
  }
}

function allowedRoutes(engine: Engine, principal: Principal): Promise<readonly string[] | null> {
  if (principal.kind !== 'secret_key') return Promise.resolve(null);
  return new AiKeyRoutes(engine.kv, () => engine.clock.now()).get(principal.credentialId);
}
