/**
 * A transcription route priced by the minute of audio (`price_per_minute`): the route check, the cost
 * of a call's seconds, and a real call through the gateway (lambdas/ai/gateway.ts) to a fake
 * transcription upstream on loopback: the seconds it is charged (the upstream's duration, else the
 * caller's own measure of the file, else the last segment's end), recorded as `audio_seconds` and
 * `cost_usd`, held against the budget before the call and spent after it.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { ModelRoutes, type ModelRoute } from '../../lambdas/ai/model-routes.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';
import { budgetState, orgScope } from '../../lambdas/ai/limits.js';
import { costOf } from '../../lambdas/ai/usage.js';
import { transcription } from '../../lambdas/ai/gateway.js';
import { PlatformError } from '../../lambdas/shared/errors.js';
import { activityRecordOf, flushActivity } from '../../lambdas/activity/activity.js';
import { segmentEvents } from '../../lambdas/activity/segments.js';
import { startFakeTranscriber, type FakeTranscriber } from '../helpers/fake-transcriber.js';

let dir: string;
let engine: Engine;
let fake: FakeTranscriber;
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
let seq = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'audio-price-'));
  engine = createEmbeddedEngine({ dataDir: dir, clock });
  fake = await startFakeTranscriber();
});
afterAll(async () => {
  await fake?.close();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  fake.mode = 'script';
  fake.requests.length = 0;
});

const routes = () => new ModelRoutes(engine.kv, () => clock.now());
const principalOf = (organizationId: string): Principal => ({
  kind: 'secret_key', credentialId: `key_${seq++}`, organizationId, applicationId: null, workspaceId: null, capabilities: null, userId: null, claims: null, origins: null, permissions: null,
});

/** A new organization with a transcription route at 0.006 USD a minute (whisper-1's list price). */
async function organization(): Promise<{ org: string; principal: Principal; route: ModelRoute }> {
  const org = `org_audio_${seq++}`;
  const route = await routes().set(org, { id: 'whisper', endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', base_url: fake.baseUrl, upstream_model: 'whisper-1', default: true, price_per_minute: 0.006 });
  return { org, principal: principalOf(org), route };
}

/** Bytes the fake does not read: what it answers is its script's. */
const piece = (audioSecondsFallback?: number) => ({ bytes: new Uint8Array(64), filename: 'piece.mp3', contentType: 'audio/mpeg', audioSecondsFallback });
const SEGMENTS = [{ start: 0, end: 20, text: ' hello' }, { start: 20, end: 30, text: ' there' }];

async function usageOf(org: string) {
  await flushActivity(engine);
  const day = new Date(clock.now()).toISOString().slice(0, 10);
  const page = await engine.kv.query({ pk: `act#${org}#${day}` });
  return page.items.flatMap(segmentEvents).map(activityRecordOf).filter((r) => r.kind === 'ai.usage').map((r) => r.usage);
}

describe('price_per_minute', () => {
  it('is taken on transcription routes only, from 0 USD, and reads null on a route stored before it existed', async () => {
    const org = `org_audio_${seq++}`;
    const chat = { id: 'chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: 'https://api.example/v1' };
    await expect(routes().set(org, { ...chat, price_per_minute: 0.006 })).rejects.toThrow(/price_per_minute prices minutes of audio: it is for \/v1\/audio\/transcriptions routes only, not \/v1\/chat\/completions/);
    await expect(routes().set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'bedrock', price_per_minute: 0 })).rejects.toThrow(/not \/v1\/embeddings/);
    const transcribe = { id: 'whisper', endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', base_url: 'https://api.example/v1' };
    for (const bad of [-0.01, Number.POSITIVE_INFINITY, Number.NaN, 1_000_001]) {
      await expect(routes().set(org, { ...transcribe, price_per_minute: bad })).rejects.toThrow('price_per_minute must be a number of USD from 0');
    }
    expect((await routes().set(org, { ...transcribe, price_per_minute: 0 })).price_per_minute).toBe(0);
    expect((await routes().set(org, transcribe)).price_per_minute).toBeNull();
    expect((await routes().set(org, chat)).price_per_minute).toBeNull();
    // An item written before the field existed (no price_per_minute at all).
    await engine.kv.put({ pk: `org#${org}`, sk: 'route#old', id: 'old', organization_id: org, endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', base_url: 'https://api.example/v1', upstream_model: 'whisper-1', default: false, owned_by: org, created: 0 });
    const old = (await new ModelRoutes(engine.kv, () => clock.now() + 60_000).list(org)).find((r) => r.id === 'old');
    expect(old?.price_per_minute).toBeNull();
  });

  it('costs its minutes of audio on top of any token price', async () => {
    const { route } = await organization();
    expect(costOf(route, { inputTokens: 0, outputTokens: 0, audioSeconds: 90 })).toBeCloseTo(0.009, 12);
    expect(costOf(route, { inputTokens: 0, outputTokens: 0 })).toBe(0);
    expect(costOf({ ...route, price_in_per_mtok: 2.5 }, { inputTokens: 1000, outputTokens: 0, audioSeconds: 30 })).toBeCloseTo(0.0025 + 0.003, 12);
    // A route without a minute price charges no audio.
    expect(costOf({ ...route, price_per_minute: null }, { inputTokens: 0, outputTokens: 0, audioSeconds: 600 })).toBe(0);
  });
});

describe('a transcription on a route priced by the minute', () => {
  it("is charged the upstream's duration, recorded as audio_seconds and cost_usd", async () => {
    const { org, principal, route } = await organization();
    fake.script = () => ({ text: 'hello there', duration: 120, segments: SEGMENTS });
    const transcript = await transcription({ engine, principal }, route, piece(100));
    expect(transcript.usage).toEqual({ inputTokens: 0, outputTokens: 0, audioSeconds: 120 });
    expect(await usageOf(org)).toEqual([{ prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_usd: 0.012, audio_seconds: 120 }]);
  });

  it("without a duration from the upstream: whisper's usage seconds, else the caller's measure of the file, else the last segment's end", async () => {
    const { org, principal, route } = await organization();
    fake.script = () => ({ text: 'hello there', segments: SEGMENTS, usage: { type: 'duration', seconds: 50 } });
    expect((await transcription({ engine, principal }, route, piece(45))).usage.audioSeconds).toBe(50);
    fake.script = () => ({ text: 'hello there', segments: SEGMENTS });
    // The piece was 45 s long: charged 45 s, not the 30 s its last segment ends at (silence is billed too).
    expect((await transcription({ engine, principal }, route, piece(45))).usage.audioSeconds).toBe(45);
    expect((await transcription({ engine, principal }, route, piece())).usage.audioSeconds).toBe(30);
    expect((await usageOf(org)).map((u) => [u?.audio_seconds, u?.cost_usd])).toEqual([
      [50, 0.005],
      [45, 0.0045],
      [30, 0.003],
    ]);
  });

  it("holds the piece's worst cost against the budget before calling, refusing with no upstream call what would pass it, and spends what was charged", async () => {
    const { org, principal, route } = await organization();
    await new AiOrgSettings(engine.kv, () => clock.now()).setLimits(org, { budget_usd: 0.01 });
    fake.script = () => ({ text: 'hello there', duration: 60, segments: SEGMENTS });
    // A 2-minute piece holds 0.012 USD: over the 0.01 budget, refused before the upstream is called.
    const refused = await transcription({ engine, principal }, route, piece(120)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(PlatformError);
    expect((refused as PlatformError).code).toBe('budget_exhausted');
    expect(fake.requests).toHaveLength(0);
    // A 1-minute one fits, and spends its 0.006 USD.
    await transcription({ engine, principal }, route, piece(60));
    expect(fake.requests).toHaveLength(1);
    expect(await budgetState(engine.kv, orgScope(org), clock.now())).toEqual({ spent_usd: 0.006, held_usd: 0 });
  });
});
