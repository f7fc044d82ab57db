/**
 * An organization's AI settings: the grantable chat fields it was granted (spec 4.3), its limits
 * (requests and tokens a minute, concurrent calls, budget in USD; limits.ts), the most a knowledge
 * job may be priced at, the features switched off, and whether its writes
 * need an X-Operation-Id (docs/decisions/operation-ids-optional.md). One item per
 * organization, `org#<id>` / `ai-settings`, read through a cache of MODEL_ROUTES_CACHE_MS as the
 * routes are: a change made with the admin CLI reaches a running server within that time.
 */
import type { KeyValueStore } from '../engine/ports.js';
import { settings } from '../shared/settings.js';
import { TtlCache } from '../shared/ttl-cache.js';

/** Chat fields accepted only when the organization was granted them (spec 4.3). */
export const GRANTABLE_FIELDS = ['n', 'service_tier', 'store', 'metadata', 'modalities', 'audio', 'web_search_options'] as const;
export type GrantableField = (typeof GRANTABLE_FIELDS)[number];

export interface AiLimits {
  /** Requests a minute. */
  rpm: number | null;
  /** Tokens (input and output) a minute. */
  tpm: number | null;
  /** Calls running at once. */
  concurrency: number | null;
  /** USD the organization may spend in all (priced routes only). */
  budget_usd: number | null;
}

/** An organization's limits: its calls' (AiLimits, which a secret key may also have) and its knowledge jobs'. */
export interface OrgAiLimits extends AiLimits {
  /**
   * The highest `max_price_usd` a knowledge job may be started with (above it: 403 budget_exceeded,
   * spec 4.8). Not a limit of calls: admitting a call never reads it. Null: no cap.
   */
  knowledge_job_cap_usd: number | null;
  /** The most `keep_source_hours` a knowledge job may ask (spec 4.8's "within the organization cap"). Null: 168, the spec's most. */
  knowledge_keep_source_hours: number | null;
}

/**
 * `required` (spec 4.1, the default): a write without X-Operation-Id is 400 missing_operation_id.
 * `optional`: the SDKs' own Idempotency-Key stands in for it, and a write with neither runs under an
 * id made up for it, never replayed.
 */
export const OPERATION_ID_MODES = ['required', 'optional'] as const;
export type OperationIdMode = (typeof OPERATION_ID_MODES)[number];

/** Features an organization can be switched off from (`org features`); switching off keeps the data. */
export const FEATURES = ['vector', 'collections', 'knowledge'] as const;
export type Feature = (typeof FEATURES)[number];

export interface AiSettings {
  organization_id: string;
  granted_fields: GrantableField[];
  limits: OrgAiLimits;
  operation_ids: OperationIdMode;
  disabled_features: Feature[];
}

export const NO_LIMITS: AiLimits = { rpm: null, tpm: null, concurrency: null, budget_usd: null };
export const NO_ORG_LIMITS: OrgAiLimits = { ...NO_LIMITS, knowledge_job_cap_usd: null, knowledge_keep_source_hours: null };
const key = (organizationId: string) => ({ pk: `org#${organizationId}`, sk: 'ai-settings' });
const cache = new TtlCache<AiSettings>();

export class OrgSettingsError extends Error {
  override name = 'OrgSettingsError';
}

export class AiOrgSettings {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  get(organizationId: string): Promise<AiSettings> {
    return cache.getOrLoad(organizationId, this.now(), settings().modelRoutesCacheMs, () => this.read(organizationId));
  }

  private async read(organizationId: string): Promise<AiSettings> {
    const item = await this.kv.get(key(organizationId));
    return {
      organization_id: organizationId,
      granted_fields: (item?.granted_fields as GrantableField[] | undefined) ?? [],
      limits: { ...NO_ORG_LIMITS, ...((item?.limits as Partial<OrgAiLimits> | undefined) ?? {}) },
      operation_ids: item?.operation_ids === 'optional' ? 'optional' : 'required',
      disabled_features: ((item?.disabled_features as string[] | undefined) ?? []).filter((f): f is Feature => (FEATURES as readonly string[]).includes(f)),
    };
  }

  private async write(organizationId: string, change: (current: AiSettings) => AiSettings): Promise<AiSettings> {
    const next = change(await this.read(organizationId));
    await this.kv.put({
      ...key(organizationId),
      granted_fields: next.granted_fields,
      limits: { ...next.limits },
      operation_ids: next.operation_ids,
      disabled_features: next.disabled_features,
    });
    cache.delete(organizationId);
    return next;
  }

  grantField(organizationId: string, field: string): Promise<AiSettings> {
    const f = grantable(field);
    return this.write(organizationId, (s) => ({ ...s, granted_fields: [...new Set([...s.granted_fields, f])] }));
  }

  revokeField(organizationId: string, field: string): Promise<AiSettings> {
    const f = grantable(field);
    return this.write(organizationId, (s) => ({ ...s, granted_fields: s.granted_fields.filter((g) => g !== f) }));
  }

  /** Sets the given limits; null lifts one, absent leaves it. */
  setLimits(organizationId: string, limits: Partial<OrgAiLimits>): Promise<AiSettings> {
    return this.write(organizationId, (s) => ({ ...s, limits: { ...s.limits, ...limits } }));
  }

  setOperationIds(organizationId: string, mode: string): Promise<AiSettings> {
    if (!(OPERATION_ID_MODES as readonly string[]).includes(mode)) throw new OrgSettingsError(`operation ids must be one of ${OPERATION_ID_MODES.join(', ')}`);
    return this.write(organizationId, (s) => ({ ...s, operation_ids: mode as OperationIdMode }));
  }

  /** Switches features off (`disable`) or on again (`enable`); the data they hold is kept either way. */
  setFeatures(organizationId: string, change: { disable?: string[]; enable?: string[] }): Promise<AiSettings> {
    const named = [...(change.disable ?? []), ...(change.enable ?? [])];
    const unknown = named.filter((f) => !(FEATURES as readonly string[]).includes(f));
    if (unknown.length) throw new OrgSettingsError(`unknown features: ${unknown.join(', ')} (features: ${FEATURES.join(', ')})`);
    return this.write(organizationId, (s) => {
      const off = new Set<Feature>(s.disabled_features);
      for (const f of change.disable ?? []) off.add(f as Feature);
      for (const f of change.enable ?? []) off.delete(f as Feature);
      return { ...s, disabled_features: FEATURES.filter((f) => off.has(f)) };
    });
  }
}

function grantable(field: string): GrantableField {
  if (!(GRANTABLE_FIELDS as readonly string[]).includes(field)) throw new OrgSettingsError(`field must be one of ${GRANTABLE_FIELDS.join(', ')}`);
  return field as GrantableField;
}
