/**
 * Model routes: per organization, the ids clients send as `model`. Stored as org#<id> / route#<route id>.
 * One route per endpoint may be the default (used for `model: "auto"` or no model).
 */
import * as z from 'zod/mini';
import type { KeyValueStore, KvWrite } from '../engine/ports.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { settings } from '../shared/settings.js';
import { onFirstUse } from '../shared/validate.js';

/**
 * `/v1/audio/transcriptions` has no public route: it is the upstream endpoint knowledge processing
 * transcribes recordings with (the organization's default route of it; docs/decisions/knowledge-media.md).
 */
export const ENDPOINTS = ['/v1/chat/completions', '/v1/embeddings', '/v1/run', '/v1/audio/transcriptions'] as const;
export type Endpoint = (typeof ENDPOINTS)[number];
export const PROVIDERS = ['openai-compatible', 'bedrock', 'http', 'decision'] as const;
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
  /** Ceiling of output tokens per call; a request's max_tokens only lowers it. Null: the upstream's own. */
  max_tokens: number | null;
  /** False: a chat request with `tools` is refused (400 unsupported_field_for_route). */
  tools: boolean;
  /** Upstream timeout per call, ms (default DEFAULT_TIMEOUT_MS). */
  timeout_ms: number | null;
  /** Decision routes: the chat routes of its tiers, weakest first. */
  tiers: string[] | null;
  /** USD per million input / output tokens: the cost recorded and charged against the budget. */
  price_in_per_mtok: number | null;
  price_out_per_mtok: number | null;
  /**
   * `/v1/audio/transcriptions` routes only: USD per minute of audio, charged on the seconds the call
   * transcribed (whisper-style upstreams bill audio, not tokens). Null: audio is not priced.
   */
  price_per_minute: number | null;
  /**
   * Where the upstream API key is: the name of an environment variable (local) or of a Secrets Manager
   * secret (AWS), read once per instance (providers/credentials.ts). Never the key itself.
   */
  api_key_env: string | null;
  /**
   * openai-compatible and http routes: the most bytes of a JSON answer read (default MAX_ANSWER_BYTES,
   * 32 MiB), and of one line or event of a streamed answer (default MAX_EVENT_BYTES, 1 MiB); past
   * them the call is 502 upstream_error (providers/upstream-http.ts). Optional: routes stored before.
   */
  max_answer_bytes?: number | null;
  max_event_bytes?: number | null;
}

/** `GET /v1/models` (spec 4.2): the routes as OpenAI-style model entries (spec 2, "Route"). */
export const modelListSchema = onFirstUse(() =>
  z.strictObject({
    object: z.literal('list'),
    data: z.array(
      z
        .strictObject({
          id: z.string().check(z.describe('The route id, sent as `model`.')),
          object: z.literal('model'),
          created: z.int().check(z.describe('Unix seconds.')),
          owned_by: z.string(),
          endpoint: z.enum(ENDPOINTS).check(z.describe('Where the route is called. `/v1/audio/transcriptions`: the route knowledge processing transcribes recordings with, not called directly.')),
        })
        .check(z.meta({ id: 'Route' })),
    ),
  }),
);

export type ModelList = z.output<ReturnType<typeof modelListSchema>>;

/** The model list of `routes`. */
export const modelListOf = (routes: readonly ModelRoute[]): ModelList => ({
  object: 'list',
  data: routes.map((r) => ({ id: r.id, object: 'model', created: r.created, owned_by: r.owned_by, endpoint: r.endpoint })),
});

/**
 * The highest answer cap a route may set: 256 MiB, half of the longest string V8 makes (a bigger
 * answer could not be turned into text at all).
 */
export const MAX_CAP_BYTES = 256 * 1024 * 1024;

/** Upstream timeout when a route sets none. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** A route's upstream timeout, ms: its own, else the default. */
export const timeoutOf = (route: Pick<ModelRoute, 'timeout_ms'>): number => route.timeout_ms ?? DEFAULT_TIMEOUT_MS;

/** The options a route has when `route set` gives none (and a route stored before they existed). */
export const ROUTE_DEFAULTS = {
  max_tokens: null,
  tools: true,
  timeout_ms: null,
  tiers: null,
  price_in_per_mtok: null,
  price_out_per_mtok: null,
  price_per_minute: null,
  api_key_env: null,
  max_answer_bytes: null,
  max_event_bytes: null,
} as const satisfies Partial<ModelRoute>;

/** A stored route with the fields added since it was written filled with their defaults. */
function normalized(stored: Record<string, unknown>): ModelRoute {
  return { ...ROUTE_DEFAULTS, ...stored } as ModelRoute;
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
  max_tokens?: number;
  tools?: boolean;
  timeout_ms?: number;
  tiers?: string[];
  price_in_per_mtok?: number;
  price_out_per_mtok?: number;
  price_per_minute?: number;
  api_key_env?: string;
  max_answer_bytes?: number;
  max_event_bytes?: number;
}

/** Which endpoints each provider serves. */
const PROVIDER_ENDPOINTS: Record<Provider, readonly Endpoint[]> = {
  'openai-compatible': ['/v1/chat/completions', '/v1/embeddings', '/v1/audio/transcriptions'],
  bedrock: ['/v1/chat/completions', '/v1/embeddings'],
  http: ['/v1/run'],
  decision: ['/v1/run'],
};
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_./-]{0,255}$/;

const key = (organizationId: string, routeId: string) => ({ pk: `org#${organizationId}`, sk: `route#${routeId}` });
/**
 * A route stamped on a vector database (lambdas/vector/databases.ts) is marked `org#<org>` /
 * `vector-route#<route>#<workspace>`: its upstream model then changes only when forced.
 */
export const vectorStampKey = (organizationId: string, routeId: string, workspaceId: string) => ({ pk: `org#${organizationId}`, sk: `vector-route#${routeId}#${workspaceId}` });

/**
 * Every AI call reads its organization's routes, so a process keeps them for MODEL_ROUTES_CACHE_MS
 * (default 1 s): a change made elsewhere (the admin CLI, another function) reaches it within that time.
 */
const cache = new TtlCache<ModelRoute[]>();

export class ModelRoutes {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  list(organizationId: string): Promise<ModelRoute[]> {
    return cache.getOrLoad(organizationId, this.now(), settings().modelRoutesCacheMs, () => this.read(organizationId));
  }

  private async read(organizationId: string): Promise<ModelRoute[]> {
    const routes: ModelRoute[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ pk: `org#${organizationId}`, sk: { beginsWith: 'route#' }, cursor });
      for (const { pk: _pk, sk: _sk, ...route } of page.items) routes.push(normalized(route));
      cursor = page.cursor;
    } while (cursor);
    return routes;
  }

  /**
   * Creates or replaces a route; making it the default clears the flag on the endpoint's other routes
   * in the same transaction. A route stamped on a vector database keeps its upstream (provider, URL,
   * model, endpoint) unless `force`: vectors of two models in one database would compare as noise.
   */
  async set(organizationId: string, input: RouteInput, options: { force?: boolean } = {}): Promise<ModelRoute> {
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
      // A route stores no secret (docs/decisions/ai-upstream-secrets.md): `route list` would show it.
      if (url.username || url.password) throw new ModelRouteError('base_url must not carry credentials (user:password@); name the upstream key with --api-key-env');
    }
    const provider = input.provider as Provider;
    if (!PROVIDER_ENDPOINTS[provider].includes(input.endpoint as Endpoint)) {
      throw new ModelRouteError(`provider ${provider} serves ${PROVIDER_ENDPOINTS[provider].join(', ')}, not ${input.endpoint}`);
    }
    if ((provider === 'http' || provider === 'openai-compatible') && input.base_url === undefined) throw new ModelRouteError(`provider ${provider} needs --base-url`);
    for (const [name, value] of [['max_tokens', input.max_tokens], ['timeout_ms', input.timeout_ms]] as const) {
      if (value !== undefined && !(Number.isInteger(value) && value >= 1 && value <= 10_000_000)) throw new ModelRouteError(`${name} must be a whole number from 1`);
    }
    for (const [name, value] of [['max_answer_bytes', input.max_answer_bytes], ['max_event_bytes', input.max_event_bytes]] as const) {
      if (value !== undefined && !(Number.isInteger(value) && value >= 1024 && value <= MAX_CAP_BYTES)) throw new ModelRouteError(`${name} must be a whole number of bytes from 1024 to ${MAX_CAP_BYTES}`);
      if (value !== undefined && provider !== 'http' && provider !== 'openai-compatible') throw new ModelRouteError(`${name} is for openai-compatible and http routes only`);
    }
    for (const [name, value] of [['price_in_per_mtok', input.price_in_per_mtok], ['price_out_per_mtok', input.price_out_per_mtok]] as const) {
      if (value !== undefined && !(Number.isFinite(value) && value >= 0 && value <= 1_000_000)) throw new ModelRouteError(`${name} must be a number of USD from 0`);
    }
    if (input.price_per_minute !== undefined) {
      if (!(Number.isFinite(input.price_per_minute) && input.price_per_minute >= 0 && input.price_per_minute <= 1_000_000)) throw new ModelRouteError('price_per_minute must be a number of USD from 0');
      // Only a transcription has minutes of audio to charge; on another endpoint the price would never apply.
      if (input.endpoint !== '/v1/audio/transcriptions') {
        throw new ModelRouteError(`price_per_minute prices minutes of audio: it is for /v1/audio/transcriptions routes only, not ${input.endpoint} (price tokens with --price-in-per-mtok, --price-out-per-mtok)`);
      }
    }
    if (input.api_key_env !== undefined && !ENV_NAME.test(input.api_key_env)) throw new ModelRouteError('api_key_env names an environment variable or a secret, not a key');
    const existing = await this.read(organizationId);
    if (provider === 'decision') {
      if (!input.tiers?.length) throw new ModelRouteError('a decision route needs --tiers: its chat routes, weakest first');
      for (const tier of input.tiers) {
        if (!existing.some((r) => r.id === tier && r.endpoint === '/v1/chat/completions')) throw new ModelRouteError(`tier ${tier} is not a chat route of this organization`);
      }
    } else if (input.tiers !== undefined) throw new ModelRouteError('--tiers is for decision routes only');
    const previous = existing.find((r) => r.id === input.id);
    const upstreamChanges =
      previous &&
      (previous.endpoint !== input.endpoint || previous.provider !== input.provider || previous.base_url !== (input.base_url ?? null) || previous.upstream_model !== (input.upstream_model ?? null));
    if (upstreamChanges && !options.force) {
      const stamps = await this.kv.query({ pk: `org#${organizationId}`, sk: { beginsWith: vectorStampKey(organizationId, input.id, '').sk }, limit: 5 });
      if (stamps.items.length) {
        const workspaces = stamps.items.map((s) => s.workspace_id).join(', ');
        throw new ModelRouteError(
          `route ${input.id} embeds for the vector database of workspace ${workspaces}: another upstream model would mix its vectors with the stored ones. Re-create the database with the new route (vector-db delete, vector-db create), or pass --force to change it anyway (queries then answer 502 if the dimensions change).`,
        );
      }
    }
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
      max_tokens: input.max_tokens ?? null,
      tools: input.tools ?? true,
      timeout_ms: input.timeout_ms ?? null,
      tiers: input.tiers ?? null,
      price_in_per_mtok: input.price_in_per_mtok ?? null,
      price_out_per_mtok: input.price_out_per_mtok ?? null,
      price_per_minute: input.price_per_minute ?? null,
      api_key_env: input.api_key_env ?? null,
      max_answer_bytes: input.max_answer_bytes ?? null,
      max_event_bytes: input.max_event_bytes ?? null,
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
