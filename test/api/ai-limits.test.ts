/**
 * Limits hold across processes. `npm start` with LOCAL_WORKERS=2, limits set with
 * the admin CLI as an operator would, calls through the AI API to a fake upstream on loopback: an
 * organization at `--rpm 5` gets exactly 5 answers in the minute; concurrent priced calls never spend
 * past `--budget-usd`; `--concurrency` refuses the calls past it; `--tpm` refuses a call over the tokens.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';

// No route cache: a limit set with the CLI holds from the next call.
const p = useLocalProcess('ai-limits-', { LOCAL_WORKERS: '2', MODEL_ROUTES_CACHE_MS: '0' });
let fake: FakeOpenAi;
let n = 0;

function call(model = 'chat', extra: Record<string, unknown> = {}) {
  return fetch(`${p.local.urls.ai}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${p.key}`, 'content-type': 'application/json', 'x-operation-id': `op-limits-${++n}-${Date.now()}` },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hello there' }], ...extra }),
  }).then(async (res) => ({ status: res.status, retryAfter: res.headers.get('retry-after'), code: ((await res.json()) as any).error?.code as string | undefined }));
}


beforeAll(async () => {
  fake = await startFakeOpenAi();
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default',
    '--max-tokens', '100', '--price-in-per-mtok', '1', '--price-out-per-mtok', '1');
}, 60_000);

afterAll(async () => {
  await fake?.close();
});

describe('limits across two workers', () => {
  it('--rpm 5: exactly 5 answers in the minute, the rest 429 rate_limited with Retry-After', async () => {
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--rpm', '5');
    // No need to start away from a minute's end: a burst crossing it gains floor(k × e / 60 s) calls
    // (k allowed before it, e ms after it), none while that part of the burst takes under 12 s.
    const answers = await Promise.all(Array.from({ length: 12 }, () => call()));
    expect(answers.filter((a) => a.status === 200)).toHaveLength(5);
    const refused = answers.filter((a) => a.status === 429);
    expect(refused).toHaveLength(7);
    for (const r of refused) {
      expect(r.code).toBe('rate_limited');
      expect(Number(r.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    // Sequential calls later in the same minute: still refused.
    expect((await call()).code).toBe('rate_limited');
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--rpm', 'none');
  });

  it('--budget-usd: 30 concurrent priced calls never spend past the budget; the calls it cannot cover are 429 budget_exhausted', async () => {
    // Worst case per call: 18 input tokens (11 bytes of text, framing) + 100 output tokens at $1 per
    // million = $0.000118; the upstream reports 18 tokens ($0.000018). A budget of $0.0005 covers four
    // worst cases at once.
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--budget-usd', '0.0005');
    fake.behavior = { status: 200, chunks: ['ok'], chunkDelayMs: 0, stallMs: 400 };
    const answers = await Promise.all(Array.from({ length: 30 }, () => call()));
    fake.behavior.stallMs = 0;
    const ok = answers.filter((a) => a.status === 200).length;
    const refused = answers.filter((a) => a.status === 429);
    expect(ok).toBeGreaterThanOrEqual(1);
    expect(ok).toBeLessThanOrEqual(4);
    expect(refused.length).toBe(30 - ok);
    for (const r of refused) expect(r.code).toBe('budget_exhausted');
    const state = adminOk(p.dataDir, 'org', 'limits', '--org', p.org);
    expect(state.budget.spent_usd).toBeCloseTo(ok * 0.000018, 9);
    expect(state.budget.spent_usd).toBeLessThanOrEqual(0.0005);
    expect(state.budget.held_usd).toBe(0);
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--budget-usd', 'none');
  });

  it('--concurrency 2: calls past two in flight are 429 concurrency_limited; --tpm refuses a call over the tokens with quota_exceeded', async () => {
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--concurrency', '2');
    fake.behavior = { status: 200, chunks: ['ok'], chunkDelayMs: 0, stallMs: 400 };
    const answers = await Promise.all(Array.from({ length: 6 }, () => call()));
    fake.behavior.stallMs = 0;
    expect(answers.filter((a) => a.status === 200)).toHaveLength(2);
    expect(answers.filter((a) => a.code === 'concurrency_limited')).toHaveLength(4);
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--concurrency', 'none', '--tpm', '150');
    // Each call in flight reserves its input estimate plus the route's 100-token ceiling: one fits in
    // 150, not two at once. (Once answered, a call's reservation is corrected to its real 18 tokens.)
    fake.behavior = { status: 200, chunks: ['ok'], chunkDelayMs: 0, stallMs: 400 };
    const both = await Promise.all([call(), call()]);
    fake.behavior.stallMs = 0;
    expect(both.map((a) => a.status).sort()).toEqual([200, 429]);
    expect(both.find((a) => a.status === 429)!.code).toBe('quota_exceeded');
    expect((await call()).status).toBe(200);
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--tpm', 'none');
  });
});
