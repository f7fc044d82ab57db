/**
 * Rerank profiles (lambdas/vector/rerank-profiles.ts): what `set` refuses and what it stores, list,
 * delete, and the lookup a vector query makes through the per-process cache.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { settings } from '../../lambdas/shared/settings.js';
import {
  checkedProfile,
  DEFAULT_RERANK_TIMEOUT_MS,
  lookupRerankProfile,
  RerankProfileError,
  RerankProfiles,
  type RerankProfileInput,
} from '../../lambdas/vector/rerank-profiles.js';

let dir: string;
let engine: Engine;
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12));
let seq = 0;
const orgId = () => `org_rp_${process.pid}_${seq++}`;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'rerank-profiles-'));
  engine = createEmbeddedEngine({ dataDir: dir, clock });
});
afterAll(async () => {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

const JINA: RerankProfileInput = { id: 'jina', provider: 'openai-compatible', base_url: 'https://api.jina.ai/v1', model: 'jina-reranker-v2-base-multilingual' };
const refusal = (input: Partial<RerankProfileInput>) => {
  try {
    checkedProfile('org_1', { ...JINA, ...input } as RerankProfileInput, clock.now());
  } catch (error) {
    expect(error).toBeInstanceOf(RerankProfileError);
    return (error as Error).message;
  }
  return 'accepted';
};

describe('rerank profile validation', () => {
  it('accepts a good profile, with the default timeout', () => {
    expect(checkedProfile('org_1', JINA, clock.now())).toEqual({
      id: 'jina', organization_id: 'org_1', provider: 'openai-compatible', base_url: 'https://api.jina.ai/v1', model: 'jina-reranker-v2-base-multilingual',
      api_key_env: null, timeout_ms: DEFAULT_RERANK_TIMEOUT_MS, created_at: '2026-06-01T12:00:00.000Z', updated_at: '2026-06-01T12:00:00.000Z',
    });
    expect(DEFAULT_RERANK_TIMEOUT_MS).toBe(10_000);
  });

  it('takes names of 1 to 64 letters, digits, "_", "-", "."', () => {
    for (const ok of ['a', 'A.b_c-9', 'x'.repeat(64)]) expect(refusal({ id: ok })).toBe('accepted');
    for (const bad of ['', 'x'.repeat(65), 'has space', 'slash/no', 'colon:no', 'é']) expect(refusal({ id: bad })).toMatch(/^rerank profile id: 1 to 64 of letters/);
  });

  it('takes only the known providers', () => {
    expect(refusal({ provider: 'cohere' })).toBe('provider must be one of openai-compatible, bedrock');
  });

  it('needs an absolute http(s) base URL without credentials for openai-compatible', () => {
    expect(refusal({ base_url: undefined })).toMatch(/^provider openai-compatible needs --base-url/);
    expect(refusal({ base_url: 'api.jina.ai/v1' })).toBe('base_url must be an absolute http(s) URL');
    expect(refusal({ base_url: 'ftp://api.jina.ai/v1' })).toBe('base_url must be an absolute http(s) URL');
    expect(refusal({ base_url: 'https://user:pw@api.jina.ai/v1' })).toMatch(/^base_url must not carry credentials/);
    expect(refusal({ base_url: 'http://127.0.0.1:8080' })).toBe('accepted');
  });

  it('needs a model', () => {
    expect(refusal({ model: undefined })).toMatch(/^--model is needed/);
    expect(refusal({ model: '  ' })).toMatch(/^--model is needed/);
    expect(refusal({ provider: 'bedrock', base_url: undefined, model: undefined })).toMatch(/ARN or id/);
  });

  it('takes a timeout of 1 to 60,000 ms', () => {
    for (const ok of [1, 60_000]) expect(refusal({ timeout_ms: ok })).toBe('accepted');
    for (const bad of [0, 60_001, 1.5, Number.NaN, -5]) expect(refusal({ timeout_ms: bad })).toBe('timeout_ms must be a whole number from 1 to 60000');
  });

  it('names the key as routes do, never holds it; bedrock takes none', () => {
    expect(refusal({ api_key_env: 'JINA_API_KEY' })).toBe('accepted');
    expect(refusal({ api_key_env: 'prod/rerank-key' })).toBe('accepted');
    expect(refusal({ api_key_env: 'jina_abc def' })).toBe('api_key_env names an environment variable or a secret, not a key');
    expect(refusal({ provider: 'bedrock', base_url: undefined, model: 'amazon.rerank-v1:0', api_key_env: 'KEY' })).toMatch(/^a bedrock profile takes no --api-key-env/);
  });

  it('bedrock: base URL optional (the region\'s endpoint), model an id or an ARN', () => {
    expect(checkedProfile('org_1', { id: 'br', provider: 'bedrock', model: 'amazon.rerank-v1:0' }, clock.now())).toMatchObject({ provider: 'bedrock', base_url: null, model: 'amazon.rerank-v1:0' });
    expect(refusal({ provider: 'bedrock', base_url: 'https://bedrock-agent-runtime.us-west-2.amazonaws.com', model: 'arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0' })).toBe('accepted');
    expect(refusal({ provider: 'bedrock', base_url: 'not a url', model: 'amazon.rerank-v1:0' })).toBe('base_url must be an absolute http(s) URL');
  });
});

describe('rerank profile store', () => {
  it('sets, replaces (keeping created_at), lists per organization and deletes', async () => {
    const org = orgId();
    const other = orgId();
    const store = new RerankProfiles(engine.kv, () => clock.now());
    const first = await store.set(org, JINA);
    clock.advance(1000);
    const replaced = await store.set(org, { ...JINA, timeout_ms: 2500, api_key_env: 'JINA_API_KEY' });
    expect(replaced).toMatchObject({ timeout_ms: 2500, api_key_env: 'JINA_API_KEY', created_at: first.created_at });
    expect(replaced.updated_at).not.toBe(first.created_at);
    await store.set(org, { id: 'bedrock.amazon', provider: 'bedrock', model: 'amazon.rerank-v1:0' });
    await store.set(other, { ...JINA, id: 'theirs' });

    expect((await store.list(org)).map((p) => p.id)).toEqual(['bedrock.amazon', 'jina']);
    expect((await store.list(org)).find((p) => p.id === 'jina')).toEqual(replaced);
    expect(await lookupRerankProfile(engine, org, 'jina')).toEqual(replaced);
    expect(await lookupRerankProfile(engine, org, 'theirs')).toBeUndefined();
    expect(await lookupRerankProfile(engine, other, 'theirs')).toMatchObject({ organization_id: other });

    expect(await store.delete(org, 'jina')).toEqual({ id: 'jina', deleted: true });
    expect(await lookupRerankProfile(engine, org, 'jina')).toBeUndefined();
    await expect(store.delete(org, 'jina')).rejects.toThrow(new RerankProfileError(`no rerank profile jina in organization ${org} (rerank-profile list shows them)`));
  });

  it('a refused profile stores nothing', async () => {
    const org = orgId();
    const store = new RerankProfiles(engine.kv, () => clock.now());
    await expect(store.set(org, { ...JINA, timeout_ms: 0 })).rejects.toBeInstanceOf(RerankProfileError);
    expect(await store.list(org)).toEqual([]);
  });

  it('a lookup sees a change made by another process once MODEL_ROUTES_CACHE_MS has passed', async () => {
    const org = orgId();
    await new RerankProfiles(engine.kv, () => clock.now()).set(org, JINA);
    expect(await lookupRerankProfile(engine, org, 'jina')).toBeDefined();
    // Another process (the admin CLI) deletes it: this process's cache does not know yet.
    await engine.kv.delete({ pk: `org#${org}`, sk: 'rerank-profile#jina' });
    expect(await lookupRerankProfile(engine, org, 'jina')).toBeDefined();
    clock.advance(settings().modelRoutesCacheMs + 1);
    expect(await lookupRerankProfile(engine, org, 'jina')).toBeUndefined();
  });
});
