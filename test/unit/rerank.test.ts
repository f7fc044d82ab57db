/**
 * The rerank call (lambdas/vector/rerank.ts) through provider `openai-compatible` against a fake
 * rerank server (real HTTP on loopback): every outcome (reranked, an error answer, a slow one,
 * malformed ones, a missing key, the caller leaving), that it never throws, and that every call is
 * metered as an `ai.rerank` activity event.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { rerank } from '../../lambdas/vector/rerank.js';
import { DEFAULT_RERANK_TIMEOUT_MS, type RerankProfile } from '../../lambdas/vector/rerank-profiles.js';
import { MAX_RERANK_ANSWER_BYTES } from '../../lambdas/ai/providers/rerank/openai-compatible.js';
import { activityRecordOf, flushActivity, isActivityKind, type ActivityRecord } from '../../lambdas/activity/activity.js';
import { segmentEvents } from '../../lambdas/activity/segments.js';
import { fakeScore, startFakeReranker, type FakeReranker } from '../helpers/fake-reranker.js';

let dir: string;
let engine: Engine;
let fake: FakeReranker;
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
let seq = 0;
const KEY_ENV = `RERANK_TEST_KEY_${process.pid}`;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'rerank-'));
  engine = createEmbeddedEngine({ dataDir: dir, clock });
  fake = await startFakeReranker();
  process.env[KEY_ENV] = 'rk-test-secret';
});
afterAll(async () => {
  delete process.env[KEY_ENV];
  await fake.close();
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  fake.mode = 'answer';
  fake.requests.length = 0;
});

const principalOf = (organizationId: string): Principal => ({
  kind: 'secret_key', credentialId: `key_${seq++}`, organizationId, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null,
});
const profileOf = (organizationId: string, over: Partial<RerankProfile> = {}): RerankProfile => ({
  id: 'jina', organization_id: organizationId, provider: 'openai-compatible', base_url: fake.baseUrl, model: 'jina-reranker-v2', api_key_env: null,
  timeout_ms: DEFAULT_RERANK_TIMEOUT_MS, created_at: '2026-06-01T00:00:00.000Z', updated_at: '2026-06-01T00:00:00.000Z', ...over,
});

const QUERY = 'red apple pie';
const DOCUMENTS = ['a green pear', 'apple pie recipe', 'red apple pie with cream', 'red car', 'blue sky'];

/** The activity events of an organization (its own partition: nothing else writes there). */
async function eventsOf(org: string): Promise<ActivityRecord[]> {
  await flushActivity(engine);
  const day = new Date(clock.now()).toISOString().slice(0, 10);
  const page = await engine.kv.query({ pk: `act#${org}#${day}` });
  return page.items.flatMap(segmentEvents).map(activityRecordOf);
}

describe('rerank through openai-compatible', () => {
  it('posts the Cohere / Jina shape with the key and gives the best topN, best first, whatever order they came in', async () => {
    const org = `org_ok_${seq++}`;
    const out = await rerank(engine, principalOf(org), profileOf(org, { api_key_env: KEY_ENV }), QUERY, DOCUMENTS, 3);
    expect(out).toEqual({
      outcome: 'reranked',
      results: [
        { index: 2, relevance_score: 0.3 },
        { index: 1, relevance_score: 0.2 },
        { index: 3, relevance_score: 0.1 },
      ],
    });
    expect(fakeScore(QUERY, DOCUMENTS[2])).toBe(3);
    expect(fake.requests).toHaveLength(1);
    expect(fake.requests[0].path).toBe('/v1/rerank');
    expect(fake.requests[0].headers.authorization).toBe('Bearer rk-test-secret');
    expect(fake.requests[0].body).toEqual({ model: 'jina-reranker-v2', query: QUERY, documents: DOCUMENTS, top_n: 3 });
  });

  it('sends no Authorization without a key, keeps topN within 1 and the documents, and calls nothing for no documents', async () => {
    const org = `org_n_${seq++}`;
    const all = await rerank(engine, principalOf(org), profileOf(org, { base_url: `${fake.baseUrl}///` }), QUERY, DOCUMENTS, 50);
    // Ties (documents 0 and 4 score 0) keep the candidates' order, whatever order the reranker gave them in.
    expect(all.outcome === 'reranked' && all.results.map((r) => r.index)).toEqual([2, 1, 3, 0, 4]);
    expect(fake.requests[0].path).toBe('/v1/rerank');
    expect(fake.requests[0].headers.authorization).toBeUndefined();
    expect(fake.requests[0].body.top_n).toBe(5);
    const one = await rerank(engine, principalOf(org), profileOf(org), QUERY, DOCUMENTS, 0);
    expect(one.outcome === 'reranked' && one.results).toEqual([{ index: 2, relevance_score: 0.3 }]);
    expect(await rerank(engine, principalOf(org), profileOf(org), QUERY, [], 5)).toEqual({ outcome: 'reranked', results: [] });
    expect(fake.requests).toHaveLength(2);
  });

  it('keeps the best topN of an answer that ranked every document', async () => {
    const org = `org_all_${seq++}`;
    fake.mode = 'ignore-top-n';
    const out = await rerank(engine, principalOf(org), profileOf(org), QUERY, DOCUMENTS, 2);
    expect(out).toEqual({ outcome: 'reranked', results: [{ index: 2, relevance_score: 0.3 }, { index: 1, relevance_score: 0.2 }] });
  });

  it('is rerank_failed on an error answer, with only its status in the reason', async () => {
    const org = `org_500_${seq++}`;
    fake.mode = 'fail';
    const out = await rerank(engine, principalOf(org), profileOf(org), QUERY, DOCUMENTS, 3);
    expect(out).toEqual({ outcome: 'rerank_failed', reason: 'the reranker answered 500' });
  });

  it('is rerank_timeout past the profile timeout, and the request is aborted', async () => {
    const org = `org_slow_${seq++}`;
    fake.mode = 'slow';
    fake.slowMs = 2_000;
    const aborted = fake.aborted;
    const started = performance.now();
    const out = await rerank(engine, principalOf(org), profileOf(org, { timeout_ms: 150 }), QUERY, DOCUMENTS, 3);
    expect(out).toEqual({ outcome: 'rerank_timeout', reason: 'no answer within 150 ms' });
    expect(performance.now() - started).toBeLessThan(1_500);
    await expect.poll(() => fake.aborted).toBe(aborted + 1);
  });

  it('answers within the timeout when the reranker is slow but not too slow', async () => {
    const org = `org_slowok_${seq++}`;
    fake.mode = 'slow';
    fake.slowMs = 50;
    expect((await rerank(engine, principalOf(org), profileOf(org, { timeout_ms: 2_000 }), QUERY, DOCUMENTS, 2)).outcome).toBe('reranked');
  });

  it.each([
    ['not-json', 'the answer is not JSON'],
    ['no-results', 'the answer has no results list'],
    ['index-out-of-range', 'the answer has an index out of range (5)'],
    ['index-repeated', /^the answer has index \d twice$/],
    ['score-not-finite', /^the answer has a score that is not a finite number/],
    ['score-missing', /^the answer has a score that is not a finite number/],
    ['too-few', 'the answer has only 2 of the 3 results asked for'],
  ] as const)('is rerank_failed on a malformed answer: %s', async (mode, reason) => {
    const org = `org_bad_${seq++}`;
    fake.mode = mode;
    const out = await rerank(engine, principalOf(org), profileOf(org), QUERY, DOCUMENTS, 3);
    expect(out.outcome).toBe('rerank_failed');
    expect(out.outcome !== 'reranked' && out.reason).toMatch(typeof reason === 'string' ? new RegExp(`^${reason.replace(/[()]/g, '\\$&')}$`) : reason);
  });

  it(`is rerank_failed on an answer over ${MAX_RERANK_ANSWER_BYTES} bytes`, async () => {
    const org = `org_huge_${seq++}`;
    fake.mode = 'huge';
    fake.hugeBytes = MAX_RERANK_ANSWER_BYTES + 1024;
    const out = await rerank(engine, principalOf(org), profileOf(org), QUERY, DOCUMENTS, 3);
    expect(out.outcome).toBe('rerank_failed');
    expect(out.outcome !== 'reranked' && out.reason).toBe(`the answer could not be read: the answer is over ${MAX_RERANK_ANSWER_BYTES} bytes`);
  });

  it('is rerank_failed, without a request, when the named key is not configured', async () => {
    const org = `org_nokey_${seq++}`;
    const out = await rerank(engine, principalOf(org), profileOf(org, { api_key_env: 'RERANK_KEY_NOBODY_SET' }), QUERY, DOCUMENTS, 3);
    expect(out).toEqual({ outcome: 'rerank_failed', reason: 'its API key (RERANK_KEY_NOBODY_SET) is not configured' });
    expect(fake.requests).toHaveLength(0);
  });

  it('is rerank_failed when the reranker cannot be reached', async () => {
    const org = `org_down_${seq++}`;
    const out = await rerank(engine, principalOf(org), profileOf(org, { base_url: 'http://127.0.0.1:1/v1' }), QUERY, DOCUMENTS, 3);
    expect(out).toEqual({ outcome: 'rerank_failed', reason: 'the reranker cannot be reached (ECONNREFUSED)' });
  });

  it('is rerank_failed when the caller goes away, and the request is aborted', async () => {
    const org = `org_left_${seq++}`;
    fake.mode = 'slow';
    fake.slowMs = 2_000;
    const aborted = fake.aborted;
    const caller = new AbortController();
    setTimeout(() => caller.abort(new Error('client left')), 100);
    const out = await rerank(engine, principalOf(org), profileOf(org), QUERY, DOCUMENTS, 3, caller.signal);
    expect(out).toEqual({ outcome: 'rerank_failed', reason: 'the caller went away' });
    await expect.poll(() => fake.aborted).toBe(aborted + 1);
  });
});

describe('rerank metering', () => {
  it('records every call as an ai.rerank event: profile, status, error code, latency, bytes sent and reported tokens', async () => {
    const org = `org_meter_${seq++}`;
    const principal = principalOf(org);
    await rerank(engine, principal, profileOf(org), QUERY, DOCUMENTS, 3);
    fake.mode = 'fail';
    await rerank(engine, principal, profileOf(org), QUERY, DOCUMENTS, 3);
    fake.mode = 'slow';
    fake.slowMs = 1_000;
    await rerank(engine, principal, profileOf(org, { id: 'slow-one', timeout_ms: 50 }), QUERY, DOCUMENTS, 3);
    await rerank(engine, principal, profileOf(org, { api_key_env: 'RERANK_KEY_NOBODY_SET' }), QUERY, DOCUMENTS, 3);
    // No documents: no call, nothing metered.
    await rerank(engine, principal, profileOf(org), QUERY, [], 3);

    // A kind of its own, which `GET /v1/activity?kind=ai.rerank` selects.
    expect(isActivityKind('ai.rerank')).toBe(true);
    const events = (await eventsOf(org)).sort((a, b) => a.id.localeCompare(b.id));
    expect(events.map((e) => [e.kind, e.route, e.status, e.outcome, e.error_code])).toEqual([
      ['ai.rerank', 'jina', 200, 'success', null],
      ['ai.rerank', 'jina', 502, 'server_error', 'rerank_failed'],
      ['ai.rerank', 'slow-one', 504, 'server_error', 'rerank_timeout'],
      ['ai.rerank', 'jina', 502, 'server_error', 'rerank_failed'],
    ]);
    const bytes = Buffer.byteLength(QUERY) + DOCUMENTS.reduce((n, d) => n + Buffer.byteLength(d), 0);
    expect(events[0]).toMatchObject({
      organization_id: org, actor_kind: 'secret_key', actor_id: principal.credentialId, source: 'ai', method: 'POST', bytes_in: bytes,
      usage: { prompt_tokens: 42, completion_tokens: 0, total_tokens: 42, cost_usd: 0 },
    });
    expect(events[1].usage).toEqual({ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_usd: 0 });
    expect(events[2].latency_ms).toBeGreaterThanOrEqual(49);
    expect(events[2].latency_ms).toBeLessThan(1_000);
    for (const e of events) expect(typeof e.latency_ms).toBe('number');
  });
});
