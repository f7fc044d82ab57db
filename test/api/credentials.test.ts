/**
 * The four credentials of spec section 5 through the local server with a real HTTP client: OAuth
 * client tokens, publishable keys with origins and CORS, end-user tokens, and the browser rules.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { admin, adminOk } from '../helpers/cli.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useSettings } from '../../lambdas/shared/settings.js';

let p: TestPlatform;
let clock: ManualClock;
let app: { id: string };
let client: { client_id: string; client_secret: string };
let appKey: string;
const ALLOWED = 'https://shop.example';
const OTHER = 'https://evil.example';
let publishable: { id: string; key: string; origins: string[] };

beforeAll(async () => {
  clock = new ManualClock(Date.now());
  p = await startTestPlatform({ clock });
  app = adminOk(p.dataDir, 'app', 'create', '--workspace', p.credentials.workspace_id, '--name', 'shop', '--capabilities', 'ai.chat');
  client = adminOk(p.dataDir, 'oauth-client', 'create', '--app', app.id);
  appKey = adminOk(p.dataDir, 'key', 'create', '--org', p.credentials.organization_id, '--app', app.id).key;
  publishable = adminOk(p.dataDir, 'publishable-key', 'create', '--app', app.id, '--origins', `${ALLOWED},http://127.0.0.1:9999`);
});
afterAll(async () => p?.close());

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${id}:${secret}`).toString('base64')}`;
const form = 'application/x-www-form-urlencoded';

async function tokenRequest(url: string, init: { headers?: Record<string, string>; body?: string }) {
  const res = await fetch(`${url}/v1/oauth/token`, { method: 'POST', ...init });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

async function clientToken(url = p.urls.ai): Promise<string> {
  const r = await tokenRequest(url, { headers: { authorization: basic(client.client_id, client.client_secret), 'content-type': form }, body: 'grant_type=client_credentials' });
  expect(r.status).toBe(200);
  return r.body.access_token;
}

async function expectError(res: Response, status: number, code: string) {
  expect(res.status).toBe(status);
  expect(((await res.json()) as any).error.code).toBe(code);
}

const models = (headers: Record<string, string>) => fetch(`${p.urls.ai}/v1/models`, { headers });
/** A path no route serves: answering 404 proves the credential was accepted (401/403 otherwise). */
const probe = (api: 'data' | 'events', headers: Record<string, string>, method = 'GET') =>
  fetch(`${p.urls[api]}/v1/probe`, { method, headers });

describe('OAuth client access tokens (RFC 6749 4.4)', () => {
  it('issues a Bearer JWT on all three APIs, by Basic with a form and by a JSON body', async () => {
    for (const api of ['ai', 'data', 'events'] as const) {
      const r = await tokenRequest(p.urls[api], { headers: { authorization: basic(client.client_id, client.client_secret), 'content-type': form }, body: 'grant_type=client_credentials' });
      expect(r.status).toBe(200);
      expect(r.body).toEqual({ access_token: expect.stringMatching(/^[\w-]+\.[\w-]+\.[\w-]+$/), token_type: 'Bearer', expires_in: 3600 });
      expect(r.headers.get('cache-control')).toBe('no-store');
      const header = JSON.parse(Buffer.from(r.body.access_token.split('.')[0], 'base64url').toString());
      expect(header).toMatchObject({ alg: 'ES256', kid: expect.any(String) });
    }
    const json = await tokenRequest(p.urls.data, {
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
    });
    expect(json.status).toBe(200);
    const inForm = await tokenRequest(p.urls.events, {
      headers: { 'content-type': form },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }).toString(),
    });
    expect(inForm.status).toBe(200);
  });

  it('is accepted on AI, Data and Events with the application binding', async () => {
    const token = await clientToken();
    expect((await models(bearer(token))).status).toBe(200);
    await expectError(await probe('data', bearer(token)), 404, 'not_found');
    await expectError(await probe('events', bearer(token)), 404, 'not_found');
    // Bound to the application: it may mint end-user tokens for that application's users.
    const minted = await fetch(`${p.urls.data}/v1/end-user-tokens`, { method: 'POST', headers: { ...bearer(token), 'content-type': 'application/json' }, body: '{"user_id":"u1"}' });
    expect(minted.status).toBe(200);
  });

  it('answers RFC 6749 5.2 errors', async () => {
    const wrong = await tokenRequest(p.urls.ai, { headers: { authorization: basic(client.client_id, 'cls_wrong'), 'content-type': form }, body: 'grant_type=client_credentials' });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ error: 'invalid_client', error_description: expect.any(String) });
    expect(wrong.headers.get('www-authenticate')).toMatch(/^Basic/);
    const unknown = await tokenRequest(p.urls.ai, { headers: { 'content-type': form }, body: `grant_type=client_credentials&client_id=cli_nope&client_secret=x` });
    expect([unknown.status, unknown.body.error]).toEqual([401, 'invalid_client']);
    const none = await tokenRequest(p.urls.ai, { headers: { 'content-type': form }, body: 'grant_type=client_credentials' });
    expect([none.status, none.body.error]).toEqual([401, 'invalid_client']);
    const grant = await tokenRequest(p.urls.ai, { headers: { authorization: basic(client.client_id, client.client_secret), 'content-type': form }, body: 'grant_type=password' });
    expect([grant.status, grant.body.error]).toEqual([400, 'unsupported_grant_type']);
    const noGrant = await tokenRequest(p.urls.ai, { headers: { authorization: basic(client.client_id, client.client_secret), 'content-type': form }, body: '' });
    expect([noGrant.status, noGrant.body.error]).toEqual([400, 'invalid_request']);
    const twice = await tokenRequest(p.urls.ai, {
      headers: { authorization: basic(client.client_id, client.client_secret), 'content-type': form },
      body: `grant_type=client_credentials&client_id=${client.client_id}&client_secret=${client.client_secret}`,
    });
    expect([twice.status, twice.body.error]).toEqual([400, 'invalid_request']);
    const text = await tokenRequest(p.urls.ai, { headers: { 'content-type': 'text/plain' }, body: 'grant_type=client_credentials' });
    expect([text.status, text.body.error]).toEqual([400, 'invalid_request']);
    const badJson = await tokenRequest(p.urls.ai, { headers: { 'content-type': 'application/json' }, body: '{nope' });
    expect([badJson.status, badJson.body.error]).toEqual([400, 'invalid_request']);
  });

  it('refuses a tampered token with 401 invalid_credentials', async () => {
    const token = await clientToken();
    const [h, payload, sig] = token.split('.');
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, org: 'org_someone_else' })).toString('base64url')}.${sig}`;
    await expectError(await models(bearer(forged)), 401, 'invalid_credentials');
    const flipped = `${h}.${payload}.${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`;
    await expectError(await models(bearer(flipped)), 401, 'invalid_credentials');
    const none = `${Buffer.from('{"alg":"none","typ":"JWT"}').toString('base64url')}.${payload}.`;
    await expectError(await models(bearer(none)), 401, 'invalid_credentials');
  });

  it('refuses an expired token with 401 invalid_credentials', async () => {
    const token = await clientToken();
    expect((await models(bearer(token))).status).toBe(200);
    clock.advance(3600_000 + 60_000);
    await expectError(await models(bearer(token)), 401, 'invalid_credentials');
  });

  it("stops a revoked client's tokens within the cache time, and issues it no new ones", async () => {
    useSettings({ credentialCacheMs: 100 });
    try {
      const other = adminOk(p.dataDir, 'oauth-client', 'create', '--app', app.id);
      const r = await tokenRequest(p.urls.ai, { headers: { authorization: basic(other.client_id, other.client_secret), 'content-type': form }, body: 'grant_type=client_credentials' });
      const token = r.body.access_token;
      expect((await models(bearer(token))).status).toBe(200);
      expect(adminOk(p.dataDir, 'oauth-client', 'revoke', '--client-id', other.client_id)).toMatchObject({ client_id: other.client_id, revoked: true });
      clock.advance(150);
      await expectError(await models(bearer(token)), 401, 'invalid_credentials');
      const again = await tokenRequest(p.urls.ai, { headers: { authorization: basic(other.client_id, other.client_secret), 'content-type': form }, body: 'grant_type=client_credentials' });
      expect([again.status, again.body.error]).toEqual([401, 'invalid_client']);
    } finally {
      useSettings();
    }
  });
});

describe('publishable keys and origins', () => {
  const pk = () => bearer(publishable.key);

  it('prints the key once with its normalized origins', () => {
    expect(publishable).toEqual({ id: expect.stringMatching(/^pbk_/), key: expect.stringMatching(/^apb_[0-9a-f]{48}$/), origins: [ALLOWED, 'http://127.0.0.1:9999'] });
  });

  it('is accepted on Data from a listed origin, with CORS headers for that origin', async () => {
    const res = await probe('data', { ...pk(), origin: ALLOWED });
    expect(res.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    expect(res.headers.get('vary')).toBe('Origin');
    await expectError(res, 404, 'not_found');
  });

  it('answers 403 origin_not_allowed from another origin or with no origin, without CORS headers', async () => {
    const res = await probe('data', { ...pk(), origin: OTHER });
    expect(res.headers.get('access-control-allow-origin')).toBeNull();
    await expectError(res, 403, 'origin_not_allowed');
    await expectError(await probe('data', pk()), 403, 'origin_not_allowed');
  });

  it('is refused by the AI API and by Events routes other than the stream', async () => {
    await expectError(await models({ ...pk(), origin: ALLOWED }), 401, 'invalid_credentials');
    await expectError(await probe('events', { ...pk(), origin: ALLOWED }, 'POST'), 403, 'publishable_key_not_allowed');
  });

  it('answers a preflight for a listed origin with the methods the path takes, and refuses others', async () => {
    const ok = await fetch(`${p.urls.data}/v1/end-user-tokens`, {
      method: 'OPTIONS',
      headers: { origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe(ALLOWED);
    expect(ok.headers.get('access-control-allow-methods')).toBe('POST');
    expect(ok.headers.get('access-control-allow-headers')).toContain('authorization');
    expect(ok.headers.get('access-control-max-age')).toBe('600');
    const refused = await fetch(`${p.urls.data}/v1/end-user-tokens`, { method: 'OPTIONS', headers: { origin: OTHER, 'access-control-request-method': 'POST' } });
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    await expectError(refused, 403, 'origin_not_allowed');
    // The AI API is for servers: no preflight route, so the browser gets no CORS answer.
    const ai = await fetch(`${p.urls.ai}/v1/models`, { method: 'OPTIONS', headers: { origin: ALLOWED } });
    expect(ai.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('answers 403 key_disabled once disabled, and its origins leave the preflight index', async () => {
    useSettings({ credentialCacheMs: 100 });
    try {
      const extra = adminOk(p.dataDir, 'publishable-key', 'create', '--app', app.id, '--origins', 'https://gone.example');
      await expectError(await probe('data', { ...bearer(extra.key), origin: 'https://gone.example' }), 404, 'not_found');
      expect(adminOk(p.dataDir, 'publishable-key', 'disable', '--key-id', extra.id)).toMatchObject({ id: extra.id, disabled: true });
      clock.advance(31_000);
      await expectError(await probe('data', { ...bearer(extra.key), origin: 'https://gone.example' }), 403, 'key_disabled');
      const pre = await fetch(`${p.urls.data}/v1/probe`, { method: 'OPTIONS', headers: { origin: 'https://gone.example' } });
      await expectError(pre, 403, 'origin_not_allowed');
    } finally {
      useSettings();
    }
  });

  it('refuses origins that are not scheme://host[:port]', () => {
    // `https://*.example.com` parses as a URL whose host holds a `*`: taken, it matched no browser's Origin, silently.
    for (const bad of ['*', 'https://a.example/path', 'ftp://a.example', 'a.example', 'https://*.example.com', 'https://*']) {
      const r = adminOkOrError(['publishable-key', 'create', '--app', app.id, '--origins', bad]);
      expect(r, bad).toMatch(/not an origin/);
    }
  });
});

describe('end-user access tokens', () => {
  const mint = (headers: Record<string, string>, body: unknown) =>
    fetch(`${p.urls.data}/v1/end-user-tokens`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('are minted by a server credential bound to the application', async () => {
    const res = await mint(bearer(appKey), { user_id: 'user-42', ttl_seconds: 600, claims: { role: 'editor', teams: ['a', 'b'] } });
    expect(res.status).toBe(200);
    const body: any = await res.json();
    expect(body).toEqual({ token: expect.any(String), expires_at: new Date(Math.floor(clock.now() / 1000) * 1000 + 600_000).toISOString() });
    const claims = JSON.parse(Buffer.from(body.token.split('.')[1], 'base64url').toString());
    expect(claims).toMatchObject({ sub: 'user-42', kind: 'end_user', app: app.id, ext: { role: 'editor', teams: ['a', 'b'] } });
  });

  it('answer 400 for bad bodies and 403 for an organization-wide key', async () => {
    await expectError(await mint(bearer(appKey), { user_id: 'u', extra: 1 }), 400, 'unknown_field');
    await expectError(await mint(bearer(appKey), {}), 400, 'invalid_body');
    await expectError(await mint(bearer(appKey), { user_id: 'u', ttl_seconds: 10 }), 400, 'invalid_body');
    await expectError(await mint(bearer(appKey), { user_id: 'u', claims: { nested: { no: 1 } } }), 400, 'invalid_body');
    await expectError(await mint(bearer(p.credentials.secret_key), { user_id: 'u' }), 403, 'forbidden');
  });

  it('are accepted on Data only: refused on Events and AI, and cannot mint tokens', async () => {
    const token = ((await (await mint(bearer(appKey), { user_id: 'u7' })).json()) as any).token;
    await expectError(await probe('data', { ...bearer(token), origin: ALLOWED }), 404, 'not_found');
    await expectError(await probe('data', bearer(token)), 404, 'not_found');
    await expectError(await probe('events', bearer(token)), 401, 'invalid_credentials');
    await expectError(await models(bearer(token)), 401, 'invalid_credentials');
    await expectError(await mint(bearer(token), { user_id: 'u8' }), 401, 'invalid_credentials');
  });

  it('expire', async () => {
    const token = ((await (await mint(bearer(appKey), { user_id: 'u9', ttl_seconds: 60 })).json()) as any).token;
    await expectError(await probe('data', bearer(token)), 404, 'not_found');
    clock.advance(61_000);
    await expectError(await probe('data', bearer(token)), 401, 'invalid_credentials');
  });
});

describe('browser rules', () => {
  it('answers 403 secret_key_in_browser for a secret key or OAuth token with an Origin on Data and Events', async () => {
    const token = await clientToken();
    for (const api of ['data', 'events'] as const) {
      await expectError(await probe(api, { ...bearer(p.credentials.secret_key), origin: ALLOWED }), 403, 'secret_key_in_browser');
      await expectError(await probe(api, { ...bearer(token), origin: ALLOWED }), 403, 'secret_key_in_browser');
    }
    // The AI API is not for browsers but has no such rule.
    expect((await models({ ...bearer(p.credentials.secret_key), origin: ALLOWED })).status).toBe(200);
  });

  it('Data and Events ignore headers naming another tenant; the AI API refuses them', async () => {
    const other = { 'x-organization-id': 'org_other', 'x-workspace-id': 'ws_other' };
    await expectError(await probe('data', { ...bearer(p.credentials.secret_key), ...other }), 404, 'not_found');
    await expectError(await probe('events', { ...bearer(p.credentials.secret_key), ...other }), 404, 'not_found');
    await expectError(await models({ ...bearer(p.credentials.secret_key), 'openai-organization': 'org_other' }), 400, 'unsupported_field');
    expect((await models({ ...bearer(p.credentials.secret_key), 'openai-organization': p.credentials.organization_id })).status).toBe(200);
  });
});

function adminOkOrError(args: string[]): string {
  const r = admin(p.dataDir, ...args);
  return r.status === 0 ? 'ok' : JSON.parse(r.stderr).error;
}
