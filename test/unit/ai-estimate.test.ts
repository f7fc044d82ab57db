/**
 * What an AI call may use before it runs (lambdas/ai/estimate.ts): the estimate tokens a minute take,
 * and the bound the budget holds. The bound counts every text's UTF-8 bytes (a byte-level BPE token is
 * at least one byte), what else becomes prompt, the framing and IMAGE_TOKENS_BOUND per image; and with
 * it, calls charged as much input as their text can possibly be never spend past a budget.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_MAX_OUTPUT_TOKENS, IMAGE_TOKENS_BOUND, estimateChat, estimateEmbeddings } from '../../lambdas/ai/estimate.js';
import { admitCall, budgetState, orgScope, type Admission } from '../../lambdas/ai/limits.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';
import { costOf } from '../../lambdas/ai/usage.js';
import type { ModelRoute } from '../../lambdas/ai/model-routes.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';

const bytes = (s: string) => Buffer.byteLength(s, 'utf8');

describe('estimateChat', () => {
  it('bounds text by its UTF-8 bytes, where the estimate counts 4 characters a token', () => {
    const text = '日本語のテキスト'.repeat(50); // 400 characters, 1,200 bytes
    const e = estimateChat([{ role: 'user', content: text }], 100);
    expect(e.inputTokens).toBe(100 + 4);
    expect(e.inputTokensBound).toBe(1200 + 4 + 3);
    expect(e.maxOutputTokens).toBe(100);
  });

  it('counts images, other parts, names, tool calls, tools and the response format in the bound', () => {
    const tools = [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }];
    const responseFormat = { type: 'json_schema', json_schema: { name: 'a', schema: { type: 'object' } } };
    const audio = { type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } };
    const toolCalls = [{ id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{"q":"x"}' } }];
    const messages = [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', name: 'ann', content: [{ type: 'text', text: 'What is in these?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,' + 'A'.repeat(10_000) } }, { type: 'image_url', image_url: { url: 'https://x.example/a.png' } }, audio] },
      { role: 'assistant', content: null, tool_calls: toolCalls },
    ];
    const e = estimateChat(messages, undefined, [tools, responseFormat]);
    const expected =
      3 + bytes(JSON.stringify(tools)) + bytes(JSON.stringify(responseFormat)) + 3 * 4 + bytes('Be brief.') + bytes('ann') + bytes('What is in these?') + 2 * IMAGE_TOKENS_BOUND + bytes(JSON.stringify(audio)) + bytes(JSON.stringify(toolCalls));
    expect(e.inputTokensBound).toBe(expected);
    // The image's data URL is not counted as text: an image costs its tokens, not its bytes.
    expect(e.inputTokensBound).toBeLessThan(10_000);
    expect(e.maxOutputTokens).toBe(DEFAULT_MAX_OUTPUT_TOKENS);
  });

  it('never bounds below the estimate, nor below the bytes of the text sent, for any messages', () => {
    const part = fc.oneof(fc.record({ type: fc.constant('text'), text: fc.string({ unit: 'grapheme' }) }), fc.record({ type: fc.constant('image_url'), image_url: fc.record({ url: fc.webUrl() }) }));
    const message = fc.record({ role: fc.constantFrom('user', 'assistant', 'system'), content: fc.oneof(fc.string({ unit: 'binary' }), fc.array(part, { maxLength: 4 })) });
    fc.assert(
      fc.property(fc.array(message, { maxLength: 6 }), (messages) => {
        const e = estimateChat(messages, 10);
        const textBytes = messages.reduce((n, m) => n + (typeof m.content === 'string' ? bytes(m.content) : m.content.reduce((k, p) => k + ('text' in p ? bytes(p.text) : 0), 0)), 0);
        expect(e.inputTokensBound).toBeGreaterThanOrEqual(e.inputTokens);
        expect(e.inputTokensBound).toBeGreaterThanOrEqual(textBytes);
      }),
      { numRuns: 300 },
    );
  });
});

describe('estimateEmbeddings', () => {
  it('bounds each input by its UTF-8 bytes', () => {
    const e = estimateEmbeddings(['abcd', 'é'.repeat(4), '🙂']);
    expect(e).toEqual({ inputTokens: 1 + 1 + 1, inputTokensBound: 4 + 8 + 4, maxOutputTokens: 0 });
  });
});

describe('the budget holds the bound', () => {
  let dir: string;
  let engine: Engine;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ai-estimate-'));
    engine = createEmbeddedEngine({ dataDir: dir, clock: new ManualClock(Date.parse('2026-11-26T12:00:00Z')) });
  });
  afterAll(async () => {
    await engine?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('20 concurrent calls in a script of 3 bytes a character, each charged one input token per byte (the worst its text can be), never spend past the budget', async () => {
    const org = `org_estimate_${Date.now()}`;
    const route: ModelRoute = {
      id: 'chat', organization_id: org, endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: 'http://upstream.invalid/v1',
      upstream_model: 'm', default: true, owned_by: org, created: 0, max_tokens: null, tools: true, timeout_ms: 10_000, tiers: null,
      price_in_per_mtok: 10, price_out_per_mtok: 10, price_per_minute: null, api_key_env: null,
    };
    const principal: Principal = {
      kind: 'secret_key', credentialId: 'key_estimate', organizationId: org, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null,
    };
    await new AiOrgSettings(engine.kv, () => engine.clock.now()).setLimits(org, { budget_usd: 0.05 });
    const text = '漢字'.repeat(500); // 1,000 characters: estimated 250 tokens, 3,000 bytes
    const estimate = estimateChat([{ role: 'user', content: text }], 10);
    // Each call charged its text's bytes: 3,007 × $10 / Mtok ≈ $0.03; the estimate alone would have held $0.0026.
    const worstUsage = { inputTokens: estimate.inputTokensBound, outputTokens: 10 };
    const results = await Promise.allSettled(Array.from({ length: 20 }, () => admitCall(engine, principal, route, estimate)));
    const admitted = results.filter((r): r is PromiseFulfilledResult<Admission> => r.status === 'fulfilled').map((r) => r.value);
    expect(admitted.length).toBe(1);
    await Promise.all(admitted.map((a) => a.settle(worstUsage, costOf(route, worstUsage))));
    const state = await budgetState(engine.kv, orgScope(org), engine.clock.now());
    expect(state.held_usd).toBe(0);
    expect(state.spent_usd).toBeLessThanOrEqual(0.05);
    expect(state.spent_usd).toBeCloseTo(admitted.length * costOf(route, worstUsage), 9);
  });
});
