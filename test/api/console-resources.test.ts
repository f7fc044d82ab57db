/**
 * The console API's resource routes for AI and the organization (issue 37, Deliver 2) through the local
 * server with a real HTTP client and signed-in sessions: overview, limits and feature switches, a key's
 * limits and routes, OAuth clients, publishable keys, model routes with "Try it" (a real call to a fake
 * upstream, recorded in usage), rerank profiles, vector databases, knowledge collections and jobs, and
 * the activity log. Each: its happy path, the role that may not (`403 role_forbidden`), another
 * organization's ids (404), bad bodies with the domain's codes (never a 500).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { ConsoleBrowser, expectError, signedInPerson } from '../helpers/console-browser.js';

let p: TestPlatform;
let upstream: FakeOpenAi;
let org: string;
let viewer: ConsoleBrowser;
let developer: ConsoleBrowser;
let admin: ConsoleBrowser;
let developerId: string;
/** A person of another organization, and that organization's things. */
let stranger: ConsoleBrowser;
let other: { org: string; workspace: string; app: string; keyId: string };

const tenants = () => new Tenants(p.engine.kv, () => p.engine.clock.now());

beforeAll(async () => {
  // The fake upstream listens on loopback, which the console refuses as a base_url unless this is set (console-upstream-destinations.md).
  useSettings({ consoleAllowLoopbackUpstreams: true });
  upstream = await startFakeOpenAi();
  p = await startTestPlatform({ console: true });
  org = p.credentials.organization_id;
  viewer = (await signedInPerson(p.engine, p.consoleUrl!, org, 'viewer')).browser;
  const dev = await signedInPerson(p.engine, p.consoleUrl!, org, 'developer');
  developer = dev.browser;
  developerId = dev.person.id;
  admin = (await signedInPerson(p.engine, p.consoleUrl!, org, 'admin')).browser;
  const otherOrg = await tenants().createOrganization('Other');
  const ws = await tenants().createWorkspace(otherOrg.id, 'theirs');
  const app = await tenants().createApplication(ws.id, 'their app', ['ai.chat']);
  const key = await tenants().createSecretKey(otherOrg.id, app.id);
  other = { org: otherOrg.id, workspace: ws.id, app: app.id, keyId: key.id };
  stranger = (await signedInPerson(p.engine, p.consoleUrl!, otherOrg.id, 'owner')).browser;
});
afterAll(async () => {
  useSettings({ consoleAllowLoopbackUpstreams: undefined });
  await p?.close();
  await upstream?.close();
});

describe('organization limits and feature switches', () => {
  it('a viewer reads them; an admin changes them with the CLI rules; a developer may not (403 role_forbidden)', async () => {
    const read = await viewer.call('GET', '/console/api/limits');
    expect(read.status, read.text).toBe(200);
    expect(read.body).toMatchObject({ organization_id: org, limits: { rpm: null, budget_usd: null }, disabled_features: [], budget: { spent_usd: 0, held_usd: 0 } });
    expectError(await developer.call('PUT', '/console/api/limits', { rpm: 60 }), 403, 'role_forbidden');
    expectError(await viewer.call('PUT', '/console/api/features', { vector: false }), 403, 'role_forbidden');
    const set = await admin.call('PUT', '/console/api/limits', { rpm: 600, budget_usd: 25 });
    expect(set.status, set.text).toBe(200);
    expect(set.body.limits).toMatchObject({ rpm: 600, budget_usd: 25, tpm: null });
    // A field left out keeps its value; null lifts it.
    expect((await admin.call('PUT', '/console/api/limits', { rpm: null })).body.limits).toMatchObject({ rpm: null, budget_usd: 25 });
    expectError(await admin.call('PUT', '/console/api/limits', { rpm: -1 }), 400, 'invalid_body', 'rpm');
    expectError(await admin.call('PUT', '/console/api/limits', { rpm: 1.5 }), 400, 'invalid_body', 'rpm');
    expectError(await admin.call('PUT', '/console/api/limits', { knowledge_keep_source_hours: 500 }), 400, 'invalid_body', 'knowledge_keep_source_hours');
    expectError(await admin.call('PUT', '/console/api/limits', { rpm: '60' }), 400, 'invalid_body', 'rpm');
    expectError(await admin.call('PUT', '/console/api/limits', { nope: 1 }), 400, 'unknown_field', 'nope');
    expectError(await admin.call('PUT', '/console/api/limits', '[1,2'), 400, 'invalid_body');
  });

  it('switches a feature off and on; the overview shows the switches and the limits; unknown features are 400', async () => {
    const off = await admin.call('PUT', '/console/api/features', { vector: false, knowledge: true });
    expect(off.status, off.text).toBe(200);
    expect(off.body.disabled_features).toEqual(['vector']);
    const overview = await viewer.call('GET', '/console/api/overview');
    expect(overview.status, overview.text).toBe(200);
    expect(overview.body.features).toEqual({ vector: false, collections: true, knowledge: true });
    expect(overview.body.limits).toMatchObject({ budget_usd: 25, budget: { spent_usd: 0 } });
    expect((await admin.call('PUT', '/console/api/features', { vector: true })).body.disabled_features).toEqual([]);
    expectError(await admin.call('PUT', '/console/api/features', { teleport: false }), 400, 'unknown_field', 'teleport');
    expectError(await admin.call('PUT', '/console/api/features', { vector: 'off' }), 400, 'invalid_body', 'vector');
    // The other organization's switches are its own.
    expect((await stranger.call('GET', '/console/api/limits')).body).toMatchObject({ organization_id: other.org, limits: { budget_usd: null } });
  });
});

describe("a secret key's AI limits and routes", () => {
  it('reads and sets them as `key limits` and `key routes` do; limits need an admin, routes a developer', async () => {
    const { id } = await tenants().createSecretKey(org, undefined);
    const read = await viewer.call('GET', `/console/api/keys/${id}/ai`);
    expect(read.status, read.text).toBe(200);
    expect(read.body).toEqual({ key_id: id, limits: { rpm: null, tpm: null, concurrency: null, budget_usd: null }, budget: { spent_usd: 0, held_usd: 0 }, routes: null });
    expectError(await viewer.call('PUT', `/console/api/keys/${id}/routes`, { routes: ['chat'] }), 403, 'role_forbidden');
    expectError(await developer.call('PUT', `/console/api/keys/${id}/limits`, { rpm: 5 }), 403, 'role_forbidden');
    expect((await developer.call('PUT', `/console/api/keys/${id}/routes`, { routes: ['chat', 'chat'] })).body).toEqual({ key_id: id, routes: ['chat'] });
    expect((await admin.call('PUT', `/console/api/keys/${id}/limits`, { rpm: 5, budget_usd: 1.5 })).body).toMatchObject({ key_id: id, limits: { rpm: 5, budget_usd: 1.5 }, budget: { spent_usd: 0 } });
    // The CLI's own readers see the same (one store, one rule).
    expect((await viewer.call('GET', `/console/api/keys/${id}/ai`)).body).toMatchObject({ limits: { rpm: 5 }, routes: ['chat'] });
    expect((await developer.call('PUT', `/console/api/keys/${id}/routes`, { routes: null })).body.routes).toBeNull();
    expectError(await developer.call('PUT', `/console/api/keys/${id}/routes`, { routes: [] }), 400, 'invalid_body', 'routes');
    expectError(await developer.call('PUT', `/console/api/keys/${id}/routes`, { routes: ['bad id!'] }), 400, 'invalid_body', 'routes');
    expectError(await developer.call('PUT', `/console/api/keys/${id}/routes`, {}), 400, 'invalid_body', 'routes');
    expectError(await admin.call('PUT', `/console/api/keys/${id}/limits`, { concurrency: 0 }), 400, 'invalid_body', 'concurrency');
  });

  it("another organization's key is 404 key_not_found, as an unknown or crafted id", async () => {
    for (const id of [other.keyId, 'key_00000000000000000000000000', '__proto__', 'constructor', '..%2F..%2Fetc', '%00']) {
      expectError(await admin.call('GET', `/console/api/keys/${id}/ai`), 404, 'key_not_found');
      expectError(await admin.call('PUT', `/console/api/keys/${id}/limits`, { rpm: 1 }), 404, 'key_not_found');
      expectError(await admin.call('PUT', `/console/api/keys/${id}/routes`, { routes: ['x'] }), 404, 'key_not_found');
    }
    // Nothing was written on the other organization's key.
    expect((await stranger.call('GET', `/console/api/keys/${other.keyId}/ai`)).body).toMatchObject({ limits: { rpm: null }, routes: null });
  });
});

describe('applications', () => {
  it("changes an application's capabilities (the whole list); unknown ones are 400; another organization's is 404", async () => {
    const app = await tenants().createApplication(p.credentials.workspace_id, 'caps', ['ai.chat']);
    expectError(await viewer.call('PATCH', `/console/api/applications/${app.id}`, { capabilities: [] }), 403, 'role_forbidden');
    const changed = await developer.call('PATCH', `/console/api/applications/${app.id}`, { capabilities: ['knowledge', 'ai.embeddings', 'knowledge'] });
    expect(changed.status, changed.text).toBe(200);
    expect(changed.body).toMatchObject({ id: app.id, capabilities: ['knowledge', 'ai.embeddings'] });
    expect((await tenants().getApplication(app.id))!.capabilities).toEqual(['knowledge', 'ai.embeddings']);
    expectError(await developer.call('PATCH', `/console/api/applications/${app.id}`, { capabilities: ['root'] }), 400, 'invalid_body', 'capabilities');
    expectError(await developer.call('PATCH', `/console/api/applications/${app.id}`, { name: 'x' }), 400, 'unknown_field', 'name');
    expectError(await developer.call('PATCH', `/console/api/applications/${other.app}`, { capabilities: [] }), 404, 'not_found');
    expect((await tenants().getApplication(other.app))!.capabilities).toEqual(['ai.chat']);
  });
});

describe('OAuth clients and publishable keys', () => {
  it('creates an OAuth client (its secret once), lists it, revokes it; a viewer may not create', async () => {
    const app = await tenants().createApplication(p.credentials.workspace_id, 'web', []);
    expectError(await viewer.call('POST', '/console/api/oauth-clients', { application_id: app.id }), 403, 'role_forbidden');
    const made = await developer.call('POST', '/console/api/oauth-clients', { application_id: app.id, permissions: ['events:event.publish'] });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toEqual({ client_id: expect.stringMatching(/^cli_/), client_secret: expect.stringMatching(/^cls_[0-9a-f]{64}$/), permissions: ['events:event.publish'] });
    const listed = await viewer.call('GET', '/console/api/oauth-clients');
    expect(listed.status, listed.text).toBe(200);
    expect(listed.body.data.map((c: { client_id: string }) => c.client_id)).toContain(made.body.client_id);
    expect(listed.text).not.toContain(made.body.client_secret);
    expect((await viewer.call('GET', `/console/api/oauth-clients?application_id=${app.id}`)).body.data).toHaveLength(1);
    expect((await developer.call('POST', `/console/api/oauth-clients/${made.body.client_id}/revoke`)).body).toMatchObject({ client_id: made.body.client_id, revoked: true });
    expectError(await developer.call('POST', '/console/api/oauth-clients', { application_id: app.id, permissions: ['events:teleport'] }), 400, 'invalid_body', 'permissions');
    expectError(await developer.call('POST', '/console/api/oauth-clients', {}), 400, 'invalid_body', 'application_id');
    expectError(await developer.call('GET', '/console/api/oauth-clients?limit=0'), 400, 'invalid_query', 'limit');
  });

  it("another organization's application and client are 404; its clients are not listed", async () => {
    const theirs = await stranger.call('POST', '/console/api/oauth-clients', { application_id: other.app });
    expect(theirs.status, theirs.text).toBe(201);
    expectError(await developer.call('POST', '/console/api/oauth-clients', { application_id: other.app }), 404, 'not_found', 'application_id');
    expectError(await developer.call('GET', `/console/api/oauth-clients?application_id=${other.app}`), 404, 'not_found');
    expectError(await developer.call('POST', `/console/api/oauth-clients/${theirs.body.client_id}/revoke`), 404, 'not_found');
    expect((await developer.call('GET', '/console/api/oauth-clients')).text).not.toContain(theirs.body.client_id);
    expect((await stranger.call('GET', '/console/api/oauth-clients')).body.data).toMatchObject([{ client_id: theirs.body.client_id, revoked: false }]);
  });

  it('creates a publishable key with origins, changes them, disables it; bad origins are 400 on origins', async () => {
    const app = await tenants().createApplication(p.credentials.workspace_id, 'site', []);
    const made = await developer.call('POST', '/console/api/publishable-keys', { application_id: app.id, origins: ['https://shop.example'] });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toEqual({ id: expect.stringMatching(/^pbk_/), key: expect.stringMatching(/^apb_[0-9a-f]{48}$/), origins: ['https://shop.example'] });
    const moved = await developer.call('PUT', `/console/api/publishable-keys/${made.body.id}/origins`, { origins: ['https://a.example', 'http://localhost:3000'] });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body).toMatchObject({ id: made.body.id, origins: ['https://a.example', 'http://localhost:3000'], disabled: false, last4: made.body.key.slice(-4) });
    const listed = await viewer.call('GET', '/console/api/publishable-keys');
    expect(listed.body.data.find((k: { id: string }) => k.id === made.body.id)).toMatchObject({ origins: ['https://a.example', 'http://localhost:3000'] });
    expect(listed.text).not.toContain(made.body.key);
    expect((await developer.call('POST', `/console/api/publishable-keys/${made.body.id}/disable`)).body).toMatchObject({ disabled: true });
    expectError(await developer.call('POST', '/console/api/publishable-keys', { application_id: app.id, origins: ['https://*.example'] }), 400, 'invalid_body', 'origins');
    expectError(await developer.call('POST', '/console/api/publishable-keys', { application_id: app.id, origins: [] }), 400, 'invalid_body', 'origins');
    expectError(await developer.call('PUT', `/console/api/publishable-keys/${made.body.id}/origins`, { origins: ['javascript:alert(1)'] }), 400, 'invalid_body', 'origins');
    expectError(await viewer.call('POST', `/console/api/publishable-keys/${made.body.id}/disable`), 403, 'role_forbidden');
    const theirs = await stranger.call('POST', '/console/api/publishable-keys', { application_id: other.app, origins: ['https://theirs.example'] });
    expectError(await developer.call('PUT', `/console/api/publishable-keys/${theirs.body.id}/origins`, { origins: ['https://evil.example'] }), 404, 'key_not_found');
    expectError(await developer.call('POST', `/console/api/publishable-keys/${theirs.body.id}/disable`), 404, 'key_not_found');
    expect((await stranger.call('GET', '/console/api/publishable-keys')).body.data).toMatchObject([{ id: theirs.body.id, origins: ['https://theirs.example'], disabled: false }]);
  });
});

describe('model routes', () => {
  it('creates, lists and edits routes with the CLI rules; sets the default; a viewer may not', async () => {
    const chat = { endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: upstream.baseUrl, model: 'gpt-fake', price_in_per_mtok: 1, price_out_per_mtok: 2 };
    const made = await developer.call('PUT', '/console/api/routes/chat', { ...chat, default: true });
    expect(made.status, made.text).toBe(200);
    expect(made.body).toMatchObject({ id: 'chat', organization_id: org, upstream_model: 'gpt-fake', default: true, price_in_per_mtok: 1 });
    expect((await developer.call('PUT', '/console/api/routes/chat-b', chat)).body.default).toBe(false);
    expect((await developer.call('PUT', '/console/api/routes/embed', { endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: upstream.baseUrl, upstream_model: 'emb-fake', default: true })).status).toBe(200);
    const setDefault = await developer.call('POST', '/console/api/routes/chat-b/default');
    expect(setDefault.body).toMatchObject({ id: 'chat-b', default: true, upstream_model: 'gpt-fake', price_out_per_mtok: 2 });
    const list = await viewer.call('GET', '/console/api/routes');
    expect(list.body.data.filter((r: { default: boolean }) => r.default).map((r: { id: string }) => r.id).sort()).toEqual(['chat-b', 'embed']);
    expectError(await viewer.call('PUT', '/console/api/routes/x', chat), 403, 'role_forbidden');
    expectError(await developer.call('PUT', '/console/api/routes/x', { ...chat, provider: 'nope' }), 400, 'invalid_body', 'provider');
    expectError(await developer.call('PUT', '/console/api/routes/x', { ...chat, base_url: 'https://u:p@api.example' }), 400, 'invalid_body', 'base_url');
    expectError(await developer.call('PUT', '/console/api/routes/x', { ...chat, max_tokens: 0 }), 400, 'invalid_body', 'max_tokens');
    expectError(await developer.call('PUT', '/console/api/routes/auto', chat), 400, 'invalid_body');
    // Upstream keys are the operator's to name (admin CLI), never the console's (console-attack-pass.md).
    expectError(await developer.call('PUT', '/console/api/routes/x', { ...chat, api_key_env: 'sk-live-abc def' }), 403, 'forbidden', 'api_key_env');
    expectError(await developer.call('PUT', '/console/api/routes/x', { provider: 'openai-compatible' }), 400, 'invalid_body', 'endpoint');
    expectError(await developer.call('POST', '/console/api/routes/nope/default'), 404, 'not_found');
    // The other organization sees none of them.
    expect((await stranger.call('GET', '/console/api/routes')).body.data).toEqual([]);
    expectError(await stranger.call('POST', '/console/api/routes/chat/default'), 404, 'not_found');
  });

  it('"Try it" makes one real call through the gateway as the person, recorded in usage and the overview', async () => {
    const before = upstream.requests.length;
    const tried = await developer.call('POST', '/console/api/routes/chat/try', { input: 'Say hello' });
    expect(tried.status, tried.text).toBe(200);
    expect(tried.body).toMatchObject({ object: 'chat.completion', usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
    expect(upstream.requests.slice(before)).toMatchObject([{ path: '/v1/chat/completions', body: { model: 'gpt-fake', messages: [{ role: 'user', content: 'Say hello' }] } }]);
    const embedded = await developer.call('POST', '/console/api/routes/embed/try', { input: 'four' });
    expect(embedded.body).toMatchObject({ object: 'list', data: [{ index: 0, embedding: [4, 0, 0.5] }] });
    const usage = await viewer.call('GET', '/console/api/activity?kind=ai.usage');
    expect(usage.status, usage.text).toBe(200);
    expect(usage.body.items).toEqual(expect.arrayContaining([expect.objectContaining({ kind: 'ai.usage', route: 'chat', actor_kind: 'person', actor_id: developerId, usage: expect.objectContaining({ total_tokens: 18, cost_usd: 0.000025 }) })]));
    const overview = await viewer.call('GET', '/console/api/overview');
    expect(overview.body.usage).toHaveLength(168);
    const hour = overview.body.usage.at(-1);
    expect(hour).toMatchObject({ ai_calls: 2, tokens: 18 + 3, spend_usd: 0.000025 });
    expect(overview.body.usage.slice(0, -1).every((h: { calls: number; tokens: number }) => h.tokens === 0)).toBe(true);
    expect(overview.body.limits.budget.spent_usd).toBeCloseTo(0.000025, 9);
    expectError(await viewer.call('POST', '/console/api/routes/chat/try', { input: 'x' }), 403, 'role_forbidden');
    expectError(await developer.call('POST', '/console/api/routes/chat/try', { input: '' }), 400, 'invalid_body', 'input');
    expectError(await developer.call('POST', '/console/api/routes/chat/try', { input: 'x', model: 'other' }), 400, 'unknown_field', 'model');
    expectError(await developer.call('POST', '/console/api/routes/missing/try', { input: 'x' }), 404, 'not_found');
    expectError(await stranger.call('POST', '/console/api/routes/chat/try', { input: 'x' }), 404, 'not_found');
  });

  it('rerank profiles: set, list, delete with the CLI rules', async () => {
    const set = await developer.call('PUT', '/console/api/rerank-profiles/jina', { provider: 'openai-compatible', base_url: 'https://api.jina.ai/v1', model: 'jina-reranker-v2' });
    expect(set.status, set.text).toBe(200);
    expect(set.body).toMatchObject({ id: 'jina', organization_id: org, provider: 'openai-compatible', api_key_env: null, timeout_ms: 10000 });
    expect((await viewer.call('GET', '/console/api/rerank-profiles')).body.data).toMatchObject([{ id: 'jina' }]);
    expectError(await developer.call('PUT', '/console/api/rerank-profiles/jina', { provider: 'openai-compatible', model: 'm' }), 400, 'invalid_body');
    expectError(await developer.call('PUT', '/console/api/rerank-profiles/x', { provider: 'bedrock', model: 'm', timeout_ms: 0 }), 400, 'invalid_body', 'timeout_ms');
    expectError(await developer.call('PUT', '/console/api/rerank-profiles/bad%20name', { provider: 'bedrock', model: 'm' }), 400, 'invalid_body');
    expectError(await viewer.call('DELETE', '/console/api/rerank-profiles/jina'), 403, 'role_forbidden');
    expectError(await stranger.call('DELETE', '/console/api/rerank-profiles/jina'), 404, 'not_found');
    expect((await developer.call('DELETE', '/console/api/rerank-profiles/jina')).body).toEqual({ id: 'jina', deleted: true });
    expectError(await developer.call('DELETE', '/console/api/rerank-profiles/jina'), 404, 'not_found');
  });

  it('vector databases: show none, create through the embeddings route, show, delete; another organization is refused', async () => {
    const ws = p.credentials.workspace_id;
    expect((await viewer.call('GET', `/console/api/workspaces/${ws}/vector-database`)).body).toEqual({ workspace_id: ws, state: 'none' });
    expectError(await viewer.call('POST', `/console/api/workspaces/${ws}/vector-database`, { embedding_route: 'embed' }), 403, 'role_forbidden');
    expectError(await developer.call('POST', `/console/api/workspaces/${ws}/vector-database`, { embedding_route: 'chat' }), 404, 'not_found');
    const made = await developer.call('POST', `/console/api/workspaces/${ws}/vector-database`, { embedding_route: 'embed' });
    expect(made.status, made.text).toBe(201);
    expect(made.body).toMatchObject({ workspace_id: ws, state: 'active', embedding_route: 'embed', upstream_model: 'emb-fake', dimensions: 3 });
    expect(made.body).not.toHaveProperty('index');
    expectError(await developer.call('POST', `/console/api/workspaces/${ws}/vector-database`, { embedding_route: 'embed' }), 409, 'already_exists');
    expect((await viewer.call('GET', `/console/api/workspaces/${ws}/vector-database`)).body).toMatchObject({ state: 'active', passages: 0 });
    // Another organization's workspace gets the Events API's one refusal, whatever it holds.
    expectError(await stranger.call('GET', `/console/api/workspaces/${ws}/vector-database`), 403, 'forbidden');
    expectError(await stranger.call('DELETE', `/console/api/workspaces/${ws}/vector-database`), 403, 'forbidden');
    expect((await developer.call('DELETE', `/console/api/workspaces/${ws}/vector-database`)).body).toMatchObject({ state: 'deleting' });
    expectError(await developer.call('DELETE', `/console/api/workspaces/${other.workspace}/vector-database`), 403, 'forbidden');
  });
});

describe('knowledge collections and jobs', () => {
  it('lists collections and jobs of the organization or of one application; unknown ids are 404; a viewer may not cancel', async () => {
    expect((await viewer.call('GET', '/console/api/collections')).body).toEqual({ object: 'list', data: [], next_cursor: null });
    expect((await viewer.call('GET', '/console/api/knowledge-jobs')).body).toMatchObject({ data: [] });
    const app = await tenants().createApplication(p.credentials.workspace_id, 'kb', ['knowledge']);
    expect((await viewer.call('GET', `/console/api/knowledge-jobs?application_id=${app.id}&limit=5`)).body).toMatchObject({ data: [] });
    expectError(await viewer.call('GET', `/console/api/knowledge-jobs?application_id=${other.app}`), 404, 'not_found', 'application_id');
    expectError(await viewer.call('GET', '/console/api/knowledge-jobs/job_00000000000000000000000000'), 404, 'job_not_found');
    expectError(await viewer.call('GET', '/console/api/collections/col_00000000000000000000000000'), 404, 'collection_not_found');
    expectError(await viewer.call('POST', '/console/api/knowledge-jobs/job_00000000000000000000000000/cancel'), 403, 'role_forbidden');
    expectError(await developer.call('POST', '/console/api/knowledge-jobs/job_00000000000000000000000000/cancel'), 404, 'job_not_found');
    expectError(await viewer.call('GET', '/console/api/knowledge-jobs?limit=abc'), 400, 'invalid_field', 'limit');
    expectError(await viewer.call('GET', '/console/api/collections?cursor=forged'), 400, 'invalid_cursor');
  });
});

describe('the activity log', () => {
  it("names the person as every console action's actor, filters by kind, pages with a cursor", async () => {
    const page = await viewer.call('GET', '/console/api/activity?kind=api.call&limit=3');
    expect(page.status, page.text).toBe(200);
    expect(page.body.items).toHaveLength(3);
    expect(typeof page.body.next_cursor).toBe('string');
    const next = await viewer.call('GET', `/console/api/activity?kind=api.call&limit=3&cursor=${encodeURIComponent(page.body.next_cursor)}`);
    expect(next.body.items[0].at_ms).toBeLessThanOrEqual(page.body.items[2].at_ms);
    const all = await viewer.call('GET', '/console/api/activity?kind=api.call&limit=500');
    const changes = all.body.items.filter((e: { method: string; route: string; status: number }) => e.route === '/console/api/routes/{route_id}' && e.method === 'PUT' && e.status === 200);
    expect(changes.length).toBeGreaterThan(0);
    expect(changes.every((e: { actor_kind: string; actor_id: string }) => e.actor_kind === 'person' && e.actor_id === developerId)).toBe(true);
    // Another organization's log holds none of this organization's actions.
    const theirs = await stranger.call('GET', '/console/api/activity?limit=500');
    expect(theirs.body.items.every((e: { organization_id: string }) => e.organization_id === other.org)).toBe(true);
    expectError(await viewer.call('GET', '/console/api/activity?kind=api.call&cursor=forged'), 400, 'invalid_query', 'cursor');
    expectError(await viewer.call('GET', '/console/api/activity?limit=9999'), 400, 'invalid_query', 'limit');
  });

  it('a change without the CSRF token is 403 csrf_failed, and one without a session 401, before any role or body check', async () => {
    expectError(await admin.call('PUT', '/console/api/limits', { rpm: 1 }, { 'x-csrf-token': 'wrong' }), 403, 'csrf_failed');
    const anonymous = new ConsoleBrowser(p.consoleUrl!);
    expectError(await anonymous.call('GET', '/console/api/overview'), 401, 'not_signed_in');
    expectError(await anonymous.call('PUT', '/console/api/limits', { rpm: 1 }), 401, 'not_signed_in');
  });
});
