/**
 * A response is a chat call (docs/ai/openai-compatibility.md, "Responses"): the organization's
 * limits, budget, usage and activity apply to `POST /v1/responses` exactly as to
 * `/v1/chat/completions`, set with the admin CLI's own commands, seen in the activity log.
 */
import OpenAI, { RateLimitError } from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { runCommand } from '../../lambdas/admin/cli.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';

let w: OpenAiWorld;
let client: OpenAI;
let org: string;
const limits = (...args: string[]) => runCommand(w.p.engine, ['org', 'limits', '--org', org, ...args]);

beforeAll(async () => {
  // Limits set by the CLI hold from the next call (no settings cache).
  useSettings({ modelRoutesCacheMs: 0 });
  w = await startOpenAiWorld();
  org = w.p.credentials.organization_id;
  // The chat route priced: $1 per million tokens in and out, at most 100 out.
  await new ModelRoutes(w.p.engine.kv, () => w.p.engine.clock.now()).set(org, {
    id: 'chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: w.upstream.baseUrl, upstream_model: 'gpt-fake', default: true,
    max_tokens: 100, price_in_per_mtok: 1, price_out_per_mtok: 1,
  });
  client = w.clientFor(w.p.credentials.secret_key, { maxRetries: 0 });
});

afterAll(async () => {
  await w?.close();
  useSettings(undefined);
});

async function usageEvents(): Promise<any[]> {
  const res = await fetch(`${w.p.urls.data}/v1/activity?kind=ai.usage&limit=500`, { headers: { authorization: `Bearer ${w.p.credentials.secret_key}` } });
  expect(res.status).toBe(200);
  return ((await res.json()) as { items: any[] }).items;
}

it("records the call's usage and cost in the activity log, as chat's, and spends the budget", async () => {
  const before = (await usageEvents()).length;
  const response = await client.responses.create({ model: 'chat', input: 'Hello there' });
  // The fake upstream reports 11 tokens in, 7 out.
  expect(response.usage).toMatchObject({ input_tokens: 11, output_tokens: 7, total_tokens: 18 });
  const events = await usageEvents();
  expect(events.length).toBe(before + 1);
  expect(events[0]).toMatchObject({ kind: 'ai.usage', status: 200, route: 'chat', usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18, cost_usd: 0.000018 } });
  await limits('--budget-usd', '1');
  await client.responses.create({ model: 'chat', input: 'Hello there' });
  const state = (await limits()) as { budget: { spent_usd: number; held_usd: number } };
  expect(state.budget.spent_usd).toBeCloseTo(0.000018, 9);
  expect(state.budget.held_usd).toBe(0);
  await limits('--budget-usd', 'none');
});

it('a budget it cannot cover: 429 budget_exhausted before any upstream call', async () => {
  await limits('--budget-usd', '0.00001');
  const calls = w.upstream.requests.length;
  const refused = await client.responses.create({ model: 'chat', input: 'Hello there' }).catch((e) => e);
  expect(refused).toBeInstanceOf(RateLimitError);
  expect(refused.code).toBe('budget_exhausted');
  expect(w.upstream.requests.length).toBe(calls);
  await limits('--budget-usd', 'none');
});

it('--rpm: the calls past it are 429 rate_limited, counted with chat completions', async () => {
  await limits('--rpm', '2');
  const chat = w.clientFor(w.p.credentials.secret_key, { maxRetries: 0 });
  await chat.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] }, { headers: { 'X-Operation-Id': `op-rpm-${Date.now()}` } });
  await client.responses.create({ model: 'chat', input: 'Hello there' });
  const refused = await client.responses.create({ model: 'chat', input: 'Hello there' }).catch((e) => e);
  expect(refused).toBeInstanceOf(RateLimitError);
  expect(refused.code).toBe('rate_limited');
  await limits('--rpm', 'none');
});
