/**
 * Rerank provider `bedrock` (lambdas/ai/providers/rerank/bedrock.ts) through the rerank call, against
 * a mocked Bedrock Agent Runtime client (aws-sdk-client-mock): the Rerank request a call maps to, the
 * model ARN made from an id, the endpoint's region, and every failure as an outcome, never a throw.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mockClient } from 'aws-sdk-client-mock';
import { BedrockAgentRuntimeClient, RerankCommand, ThrottlingException, type RerankCommandOutput } from '@aws-sdk/client-bedrock-agent-runtime';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { rerank } from '../../lambdas/vector/rerank.js';
import type { RerankProfile } from '../../lambdas/vector/rerank-profiles.js';
import { activityRecordOf, flushActivity } from '../../lambdas/activity/activity.js';
import { segmentEvents } from '../../lambdas/activity/segments.js';

const mock = mockClient(BedrockAgentRuntimeClient);
let dir: string;
let engine: Engine;
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
const region = process.env.AWS_REGION;
let seq = 0;

beforeAll(() => {
  process.env.AWS_REGION = 'us-west-2';
  dir = mkdtempSync(join(tmpdir(), 'rerank-bedrock-'));
  engine = createEmbeddedEngine({ dataDir: dir, clock });
});
afterAll(async () => {
  mock.restore();
  if (region === undefined) delete process.env.AWS_REGION;
  else process.env.AWS_REGION = region;
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => mock.reset());

const principalOf = (organizationId: string): Principal => ({
  kind: 'secret_key', credentialId: `key_${seq++}`, organizationId, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null,
});
const profileOf = (over: Partial<RerankProfile> = {}): RerankProfile => ({
  id: 'bedrock-rerank', organization_id: 'org_1', provider: 'bedrock', base_url: null, model: 'amazon.rerank-v1:0', api_key_env: null,
  timeout_ms: 10_000, created_at: '2026-06-01T00:00:00.000Z', updated_at: '2026-06-01T00:00:00.000Z', ...over,
});
const DOCUMENTS = ['first passage', 'second passage', 'third passage'];
const optionsOf = (call: { args: readonly unknown[] }) => (call.args as unknown[])[1] as { abortSignal?: AbortSignal } | undefined;

describe('rerank through bedrock', () => {
  it('sends one Rerank request (text query, inline text sources, the model ARN in the region) and sorts the results', async () => {
    mock.on(RerankCommand).resolves({ results: [{ index: 0, relevanceScore: 0.1 }, { index: 2, relevanceScore: 0.9 }] });
    const out = await rerank(engine, principalOf('org_b1'), profileOf(), 'which passage', DOCUMENTS, 2);
    expect(out).toEqual({ outcome: 'reranked', results: [{ index: 2, relevance_score: 0.9 }, { index: 0, relevance_score: 0.1 }] });
    const calls = mock.commandCalls(RerankCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0].args[0].input).toEqual({
      queries: [{ type: 'TEXT', textQuery: { text: 'which passage' } }],
      sources: DOCUMENTS.map((text) => ({ type: 'INLINE', inlineDocumentSource: { type: 'TEXT', textDocument: { text } } })),
      rerankingConfiguration: {
        type: 'BEDROCK_RERANKING_MODEL',
        bedrockRerankingConfiguration: { numberOfResults: 2, modelConfiguration: { modelArn: 'arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0' } },
      },
    });
    expect(optionsOf(calls[0])?.abortSignal).toBeInstanceOf(AbortSignal);
  });

  it('passes a model ARN as it is, and makes the ARN in the region of an endpoint the profile names', async () => {
    mock.on(RerankCommand).resolves({ results: [{ index: 1, relevanceScore: 0.5 }] });
    const arn = 'arn:aws:bedrock:eu-west-1::foundation-model/cohere.rerank-v3-5:0';
    expect((await rerank(engine, principalOf('org_b2'), profileOf({ model: arn }), 'q', DOCUMENTS, 1)).outcome).toBe('reranked');
    const endpoint = 'https://bedrock-agent-runtime.eu-central-1.amazonaws.com';
    expect((await rerank(engine, principalOf('org_b2'), profileOf({ base_url: endpoint, model: 'cohere.rerank-v3-5:0' }), 'q', DOCUMENTS, 1)).outcome).toBe('reranked');
    const arns = mock.commandCalls(RerankCommand).map((c) => c.args[0].input.rerankingConfiguration?.bedrockRerankingConfiguration?.modelConfiguration?.modelArn);
    expect(arns).toEqual([arn, 'arn:aws:bedrock:eu-central-1::foundation-model/cohere.rerank-v3-5:0']);
  });

  it("is rerank_failed on Bedrock's error, naming only its kind", async () => {
    mock.on(RerankCommand).rejects(new ThrottlingException({ message: 'Too many requests for model ... query text here', $metadata: { httpStatusCode: 429 } }));
    expect(await rerank(engine, principalOf('org_b3'), profileOf(), 'q', DOCUMENTS, 2)).toEqual({ outcome: 'rerank_failed', reason: 'Bedrock answered ThrottlingException (429)' });
  });

  it.each([
    ['no results', {}, 'the answer has no results list'],
    ['a score missing', { results: [{ index: 0 }, { index: 1, relevanceScore: 0.2 }] }, 'the answer has a score that is not a finite number (index 0)'],
    ['an index out of range', { results: [{ index: 3, relevanceScore: 0.2 }, { index: 1, relevanceScore: 0.2 }] }, 'the answer has an index out of range (3)'],
    ['too few', { results: [{ index: 1, relevanceScore: 0.2 }] }, 'the answer has only 1 of the 2 results asked for'],
  ])('is rerank_failed on an answer with %s', async (_name, answer, reason) => {
    // Malformed on purpose: not what the SDK's types allow.
    mock.on(RerankCommand).resolves(answer as unknown as RerankCommandOutput);
    expect(await rerank(engine, principalOf('org_b4'), profileOf(), 'q', DOCUMENTS, 2)).toEqual({ outcome: 'rerank_failed', reason });
  });

  it('is rerank_timeout when Bedrock does not answer within the timeout, and the request is aborted', async () => {
    // Never answers, whatever the signal does: the call still ends at the deadline.
    mock.on(RerankCommand).callsFake(() => new Promise(() => undefined));
    const started = performance.now();
    const out = await rerank(engine, principalOf('org_b5'), profileOf({ timeout_ms: 100 }), 'q', DOCUMENTS, 2);
    expect(out).toEqual({ outcome: 'rerank_timeout', reason: 'no answer within 100 ms' });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(optionsOf(mock.commandCalls(RerankCommand)[0])?.abortSignal?.aborted).toBe(true);
  });

  it('meters the call as an ai.rerank event of the profile (no tokens: Bedrock reports none)', async () => {
    const org = `org_b6_${process.pid}`;
    mock.on(RerankCommand).resolves({ results: [{ index: 0, relevanceScore: 0.3 }] });
    await rerank(engine, principalOf(org), profileOf(), 'q', DOCUMENTS, 1);
    await flushActivity(engine);
    const day = new Date(clock.now()).toISOString().slice(0, 10);
    const events = (await engine.kv.query({ pk: `act#${org}#${day}` })).items.flatMap(segmentEvents).map(activityRecordOf);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ kind: 'ai.rerank', route: 'bedrock-rerank', status: 200, usage: { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_usd: 0 } });
  });
});
