/**
 * Limits of AI calls (lambdas/ai/limits.ts) and their usage records (lambdas/ai/usage.ts), driven
 * directly: on the embedded engine (SQLite, a manual clock), on two engines sharing one SQLite file,
 * and on the AWS key-value adapter (DynamoDB on dynalite).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import type { ModelRoute } from '../../lambdas/ai/model-routes.js';
import { AiOrgSettings, type OrgAiLimits } from '../../lambdas/ai/org-settings.js';
import { AiKeyLimits, admitCall, budgetState, limitsStateKey, orgScope, worstCostMicro, type Admission, type CallEstimate } from '../../lambdas/ai/limits.js';
import { HOLD_MARGIN_MS } from '../../lambdas/shared/hold-margin.js';
import { costOf, recordUsage } from '../../lambdas/ai/usage.js';
import { PlatformError } from '../../lambdas/shared/errors.js';
import { rateWindowKey } from '../../lambdas/shared/counters.js';
import { liveHolds } from '../../lambdas/shared/leases.js';
import { activityRecordOf, flushActivity } from '../../lambdas/activity/activity.js';
import { segmentEvents } from '../../lambdas/activity/segments.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';

const MINUTE = 60_000;
let seq = 0;
const uniq = (p: string) => `${p}_${process.pid}_${Date.now().toString(36)}_${seq++}`;

const principalOf = (organizationId: string, credentialId = uniq('key'), kind: Principal['kind'] = 'secret_key'): Principal => ({
  kind, credentialId, organizationId, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null,
});

const routeOf = (organizationId: string, over: Partial<ModelRoute> = {}): ModelRoute => ({
  id: 'chat', organization_id: organizationId, endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: 'http://upstream.invalid/v1',
  upstream_model: 'm', default: true, owned_by: organizationId, created: 0, max_tokens: null, tools: true, timeout_ms: 10_000, tiers: null,
  price_in_per_mtok: null, price_out_per_mtok: null, price_per_minute: null, api_key_env: null, ...over,
});

const SMALL: CallEstimate = { inputTokens: 10, inputTokensBound: 10, maxOutputTokens: 10 };
const NOTHING = { inputTokens: 0, outputTokens: 0 };

/** The code a refused admission throws (and its Retry-After), or 'admitted'. */
async function outcome(p: Promise<Admission>): Promise<{ code: string; retryAfter?: number; admission?: Admission }> {
  try {
    return { code: 'admitted', admission: await p };
  } catch (error) {
    if (!(error instanceof PlatformError)) throw error;
    expect(error.status).toBe(429);
    return { code: error.code, retryAfter: error.retryAfterSeconds };
  }
}

async function setOrgLimits(engine: Engine, org: string, limits: Partial<OrgAiLimits>) {
  await new AiOrgSettings(engine.kv, () => engine.clock.now()).setLimits(org, limits);
}

/** Budget and concurrency, the limits whose holds must be exact: run on each adapter. */
function holdTests(name: string, setup: () => Promise<{ engine: Engine; clock: ManualClock; close(): Promise<void> }>) {
  describe(`budget and concurrency: ${name}`, () => {
    let engine: Engine;
    let clock: ManualClock;
    let close: () => Promise<void>;
    let org: string;
    beforeAll(async () => ({ engine, clock, close } = await setup()));
    afterAll(async () => close?.());
    beforeEach(() => {
      org = uniq('org');
    });

    it('never overspends the budget under 20 concurrent admits, and spends it exactly when calls cost their worst', async () => {
      // 1 USD / Mtok in, 2 USD / Mtok out: 1,000 in + 500 out = 0.002 USD at worst; 0.011 USD fits 5 of them.
      const route = routeOf(org, { price_in_per_mtok: 1, price_out_per_mtok: 2 });
      const estimate = { inputTokens: 1000, inputTokensBound: 1000, maxOutputTokens: 500 };
      expect(worstCostMicro(route, estimate)).toBe(2000);
      await setOrgLimits(engine, org, { budget_usd: 0.011 });
      const principal = principalOf(org);
      let spentMicro = 0;
      for (let round = 0; round < 10; round++) {
        const results = await Promise.all(Array.from({ length: 20 }, () => outcome(admitCall(engine, principal, route, estimate))));
        const admitted = results.filter((r) => r.code === 'admitted');
        expect(results.every((r) => r.code === 'admitted' || r.code === 'budget_exhausted')).toBe(true);
        // Held at worst, the admitted calls fit what is left of the budget.
        expect(spentMicro + admitted.length * 2000).toBeLessThanOrEqual(11_000);
        const state = await budgetState(engine.kv, orgScope(org), clock.now());
        expect(state.held_usd * 1e6 + state.spent_usd * 1e6).toBeLessThanOrEqual(11_000);
        const usage = { inputTokens: 1000, outputTokens: 500 };
        await Promise.all(admitted.map((r) => r.admission!.settle(usage, costOf(route, usage))));
        spentMicro += admitted.length * 2000;
        if (spentMicro === 10_000) break;
      }
      expect(await budgetState(engine.kv, orgScope(org), clock.now())).toEqual({ spent_usd: 0.01, held_usd: 0 });
      // 0.001 USD left, less than the worst case: refused, and waiting does not help (no Retry-After).
      const refused = await outcome(admitCall(engine, principal, route, estimate));
      expect(refused).toEqual({ code: 'budget_exhausted', retryAfter: undefined });
      // A cheaper call still fits; an unpriced route is not charged at all.
      const cheap = await outcome(admitCall(engine, principal, route, { inputTokens: 500, inputTokensBound: 500, maxOutputTokens: 250 }));
      expect(cheap.code).toBe('admitted');
      expect((await outcome(admitCall(engine, principal, routeOf(org), estimate))).code).toBe('admitted');
      // While the cheap one is in flight, its hold blocks another: Retry-After, since it may settle for less.
      expect(await outcome(admitCall(engine, principal, route, { inputTokens: 500, inputTokensBound: 500, maxOutputTokens: 250 }))).toEqual({ code: 'budget_exhausted', retryAfter: 1 });
      // Settled for its real (lower) cost, the rest of the budget is free again.
      await cheap.admission!.settle({ inputTokens: 100, outputTokens: 0 }, costOf(route, { inputTokens: 100, outputTokens: 0 }));
      expect(await budgetState(engine.kv, orgScope(org), clock.now())).toEqual({ spent_usd: 0.0101, held_usd: 0 });
      // A failed call (nothing used) gives its whole hold back.
      const failed = await outcome(admitCall(engine, principal, route, { inputTokens: 300, inputTokensBound: 300, maxOutputTokens: 100 }));
      await failed.admission!.settle(NOTHING, 0);
      expect(await budgetState(engine.kv, orgScope(org), clock.now())).toEqual({ spent_usd: 0.0101, held_usd: 0 });
    });

    it('holds at most `concurrency` calls at once, frees a slot on settle, and answers concurrency_limited', async () => {
      await setOrgLimits(engine, org, { concurrency: 3 });
      const route = routeOf(org);
      const principal = principalOf(org);
      const results = await Promise.all(Array.from({ length: 20 }, () => outcome(admitCall(engine, principal, route, SMALL))));
      const admitted = results.filter((r) => r.code === 'admitted');
      expect(admitted.length).toBeGreaterThanOrEqual(1);
      expect(admitted.length).toBeLessThanOrEqual(3);
      expect(results.filter((r) => r.code !== 'admitted').every((r) => r.code === 'concurrency_limited' && r.retryAfter === 1)).toBe(true);
      await Promise.all(admitted.map((r) => r.admission!.settle(NOTHING, 0)));
      // In turn: exactly three, then refused; one settles, one more fits.
      const held = [];
      for (let i = 0; i < 3; i++) held.push((await outcome(admitCall(engine, principal, route, SMALL))).admission!);
      expect((await outcome(admitCall(engine, principal, route, SMALL))).code).toBe('concurrency_limited');
      await held[0].settle(NOTHING, 0);
      await held[0].settle(NOTHING, 0); // settling twice gives back once
      held[0] = (await outcome(admitCall(engine, principal, route, SMALL))).admission!;
      expect((await outcome(admitCall(engine, principal, route, SMALL))).code).toBe('concurrency_limited');
      await Promise.all(held.map((h) => h.settle(NOTHING, 0)));
      expect(liveHolds(await engine.kv.get(limitsStateKey(orgScope(org), 'conc')), clock.now()).live).toBe(0);
    });

    it('recovers slots and budget held by a crashed process once their call could no longer be running', async () => {
      await setOrgLimits(engine, org, { concurrency: 2, budget_usd: 0.004 });
      const route = routeOf(org, { timeout_ms: 10_000, price_in_per_mtok: 1, price_out_per_mtok: 2 });
      const estimate = { inputTokens: 1000, inputTokensBound: 1000, maxOutputTokens: 500 };
      const principal = principalOf(org);
      // Two calls admitted and never settled (their process died).
      await admitCall(engine, principal, route, estimate);
      await admitCall(engine, principal, route, estimate);
      expect((await outcome(admitCall(engine, principal, route, estimate))).code).toBe('concurrency_limited');
      // Still within the route's timeout and the margin: still held.
      clock.advance(10_000 + HOLD_MARGIN_MS - 1000);
      expect((await outcome(admitCall(engine, principal, route, estimate))).code).toBe('concurrency_limited');
      // Past the deadline's minute: the holds lapse, slots and budget are free.
      clock.advance(2 * MINUTE);
      const again = await outcome(admitCall(engine, principal, route, estimate));
      expect(again.code).toBe('admitted');
      const usage = { inputTokens: 1000, outputTokens: 500 };
      await again.admission!.settle(usage, costOf(route, usage));
      const conc = await engine.kv.get(limitsStateKey(orgScope(org), 'conc'));
      expect(liveHolds(conc, clock.now())).toEqual({ live: 0, lapsed: [] }); // the lapsed bucket was dropped
      expect(await budgetState(engine.kv, orgScope(org), clock.now())).toEqual({ spent_usd: 0.002, held_usd: 0 });
    });
  });
}

function embeddedSetup(prefix: string) {
  return async () => {
    const dir = mkdtempSync(join(tmpdir(), prefix));
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
    const engine = createEmbeddedEngine({ dataDir: dir, clock });
    return {
      engine,
      clock,
      close: async () => {
        await engine.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  };
}

holdTests('embedded (SQLite)', embeddedSetup('ai-limits-'));

holdTests('aws (DynamoDB on dynalite)', async () => {
  const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
  const { engine } = await startAwsDataEngine('ai-limits-aws', { clock });
  return { engine, clock, close: () => engine.close() };
});

describe('rate, tokens and key limits (embedded)', () => {
  let engine: Engine;
  let clock: ManualClock;
  let close: () => Promise<void>;
  let org: string;
  beforeAll(async () => ({ engine, clock, close } = await embeddedSetup('ai-rates-')()));
  afterAll(async () => close?.());
  beforeEach(() => {
    org = uniq('org');
  });
  afterEach(() => vi.restoreAllMocks());

  it('admits without writing anything when no limit is set', async () => {
    const update = vi.spyOn(engine.kv, 'update');
    const put = vi.spyOn(engine.kv, 'put');
    const admission = await admitCall(engine, principalOf(org), routeOf(org, { price_in_per_mtok: 5 }), SMALL);
    await admission.settle({ inputTokens: 5, outputTokens: 5 }, 0.00005);
    expect(update).not.toHaveBeenCalled();
    expect(put).not.toHaveBeenCalled();
  });

  it("admits without writing anything when the organization's only limit is its knowledge job cap (no limit of calls)", async () => {
    await setOrgLimits(engine, org, { knowledge_job_cap_usd: 0 });
    expect((await new AiOrgSettings(engine.kv, () => engine.clock.now()).get(org)).limits.knowledge_job_cap_usd).toBe(0);
    const update = vi.spyOn(engine.kv, 'update');
    const put = vi.spyOn(engine.kv, 'put');
    const transact = vi.spyOn(engine.kv, 'transact');
    const admission = await admitCall(engine, principalOf(org), routeOf(org, { price_in_per_mtok: 5 }), SMALL);
    await admission.settle({ inputTokens: 5, outputTokens: 5 }, 0.00005);
    expect(update).not.toHaveBeenCalled();
    expect(put).not.toHaveBeenCalled();
    expect(transact).not.toHaveBeenCalled();
  });

  it('holds the worst cost of a transcription on a route priced by the minute, and settles what it really transcribed', async () => {
    // 0.006 USD a minute: a 10-minute piece holds 0.06 USD; the budget fits one of them, not two.
    const route = routeOf(org, { id: 'whisper', endpoint: '/v1/audio/transcriptions', price_per_minute: 0.006 });
    const piece: CallEstimate = { inputTokens: 0, inputTokensBound: 0, maxOutputTokens: 0, audioSeconds: 600 };
    expect(worstCostMicro(route, piece)).toBe(60_000);
    expect(worstCostMicro(route, { ...piece, audioSeconds: undefined })).toBe(0);
    await setOrgLimits(engine, org, { budget_usd: 0.1 });
    const principal = principalOf(org);
    const first = await outcome(admitCall(engine, principal, route, piece));
    expect(first.code).toBe('admitted');
    expect(await budgetState(engine.kv, orgScope(org), clock.now())).toEqual({ spent_usd: 0, held_usd: 0.06 });
    expect(await outcome(admitCall(engine, principal, route, piece))).toEqual({ code: 'budget_exhausted', retryAfter: 1 });
    // The piece held 9 minutes 30 s of sound: that is what is spent.
    const usage = { inputTokens: 0, outputTokens: 0, audioSeconds: 570 };
    expect(costOf(route, usage)).toBeCloseTo(0.057, 12);
    await first.admission!.settle(usage, costOf(route, usage));
    expect(await budgetState(engine.kv, orgScope(org), clock.now())).toEqual({ spent_usd: 0.057, held_usd: 0 });
    // 0.043 USD left: a 7-minute piece (0.042) fits, an 8-minute one (0.048) does not.
    expect((await outcome(admitCall(engine, principal, route, { ...piece, audioSeconds: 480 }))).code).toBe('budget_exhausted');
    expect((await outcome(admitCall(engine, principal, route, { ...piece, audioSeconds: 420 }))).code).toBe('admitted');
  });

  it('answers rate_limited with Retry-After past the requests a minute, and admits again as the window slides', async () => {
    await setOrgLimits(engine, org, { rpm: 3 });
    const principal = principalOf(org);
    const route = routeOf(org);
    for (let i = 0; i < 3; i++) expect((await outcome(admitCall(engine, principal, route, SMALL))).code).toBe('admitted');
    const refused = await outcome(admitCall(engine, principal, route, SMALL));
    expect(refused.code).toBe('rate_limited');
    expect(refused.retryAfter).toBeGreaterThanOrEqual(1);
    expect(refused.retryAfter).toBeLessThanOrEqual(120);
    clock.advance(refused.retryAfter! * 1000);
    expect((await outcome(admitCall(engine, principal, route, SMALL))).code).toBe('admitted');
    // Another organization has its own count.
    expect((await outcome(admitCall(engine, principalOf(uniq('org')), route, SMALL))).code).toBe('admitted');
  });

  it('reserves input estimate + output ceiling against the tokens a minute and corrects it to the real usage on settle', async () => {
    clock.advance(MINUTE - (clock.now() % MINUTE)); // the start of a minute: one window for the whole test
    await setOrgLimits(engine, org, { tpm: 1000 });
    const principal = principalOf(org);
    const route = routeOf(org);
    const estimate = { inputTokens: 300, inputTokensBound: 300, maxOutputTokens: 200 };
    const window = async () => (await engine.kv.get(rateWindowKey(`ai.tpm:${orgScope(org)}`, MINUTE, clock.now() - (clock.now() % MINUTE))))?.n;
    const a = await outcome(admitCall(engine, principal, route, estimate));
    const b = await outcome(admitCall(engine, principal, route, estimate));
    expect(await window()).toBe(1000);
    const refused = await outcome(admitCall(engine, principal, route, estimate));
    expect(refused.code).toBe('quota_exceeded');
    expect(refused.retryAfter).toBeGreaterThanOrEqual(1);
    // a used 60 in and 40 out: the window holds 100 for it instead of 500.
    await a.admission!.settle({ inputTokens: 60, outputTokens: 40 }, 0);
    expect(await window()).toBe(600);
    expect((await outcome(admitCall(engine, principal, route, estimate))).code).toBe('quota_exceeded');
    // b failed: nothing used, all 500 back.
    await b.admission!.settle(NOTHING, 0);
    expect(await window()).toBe(100);
    expect((await outcome(admitCall(engine, principal, route, estimate))).code).toBe('admitted');
    expect(await window()).toBe(600);
  });

  it('gives back what it took when a later limit refuses', async () => {
    clock.advance(MINUTE - (clock.now() % MINUTE));
    await setOrgLimits(engine, org, { rpm: 10, tpm: 10_000, concurrency: 1 });
    const principal = principalOf(org);
    const route = routeOf(org);
    const held = await admitCall(engine, principal, route, SMALL);
    expect((await outcome(admitCall(engine, principal, route, SMALL))).code).toBe('concurrency_limited');
    const start = clock.now() - (clock.now() % MINUTE);
    expect((await engine.kv.get(rateWindowKey(`ai.rpm:${orgScope(org)}`, MINUTE, start)))?.n).toBe(1);
    expect((await engine.kv.get(rateWindowKey(`ai.tpm:${orgScope(org)}`, MINUTE, start)))?.n).toBe(20);
    await held.settle({ inputTokens: 8, outputTokens: 2 }, 0);
    expect((await engine.kv.get(rateWindowKey(`ai.tpm:${orgScope(org)}`, MINUTE, start)))?.n).toBe(10);
  });

  it("applies a secret key's own limits on top of its organization's, to that key only", async () => {
    const keyId = uniq('key');
    // The key must exist: its id pointer, as Tenants writes it.
    await engine.kv.put({ pk: `keyid#${keyId}`, sk: 'keyid', hash: 'x' });
    const keyLimits = new AiKeyLimits(engine.kv, () => engine.clock.now());
    await expect(keyLimits.set(uniq('key'), { rpm: 1 })).rejects.toThrow(/no secret key/);
    expect(await keyLimits.set(keyId, { rpm: 1 })).toEqual({ key_id: keyId, limits: { rpm: 1, tpm: null, concurrency: null, budget_usd: null } });
    const route = routeOf(org);
    const principal = principalOf(org, keyId);
    expect((await outcome(admitCall(engine, principal, route, SMALL))).code).toBe('admitted');
    const refused = await outcome(admitCall(engine, principal, route, SMALL));
    expect(refused.code).toBe('rate_limited');
    // Another key of the organization is not limited.
    expect((await outcome(admitCall(engine, principalOf(org), route, SMALL))).code).toBe('admitted');
    // Lifted: admitted again.
    await keyLimits.set(keyId, { rpm: null });
    expect((await outcome(admitCall(engine, principal, route, SMALL))).code).toBe('admitted');
  });

  it('records every call as an ai.usage activity event with route, status, latency, tokens and cost', async () => {
    const principal = principalOf(org);
    const route = routeOf(org, { id: 'chat-fast', price_in_per_mtok: 0.15, price_out_per_mtok: 0.6 });
    const usage = { inputTokens: 1200, outputTokens: 300 };
    recordUsage(engine, principal, { route, usage, cost: costOf(route, usage), status: 200, latencyMs: 42 });
    recordUsage(engine, principal, { route, usage: NOTHING, cost: 0, status: 504, latencyMs: 10_000 });
    await flushActivity(engine);
    const day = new Date(clock.now()).toISOString().slice(0, 10);
    const page = await engine.kv.query({ pk: `act#${org}#${day}` });
    const records = page.items.flatMap(segmentEvents).map(activityRecordOf);
    expect(records).toHaveLength(2);
    const byStatus = Object.fromEntries(records.map((r) => [r.status, r]));
    expect(byStatus[200]).toMatchObject({
      organization_id: org, actor_kind: 'secret_key', actor_id: principal.credentialId, source: 'ai', kind: 'ai.usage', method: 'POST',
      route: 'chat-fast', status: 200, outcome: 'success', latency_ms: 42,
      usage: { prompt_tokens: 1200, completion_tokens: 300, total_tokens: 1500, cost_usd: 0.00036 },
    });
    expect(byStatus[504]).toMatchObject({ outcome: 'server_error', usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_usd: 0 } });
    // The spec's fields first, in order, then the extension.
    expect(Object.keys(byStatus[200]).at(-1)).toBe('usage');
  });
});

describe('two engines on one SQLite file (two worker processes)', () => {
  it('share the concurrency and budget holds and the rate windows', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ai-limits-shared-'));
    const clock = new ManualClock(Date.UTC(2026, 0, 1, 12, 0, 0));
    const one = createEmbeddedEngine({ dataDir: dir, clock });
    const two = createEmbeddedEngine({ dataDir: dir, clock });
    try {
      const org = uniq('org');
      await setOrgLimits(one, org, { rpm: 4, concurrency: 2, budget_usd: 0.004 });
      const route = routeOf(org, { price_in_per_mtok: 1, price_out_per_mtok: 2 });
      const estimate = { inputTokens: 1000, inputTokensBound: 1000, maxOutputTokens: 500 };
      const principal = principalOf(org);
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) => outcome(admitCall(i % 2 ? two : one, principal, route, estimate))),
      );
      const admitted = results.filter((r) => r.code === 'admitted');
      expect(admitted.length).toBeGreaterThanOrEqual(1);
      expect(admitted.length).toBeLessThanOrEqual(2);
      const usage = { inputTokens: 1000, outputTokens: 500 };
      await Promise.all(admitted.map((r) => r.admission!.settle(usage, costOf(route, usage))));
      // In turn, across both engines (once the first burst is out of the sliding window): the 4 requests a minute hold in all.
      clock.advance(2 * MINUTE);
      await setOrgLimits(one, org, { concurrency: null, budget_usd: null });
      const codes = [];
      for (let i = 0; i < 6; i++) {
        const r = await outcome(admitCall(i % 2 ? two : one, principal, route, estimate));
        await r.admission?.settle(NOTHING, 0);
        codes.push(r.code);
      }
      expect(codes.filter((c) => c === 'admitted')).toHaveLength(4);
      expect(codes.slice(4)).toEqual(['rate_limited', 'rate_limited']);
    } finally {
      await one.close();
      await two.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
