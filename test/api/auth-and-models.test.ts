/**
 * Through the local server with a real HTTP client: GET /v1/models and the credential rules of spec
 * section 5 (1, 2, 3, 5), on all three APIs, including paths that do not exist.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { adminOk } from '../helpers/cli.js';
import { OPERATION_ID_PATTERN } from '../../lambdas/http/middleware/operation-id.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { ManualClock } from '../../lambdas/engine/clock.js';

let p: TestPlatform;
// The credential cache's time passes when a test says so (the CLI, another process, keeps the wall clock).
const clock = new ManualClock(Date.now());
const ZERO_KEY = `aik_${'0'.repeat(64)}`;

beforeAll(async () => {
  p = await startTestPlatform({ clock });
});
afterAll(async () => p?.close());

const get = (url: string, headers: Record<string, string> = {}) => fetch(url, { headers });

async function expectError(res: Response, status: number, code: string, param: string | null = null) {
  expect(res.status).toBe(status);
  expect(res.headers.get('content-type')).toBe('application/json');
  const body: any = await res.json();
  expect(body).toEqual({ error: { code, message: expect.any(String), type: expect.any(String), param } });
  expect(JSON.stringify(body)).not.toMatch(/at .*\.ts:\d+/); // never a stack trace
}

describe('GET /v1/models', () => {
  it('lists the organization routes with the bootstrapped key', async () => {
    const org = p.credentials.organization_id;
    adminOk(p.dataDir, 'route', 'set', '--org', org, '--id', 'fast-chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', 'https://llm.example/v1', '--model', 'gpt-4o-mini', '--default');
    adminOk(p.dataDir, 'route', 'set', '--org', org, '--id', 'embed', '--endpoint', '/v1/embeddings', '--provider', 'bedrock', '--model', 'amazon.titan-embed-text-v2:0');
    const res = await get(`${p.urls.ai}/v1/models`, bearer(p.credentials.secret_key));
    expect(res.status).toBe(200);
    const body: any = await res.json();
    expect(body.object).toBe('list');
    expect(body.data).toEqual(
      expect.arrayContaining([
        { id: 'fast-chat', object: 'model', created: expect.any(Number), owned_by: org, endpoint: '/v1/chat/completions' },
        { id: 'embed', object: 'model', created: expect.any(Number), owned_by: org, endpoint: '/v1/embeddings' },
      ]),
    );
    expect(body.data).toHaveLength(2);
    // Upstream settings never leak to clients.
    expect(JSON.stringify(body)).not.toContain('llm.example');
  });

  it("never shows one organization's routes to another organization's key", async () => {
    const other = adminOk(p.dataDir, 'org', 'create', '--name', 'Other');
    const key = adminOk(p.dataDir, 'key', 'create', '--org', other.id);
    adminOk(p.dataDir, 'route', 'set', '--org', other.id, '--id', 'secret-route', '--endpoint', '/v1/run', '--provider', 'http', '--base-url', 'https://runner.example/run');
    const theirs: any = await (await get(`${p.urls.ai}/v1/models`, bearer(key.key))).json();
    expect(theirs.data.map((r: { id: string }) => r.id)).toEqual(['secret-route']);
    const ours: any = await (await get(`${p.urls.ai}/v1/models`, bearer(p.credentials.secret_key))).json();
    expect(ours.data.map((r: { id: string }) => r.id)).not.toContain('secret-route');
  });

  // The other tests that start a server turn this cache off (MODEL_ROUTES_CACHE_MS=0); here it holds.
  it('keeps an organization\'s routes for MODEL_ROUTES_CACHE_MS: a route set by another process shows once that time has passed', async () => {
    useSettings({ modelRoutesCacheMs: 1000 });
    try {
      const org = adminOk(p.dataDir, 'org', 'create', '--name', 'Cached routes').id as string;
      const key = adminOk(p.dataDir, 'key', 'create', '--org', org).key as string;
      const route = (id: string) => adminOk(p.dataDir, 'route', 'set', '--org', org, '--id', id, '--endpoint', '/v1/run', '--provider', 'http', '--base-url', 'https://runner.example/run');
      const listed = async () => ((await (await get(`${p.urls.ai}/v1/models`, bearer(key))).json()) as any).data.map((r: { id: string }) => r.id).sort();
      route('first');
      expect(await listed()).toEqual(['first']);
      route('second'); // the admin CLI: another process, so this one's cache is not told
      expect(await listed()).toEqual(['first']);
      clock.advance(999);
      expect(await listed()).toEqual(['first']);
      clock.advance(1);
      expect(await listed()).toEqual(['first', 'second']);
    } finally {
      useSettings();
    }
  });

  it('echoes a valid X-Operation-Id, makes one up when none is sent, refuses a malformed one', async () => {
    const echoed = await get(`${p.urls.ai}/v1/models`, { ...bearer(p.credentials.secret_key), 'x-operation-id': 'op-12345678' });
    expect(echoed.headers.get('x-operation-id')).toBe('op-12345678');
    const made = await get(`${p.urls.ai}/v1/models`, bearer(p.credentials.secret_key));
    expect(made.headers.get('x-operation-id')).toMatch(OPERATION_ID_PATTERN);
    const bad = await get(`${p.urls.ai}/v1/models`, { ...bearer(p.credentials.secret_key), 'x-operation-id': 'short' });
    // The param names the header (the OpenAPI fuzzer found it null).
    await expectError(bad, 400, 'invalid_operation_id', 'x-operation-id');
    expect(bad.headers.get('x-operation-id')).toMatch(OPERATION_ID_PATTERN);
  });
});

describe('credentials (spec section 5)', () => {
  const paths = ['/v1/models', '/v1/no-such-path'];

  for (const path of paths) {
    it(`answers 401 missing_credentials and invalid_credentials on ${path}`, async () => {
      await expectError(await get(`${p.urls.ai}${path}`), 401, 'missing_credentials');
      await expectError(await get(`${p.urls.ai}${path}`, bearer(ZERO_KEY)), 401, 'invalid_credentials');
      await expectError(await get(`${p.urls.ai}${path}`, { authorization: `Basic ${ZERO_KEY}` }), 401, 'invalid_credentials');
      await expectError(await get(`${p.urls.ai}${path}`, bearer('aik_short')), 401, 'invalid_credentials');
    });
  }

  it('answers 401 identically on every API, for POSTs to unknown paths too, before reading the body', async () => {
    for (const api of ['ai', 'data', 'events'] as const) {
      await expectError(await get(`${p.urls[api]}/v1/anything/at/all`), 401, 'missing_credentials');
      const res = await fetch(`${p.urls[api]}/v1/nothing`, { method: 'POST', headers: { ...bearer(ZERO_KEY), 'content-type': 'application/json' }, body: '{not json' });
      await expectError(res, 401, 'invalid_credentials');
    }
  });

  it('answers 404 not_found for an unknown path once the credential is valid', async () => {
    for (const api of ['ai', 'data', 'events'] as const) {
      await expectError(await get(`${p.urls[api]}/v1/no-such-path`, bearer(p.credentials.secret_key)), 404, 'not_found');
    }
  });

  it('answers 403 key_disabled for a key disabled with the CLI, and works again once enabled', async () => {
    useSettings({ credentialCacheMs: 100 });
    try {
      const key = adminOk(p.dataDir, 'key', 'create', '--org', p.credentials.organization_id);
      expect((await get(`${p.urls.ai}/v1/models`, bearer(key.key))).status).toBe(200);
      adminOk(p.dataDir, 'key', 'disable', '--key-id', key.id);
      clock.advance(150);
      for (const api of ['ai', 'data', 'events'] as const) {
        await expectError(await get(`${p.urls[api]}/v1/models`, bearer(key.key)), 403, 'key_disabled');
      }
      adminOk(p.dataDir, 'key', 'enable', '--key-id', key.id);
      clock.advance(150);
      expect((await get(`${p.urls.ai}/v1/models`, bearer(key.key))).status).toBe(200);
    } finally {
      useSettings();
    }
  });

  it('answers 403 organization_disabled for every key of a disabled organization', async () => {
    useSettings({ credentialCacheMs: 100 });
    try {
      const org = adminOk(p.dataDir, 'org', 'create', '--name', 'Doomed');
      const key = adminOk(p.dataDir, 'key', 'create', '--org', org.id);
      expect((await get(`${p.urls.ai}/v1/models`, bearer(key.key))).status).toBe(200);
      adminOk(p.dataDir, 'org', 'disable', '--org', org.id);
      clock.advance(150);
      await expectError(await get(`${p.urls.ai}/v1/models`, bearer(key.key)), 403, 'organization_disabled');
    } finally {
      useSettings();
    }
  });

  it('keeps a resolved key cached, so a disable takes effect only after the cache time', async () => {
    useSettings({ credentialCacheMs: 60_000 });
    try {
      const key = adminOk(p.dataDir, 'key', 'create', '--org', p.credentials.organization_id);
      expect((await get(`${p.urls.ai}/v1/models`, bearer(key.key))).status).toBe(200);
      adminOk(p.dataDir, 'key', 'disable', '--key-id', key.id);
      // Still cached: the hot path did not read the store again.
      expect((await get(`${p.urls.ai}/v1/models`, bearer(key.key))).status).toBe(200);
    } finally {
      useSettings();
    }
  });

  it('an application-bound key works on routes without a capability', async () => {
    const app = adminOk(p.dataDir, 'app', 'create', '--workspace', p.credentials.workspace_id, '--name', 'shop', '--capabilities', 'ai.chat');
    expect(app).toMatchObject({ workspace_id: p.credentials.workspace_id, capabilities: ['ai.chat'] });
    const key = adminOk(p.dataDir, 'key', 'create', '--org', p.credentials.organization_id, '--app', app.id);
    expect((await get(`${p.urls.ai}/v1/models`, bearer(key.key))).status).toBe(200);
  });
});

describe('request limits', () => {
  it('answers 413 for a body over the gateway ceiling without reading it all', async () => {
    const res = await fetch(`${p.urls.data}/v1/databases`, {
      method: 'POST',
      headers: { ...bearer(p.credentials.secret_key), 'content-type': 'application/json' },
      body: Buffer.alloc(10 * 1024 * 1024 + 1, 0x20),
    });
    await expectError(res, 413, 'payload_too_large');
    const ai = await fetch(`${p.urls.ai}/v1/models`, {
      method: 'POST',
      headers: { ...bearer(p.credentials.secret_key), 'content-type': 'application/json' },
      body: Buffer.alloc(10 * 1024 * 1024 + 1, 0x20),
    });
    await expectError(ai, 413, 'request_too_large');
  });
});
