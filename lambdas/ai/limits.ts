/**
 * Limits of AI calls, per organization (AiOrgSettings) and per secret key where the
 * key has its own (`key limits` in the admin CLI): requests and tokens a minute, concurrent calls, and
 * a budget in USD. Every count is kept in the key-value store, so a limit holds across worker
 * processes and Lambda instances. See docs/decisions/ai-limits.md.
 *
 * | what | item | how |
 * |---|---|---|
 * | requests a minute | `rate#<b64("ai.rpm:<scope>")>` (counters.ts) | sliding-window take of 1 |
 * | tokens a minute | `rate#<b64("ai.tpm:<scope>")>` (counters.ts) | take of input estimate + output ceiling, corrected on settle |
 * | concurrent calls | `ailim#<scope>` / `conc` | one held unit in a deadline bucket (a counted hold, shared/leases.ts), checked against the live buckets |
 * | budget | `ailim#<scope>` / `budget` | `spent` (micro-USD) + the worst cost held in a deadline bucket |
 *
 * `<scope>` is `org#<organization id>` or `key#<key id>`.
 */
import type { Principal } from '../auth/principal.js';
import { secretKeyPointer } from '../auth/tenants.js';
import type { Engine, KeyValueStore, KvItem, KvKey } from '../engine/ports.js';
import { PlatformError, type ErrorCode } from '../shared/errors.js';
import { Counters, rateWindowKey, windowExpiry } from '../shared/counters.js';
import { holdMs } from '../shared/hold-margin.js';
import { addHold, liveHolds, releaseHold } from '../shared/leases.js';
import { log } from '../shared/log.js';
import { settings } from '../shared/settings.js';
import { TtlCache } from '../shared/ttl-cache.js';
import { timeoutOf, type ModelRoute } from './model-routes.js';
import { AiOrgSettings, NO_LIMITS, type AiLimits, type OrgAiLimits } from './org-settings.js';
import type { CallUsage } from './usage.js';

/** What a call may use, known before it runs (estimate.ts). */
export interface CallEstimate {
  /** Estimated input tokens: what tokens a minute take until the call settles with the real count. */
  inputTokens: number;
  /** The most input tokens the call can be charged: what the budget holds. */
  inputTokensBound: number;
  /** The output ceiling sent upstream. */
  maxOutputTokens: number;
  /**
   * A transcription: the most seconds of audio it can be charged (its piece's length), what the
   * budget holds on a route priced by the minute. Absent: no audio.
   */
  audioSeconds?: number;
}

/** An admitted call: settle once it ended with what it really used (releases its concurrency slot, settles its reserved cost). */
export interface Admission {
  settle(usage: CallUsage, costUsd: number): Promise<void>;
}

const MINUTE_MS = 60_000;
export const LIMITS_KEY_PREFIX = 'ailim#';

export const limitsStateKey = (scope: string, what: 'conc' | 'budget'): KvKey => ({ pk: `${LIMITS_KEY_PREFIX}${scope}`, sk: what });
export const orgScope = (organizationId: string) => `org#${organizationId}`;
export const keyScope = (keyId: string) => `key#${keyId}`;

/** USD to whole micro-USD, rounding up (a float's noise below a thousandth of a micro-USD ignored). */
export function microUsd(usd: number): number {
  if (!(usd > 0) || !Number.isFinite(usd)) return 0;
  return Math.ceil(Math.round(usd * 1e9) / 1e3);
}

/** The worst cost of a call, micro-USD: the bound of its input tokens, the whole output ceiling and its seconds of audio. */
export function worstCostMicro(route: ModelRoute, estimate: CallEstimate): number {
  const audioSeconds = estimate.audioSeconds !== undefined && Number.isFinite(estimate.audioSeconds) && estimate.audioSeconds > 0 ? estimate.audioSeconds : 0;
  // price per million tokens × tokens / 1e6 = USD; price per minute × seconds / 60 = USD.
  return microUsd(((route.price_in_per_mtok ?? 0) * estimate.inputTokensBound + (route.price_out_per_mtok ?? 0) * estimate.maxOutputTokens) / 1e6 + ((route.price_per_minute ?? 0) * audioSeconds) / 60);
}

const isPriced = (route: ModelRoute) => (route.price_in_per_mtok ?? 0) > 0 || (route.price_out_per_mtok ?? 0) > 0 || (route.price_per_minute ?? 0) > 0;

// ---------- limits of a key ----------

export class AiLimitsError extends Error {
  override name = 'AiLimitsError';
}

const keyLimitsKey = (keyId: string): KvKey => ({ ...secretKeyPointer(keyId), sk: 'ai-key-limits' });
const keyCache = new TtlCache<AiLimits>();

/** Checks limits given to the CLI: whole numbers from 1 (budget and knowledge job cap: USD from 0); null lifts one. */
export function checkLimits<L extends Partial<OrgAiLimits>>(limits: L): L {
  for (const name of ['rpm', 'tpm', 'concurrency'] as const) {
    const v = limits[name];
    if (v !== undefined && v !== null && !(Number.isSafeInteger(v) && v >= 1)) throw new AiLimitsError(`${name} must be a whole number from 1, or none`);
  }
  for (const name of ['budget_usd', 'knowledge_job_cap_usd'] as const) {
    const v = limits[name];
    if (v !== undefined && v !== null && !(Number.isFinite(v) && v >= 0 && v <= 1e9)) throw new AiLimitsError(`${name} must be a number of USD from 0 to 1000000000, or none`);
  }
  const h = limits.knowledge_keep_source_hours;
  if (h !== undefined && h !== null && !(Number.isSafeInteger(h) && h >= 1 && h <= 168)) throw new AiLimitsError('knowledge_keep_source_hours must be a whole number of hours from 1 to 168, or none');
  return limits;
}

/**
 * A secret key's own limits, on top of its organization's: item `keyid#<key id>` / `ai-key-limits`,
 * next to the key's id pointer. Cached as the organization's settings are (MODEL_ROUTES_CACHE_MS).
 */
export class AiKeyLimits {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  get(keyId: string): Promise<AiLimits> {
    return keyCache.getOrLoad(keyId, this.now(), settings().modelRoutesCacheMs, () => this.read(keyId));
  }

  private async read(keyId: string): Promise<AiLimits> {
    const item = await this.kv.get(keyLimitsKey(keyId));
    return { ...NO_LIMITS, ...((item?.limits as Partial<AiLimits> | undefined) ?? {}) };
  }

  /** Sets the given limits of an existing secret key; null lifts one, absent leaves it. */
  async set(keyId: string, limits: Partial<AiLimits>): Promise<{ key_id: string; limits: AiLimits }> {
    checkLimits(limits);
    if (!(await this.kv.get(secretKeyPointer(keyId)))) throw new AiLimitsError(`no secret key ${keyId}`);
    const next: AiLimits = { ...(await this.read(keyId)), ...limits };
    await this.kv.put({ ...keyLimitsKey(keyId), key_id: keyId, limits: { ...next } });
    keyCache.delete(keyId);
    return { key_id: keyId, limits: next };
  }
}

// ---------- admission ----------

const counters = new WeakMap<Engine, Counters>();
function countersOf(engine: Engine): Counters {
  let c = counters.get(engine);
  if (!c) counters.set(engine, (c = new Counters(engine.kv, engine.clock)));
  return c;
}

interface Scope {
  id: string;
  /** "The organization's" or "This key's", for messages. */
  whose: string;
  limits: AiLimits;
}

/**
 * Whether any limit of a call is set. Only the call limits: an organization's `knowledge_job_cap_usd`
 * bounds a job's price when it starts, not each call, so alone it must leave calls unlimited (no write).
 */
const hasLimits = (l: AiLimits) => l.rpm !== null || l.tpm !== null || l.concurrency !== null || l.budget_usd !== null;

/** The limits that apply to a principal: its organization's, then its secret key's own. */
export async function scopesOf(engine: Engine, principal: Principal): Promise<Scope[]> {
  const now = () => engine.clock.now();
  const [org, key] = await Promise.all([
    new AiOrgSettings(engine.kv, now).get(principal.organizationId),
    principal.kind === 'secret_key' ? new AiKeyLimits(engine.kv, now).get(principal.credentialId) : undefined,
  ]);
  const scopes: Scope[] = [];
  if (hasLimits(org.limits)) scopes.push({ id: orgScope(principal.organizationId), whose: "The organization's", limits: org.limits });
  if (key && hasLimits(key)) scopes.push({ id: keyScope(principal.credentialId), whose: "This key's", limits: key });
  return scopes;
}

/**
 * Where a call's cost is held when the budgets already hold it for a larger piece of work (a knowledge
 * job holds its whole estimate at its start: knowledge/jobs/spend.ts): `reserve` admits the call's
 * worst cost or throws; its `settle` takes the real cost (0: refunded) and books it to the budgets.
 */
export interface HeldBudget {
  reserve(worstMicro: number, holdUntilMs: number): Promise<{ settle(costMicro: number): Promise<void> }>;
}

/** What an admitted call holds, to be given back or corrected when it settles. */
type Undo = { refund(): Promise<unknown>; settle(usage: CallUsage, costMicro: number): Promise<unknown> };

const NOOP: Admission = { settle: async () => undefined };

const limited = (code: ErrorCode, message: string, retryAfterSeconds?: number) => new PlatformError(code, message, { retryAfterSeconds });
const seconds = (ms: number) => Math.max(1, Math.ceil(ms / 1000));

/**
 * Admits a call against every limit of its organization and key, or throws 429: `rate_limited`
 * (requests a minute), `quota_exceeded` (tokens a minute), `concurrency_limited` (calls at once),
 * `budget_exhausted` (USD). Whatever was taken before a refusal is given back. Without limits: no
 * write at all (the settings are read through their cache).
 */
export async function admitCall(engine: Engine, principal: Principal, route: ModelRoute, estimate: CallEstimate, heldBudget?: HeldBudget): Promise<Admission> {
  const scopes = await scopesOf(engine, principal);
  if (!scopes.length && !heldBudget) return NOOP;
  const taken: Undo[] = [];
  try {
    // A knowledge job's call: its worst cost against the job's price; the budgets already hold the job's estimate.
    if (heldBudget) {
      const held = await heldBudget.reserve(worstCostMicro(route, estimate), deadlineOf(engine, route));
      taken.push({ refund: () => held.settle(0), settle: (_usage, costMicro) => held.settle(costMicro) });
    }
    for (const scope of scopes) {
      const { rpm, tpm, concurrency } = scope.limits;
      if (rpm !== null) taken.push(await takeRate(engine, `ai.rpm:${scope.id}`, rpm, 1, 'rate_limited', `${scope.whose} limit of requests a minute is reached.`));
      if (tpm !== null) {
        const tokens = Math.max(0, Math.ceil(estimate.inputTokens)) + Math.max(0, Math.ceil(estimate.maxOutputTokens));
        if (tokens > 0) taken.push(await takeRate(engine, `ai.tpm:${scope.id}`, tpm, tokens, 'quota_exceeded', `${scope.whose} limit of tokens a minute is reached.`));
      }
      if (concurrency !== null) taken.push(await takeSlot(engine, scope, concurrency, route));
    }
    for (const scope of heldBudget ? [] : scopes) {
      if (scope.limits.budget_usd !== null && isPriced(route)) taken.push(await reserveBudget(engine, scope, scope.limits.budget_usd, route, estimate));
    }
  } catch (error) {
    await Promise.all(taken.map((t) => t.refund().catch((e) => log.warn('AI limit not given back', { error: String(e) }))));
    throw error;
  }
  let settled = false;
  return {
    async settle(usage, costUsd) {
      if (settled) return;
      settled = true;
      const costMicro = microUsd(costUsd);
      // Never throws: the call already happened; a failed write only leaves a hold to lapse.
      await Promise.all(taken.map((t) => t.settle(usage, costMicro).catch((e) => log.warn('AI limit not settled', { error: String(e) }))));
    },
  };
}

/** One take from a minute window; the take is corrected to the call's real tokens on settle (tokens only). */
async function takeRate(engine: Engine, name: string, limit: number, cost: number, code: ErrorCode, message: string): Promise<Undo> {
  // A call needing more than the whole limit is let through only into an empty window, holding all of it.
  const held = Math.min(cost, limit);
  const r = await countersOf(engine).take(name, { limit, windowMs: MINUTE_MS, cost: held });
  if (!r.allowed) throw limited(code, message, seconds(r.retryAfterMs));
  const start = r.resetAt - MINUTE_MS;
  const adjust = (n: number) =>
    n === 0 ? Promise.resolve() : engine.kv.update({ key: rateWindowKey(name, MINUTE_MS, start), add: { n }, set: { expires_at: windowExpiry(start, MINUTE_MS) } });
  return {
    refund: () => adjust(-held),
    // Requests stay counted; tokens become what the call really used (in the window it was admitted in).
    settle: (usage) => (code === 'quota_exceeded' ? adjust(usage.inputTokens + usage.outputTokens - held) : Promise.resolve()),
  };
}

const deadlineOf = (engine: Engine, route: ModelRoute) => engine.clock.now() + holdMs(timeoutOf(route));

async function takeSlot(engine: Engine, scope: Scope, limit: number, route: ModelRoute): Promise<Undo> {
  const now = engine.clock.now();
  const r = await addHold(engine.kv, limitsStateKey(scope.id, 'conc'), 1, deadlineOf(engine, route), now, (_item, live) => live <= limit);
  if ('refused' in r) throw limited('concurrency_limited', `${scope.whose} limit of calls at once is reached.`, 1);
  return { refund: () => releaseHold(engine.kv, r.hold), settle: () => releaseHold(engine.kv, r.hold) };
}

async function reserveBudget(engine: Engine, scope: Scope, budgetUsd: number, route: ModelRoute, estimate: CallEstimate): Promise<Undo> {
  const budget = Math.round(budgetUsd * 1e6);
  const worst = worstCostMicro(route, estimate);
  const now = engine.clock.now();
  const spentOf = (item: KvItem) => (typeof item.spent === 'number' ? item.spent : 0);
  const r = await addHold(engine.kv, limitsStateKey(scope.id, 'budget'), worst, deadlineOf(engine, route), now, (item, live) => {
    const spent = spentOf(item);
    return spent + live <= budget && (worst > 0 || spent < budget);
  });
  if ('refused' in r) {
    // Refused only for costs still held by calls in flight: a retry may fit once they settle.
    const inFlight = spentOf(r.refused) + worst <= budget && spentOf(r.refused) < budget;
    throw limited('budget_exhausted', `${scope.whose} AI budget is spent.`, inFlight ? 1 : undefined);
  }
  return { refund: () => releaseHold(engine.kv, r.hold), settle: (_usage, costMicro) => releaseHold(engine.kv, r.hold, costMicro ? { spent: costMicro } : {}) };
}

/** What a scope has spent of its budget, and holds for calls in flight, in USD. */
export async function budgetState(kv: KeyValueStore, scope: string, now: number): Promise<{ spent_usd: number; held_usd: number }> {
  const item = await kv.get(limitsStateKey(scope, 'budget'));
  const spent = typeof item?.spent === 'number' ? item.spent : 0;
  return { spent_usd: spent / 1e6, held_usd: liveHolds(item, now).live / 1e6 };
}
