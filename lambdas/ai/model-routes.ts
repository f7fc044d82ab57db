/**
 * Model routes: per organization, the ids clients send as `model`. Stored as org#<id> / route#<route id>.
 * One route per endpoint may be the default (used for `model: "auto"` or no model).
 */
import type { KeyValueStore, KvWrite } from '../engine/ports.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { settings } from '../shared/settings.js';

export const ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/run'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];
export const PROVIDERS = ['openai-compatible', 'bedrock'] as const;
export type Provider = (typeof PROVIDERS)[number];

/** Route ids travel as `model`: keep them to characters model names use. `auto` means "the default". */
export const ROUTE_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$/;

export interface ModelRoute {
  id: string;
  organization_id: string;
  endpoint: Endpoint;
  provider: Provider;
  base_url: string | null;
  /** The upstream model name the provider is called with. */
  upstream_model: string | null;
  default: boolean;
  owned_by: string;
  /** Unix seconds. */
  created: number;
}

export class ModelRouteError extends Error {
  override name = 'ModelRouteError';
}

export interface RouteInput {
  id: string;
  endpoint: string;
  provider: string;
  base_url?: string;
  upstream_model?: string;
  default?: boolean;
}

const key = (organizationId: string, routeId: string) => ({ pk: `org#${organizationId}`, sk: `route#${routeId}` });

/**
 * Every AI call reads its organization's routes, so a process keeps them for MODEL_ROUTES_CACHE_MS
 * (default 1 s): a change made elsewhere (the admin CLI, another function) reaches it within that time.
 */
const cache = new TtlCache<ModelRoute[]>();

export class ModelRoutes {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  async list(organizationId: string): Promise<ModelRoute[]> {
    const now = this.now();
    const hit = cache.get(organizationId, now);
    if (hit) return hit;
    const routes = await this.read(organizationId);
    cache.set(organizationId, routes, now + settings().modelRoutesCacheMs);
    return routes;
  }

  private async read(organizationId: string): Promise<ModelRoute[]> {
    const routes: ModelRoute[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ pk: `org#${organizationId}`, sk: { beginsWith: 'route#' }, cursor });
      for (const { pk: _pk, sk: _sk, ...route } of page.items) routes.push(route as unknown as ModelRoute);
      cursor = page.cursor;
    } while (cursor);
    return routes;
  }

  /** Creates or replaces a route; making it the default clears the flag on the endpoint's other routes in the same transaction. */
  async set(organizationId: string, input: RouteInput): Promise<ModelRoute> {
    if (!ROUTE_ID_PATTERN.test(input.id) || input.id === 'auto') {
      throw new ModelRouteError('route id: 1 to 128 of letters, digits, ".", "_", ":", "/", "-", starting with a letter or digit; not "auto"');
    }
    if (!ENDPOINTS.includes(input.endpoint as Endpoint)) throw new ModelRouteError(`endpoint must be one of ${ENDPOINTS.join(', ')}`);
    if (!PROVIDERS.includes(input.provider as Provider)) throw new ModelRouteError(`provider must be one of ${PROVIDERS.join(', ')}`);
    if (input.base_url !== undefined) {
      let url: URL;
      try {
        url = new URL(input.base_url);
      } catch {
        throw new ModelRouteError('base_url must be an absolute http(s) URL');
      }
      if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new ModelRouteError('base_url must be an absolute http(s) URL');
    }
    const existing = await this.read(organizationId);
    const previous = existing.find((r) => r.id === input.id);
    const route: ModelRoute = {
      id: input.id,
      organization_id: organizationId,
      endpoint: input.endpoint as Endpoint,
      provider: input.provider as Provider,
      base_url: input.base_url ?? null,
      upstream_model: input.upstream_model ?? null,
      default: input.default ?? false,
      owned_by: organizationId,
      created: previous?.created ?? Math.floor(this.now() / 1000),
    };
    const writes: KvWrite[] = [{ put: { ...key(organizationId, route.id), ...route } }];
    if (route.default) {
      for (const other of existing) {
        if (other.id !== route.id && other.default && other.endpoint === route.endpoint) {
          writes.push({ update: key(organizationId, other.id), set: { default: false } });
        }
      }
    }
    await this.kv.transact(writes);
    cache.delete(organizationId);
    return route;
  }
}
