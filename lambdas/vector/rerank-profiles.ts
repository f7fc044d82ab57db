/**
 * Rerank profiles: per organization, the rerankers a vector query may name in `rerank_profile`.
 * Stored as org#<id> / rerank-profile#<name>, read through a per-process cache of
 * MODEL_ROUTES_CACHE_MS as model routes are (an organization's profiles change as rarely).
 */
import type { Engine, KeyValueStore } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import { ENV_NAME } from '../ai/model-routes.js';
import { RERANK_PROVIDERS, type RerankProviderName } from '../ai/providers/rerank/index.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { settings } from '../shared/settings.js';

export interface RerankProfile {
  id: string;
  organization_id: string;
  provider: RerankProviderName;
  /** openai-compatible: where `/rerank` is; bedrock: the endpoint, or null for the function's region. */
  base_url: string | null;
  /** The upstream model (bedrock: the reranking model's ARN or id). */
  model: string;
  /** Names the upstream key (an environment variable locally, a Secrets Manager secret in AWS), never the key. */
  api_key_env: string | null;
  /** The whole rerank call's deadline; past it the query answers in vector order (`rerank_timeout`). */
  timeout_ms: number;
  /** ISO 8601, kept when the profile is replaced. */
  created_at: string;
  updated_at: string;
}

export interface RerankProfileInput {
  id: string;
  provider: string;
  base_url?: string;
  model?: string;
  api_key_env?: string;
  timeout_ms?: number;
}

/** A profile that cannot be stored, or is not there: the message says what to do. */
export class RerankProfileError extends Error {
  override name = 'RerankProfileError';
}

export const PROFILE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
export const DEFAULT_RERANK_TIMEOUT_MS = 10_000;
export const MAX_RERANK_TIMEOUT_MS = 60_000;
const MAX_MODEL_LENGTH = 2048;

const PREFIX = 'rerank-profile#';
const key = (organizationId: string, name: string) => ({ pk: `org#${organizationId}`, sk: `${PREFIX}${name}` });

const cache = new TtlCache<RerankProfile[]>();

function checkedBaseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new RerankProfileError('base_url must be an absolute http(s) URL');
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new RerankProfileError('base_url must be an absolute http(s) URL');
  // A profile stores no secret: `rerank-profile list` shows it (docs/decisions/ai-upstream-secrets.md).
  if (url.username || url.password) throw new RerankProfileError('base_url must not carry credentials (user:password@); name the upstream key with --api-key-env');
  return value;
}

/** The profile `input` describes, or a RerankProfileError saying what to change. */
export function checkedProfile(organizationId: string, input: RerankProfileInput, now: number, previous?: RerankProfile): RerankProfile {
  if (!PROFILE_NAME.test(input.id)) throw new RerankProfileError('rerank profile id: 1 to 64 of letters, digits, "_", "-", "."');
  if (!RERANK_PROVIDERS.includes(input.provider as RerankProviderName)) throw new RerankProfileError(`provider must be one of ${RERANK_PROVIDERS.join(', ')}`);
  const provider = input.provider as RerankProviderName;
  if (provider === 'openai-compatible' && input.base_url === undefined) throw new RerankProfileError('provider openai-compatible needs --base-url (the server\'s, without /rerank: e.g. https://api.jina.ai/v1)');
  const base_url = input.base_url === undefined ? null : checkedBaseUrl(input.base_url);
  if (input.model === undefined || input.model.trim() === '' || input.model.length > MAX_MODEL_LENGTH) {
    throw new RerankProfileError(provider === 'bedrock' ? '--model is needed: the reranking model\'s ARN or id (e.g. amazon.rerank-v1:0)' : '--model is needed: the upstream\'s rerank model (e.g. jina-reranker-v2-base-multilingual)');
  }
  const timeout = input.timeout_ms ?? DEFAULT_RERANK_TIMEOUT_MS;
  if (!(Number.isInteger(timeout) && timeout >= 1 && timeout <= MAX_RERANK_TIMEOUT_MS)) throw new RerankProfileError(`timeout_ms must be a whole number from 1 to ${MAX_RERANK_TIMEOUT_MS}`);
  if (input.api_key_env !== undefined) {
    if (!ENV_NAME.test(input.api_key_env)) throw new RerankProfileError('api_key_env names an environment variable or a secret, not a key');
    // Bedrock is signed with the function's role: a key would never be sent.
    if (provider === 'bedrock') throw new RerankProfileError('a bedrock profile takes no --api-key-env: Bedrock calls are signed with the function\'s role');
  }
  const at = new Date(now).toISOString();
  return {
    id: input.id,
    organization_id: organizationId,
    provider,
    base_url,
    model: input.model,
    api_key_env: input.api_key_env ?? null,
    timeout_ms: timeout,
    created_at: previous?.created_at ?? at,
    updated_at: at,
  };
}

export class RerankProfiles {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  /** The organization's profiles, by id, as a running server sees them (cached). */
  list(organizationId: string): Promise<RerankProfile[]> {
    return cache.getOrLoad(organizationId, this.now(), settings().modelRoutesCacheMs, () => this.read(organizationId));
  }

  private async read(organizationId: string): Promise<RerankProfile[]> {
    const profiles: RerankProfile[] = [];
    let cursor: string | undefined;
    do {
      const page = await this.kv.query({ pk: `org#${organizationId}`, sk: { beginsWith: PREFIX }, cursor });
      for (const { pk: _pk, sk: _sk, ...profile } of page.items) profiles.push(profile as unknown as RerankProfile);
      cursor = page.cursor;
    } while (cursor);
    return profiles;
  }

  /** Creates or replaces a profile. */
  async set(organizationId: string, input: RerankProfileInput): Promise<RerankProfile> {
    const previous = (await this.read(organizationId)).find((p) => p.id === input.id);
    const profile = checkedProfile(organizationId, input, this.now(), previous);
    await this.kv.put({ ...key(organizationId, profile.id), ...profile });
    cache.delete(organizationId);
    return profile;
  }

  async delete(organizationId: string, name: string): Promise<{ id: string; deleted: true }> {
    try {
      await this.kv.delete(key(organizationId, name), { ifExists: true });
    } catch (error) {
      if (error instanceof ConditionFailedError) throw new RerankProfileError(`no rerank profile ${name} in organization ${organizationId} (rerank-profile list shows them)`);
      throw error;
    }
    cache.delete(organizationId);
    return { id: name, deleted: true };
  }
}

/** The profile a query names, or undefined when the organization has none by that name (cached). */
export async function lookupRerankProfile(engine: Engine, organizationId: string, name: string): Promise<RerankProfile | undefined> {
  const profiles = await new RerankProfiles(engine.kv, () => engine.clock.now()).list(organizationId);
  return profiles.find((p) => p.id === name);
}
