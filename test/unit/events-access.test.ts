/**
 * The Events API's access steps (docs/events/permissions.md) over a real embedded engine, on routes
 * made up here: the `permission` and `workspace` middlewares alone, where chainFor() puts them, and the
 * whole chain through workspaceHandler() (what a 403 looks like, what comes before it, what the handler
 * receives). Credentials carry their permissions from the stored key or OAuth client record.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { EVENTS_PERMISSIONS, type Permission } from '../../lambdas/auth/permissions.js';
import { Tenants, TenantError } from '../../lambdas/auth/tenants.js';
import { OAuthClients } from '../../lambdas/auth/oauth-clients.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { issueToken } from '../../lambdas/auth/tokens.js';
import { authenticate } from '../../lambdas/auth/credentials.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { flushActivity } from '../../lambdas/activity/activity.js';
import { PlatformError } from '../../lambdas/shared/errors.js';
import { settings, useSettings } from '../../lambdas/shared/settings.js';
import { chainFor, scopedToWorkspace } from '../../lambdas/http/chain.js';
import { httpHandler, workspaceHandler } from '../../lambdas/http/handler.js';
import { ROUTES, type RouteDef } from '../../lambdas/http/routes.js';
import type { Middleware } from '../../lambdas/http/types.js';
import { permission, workspace } from '../../lambdas/http/middleware/events-access.js';
import { apiEvent, lambdaContext, platformRequest, testRoute } from '../helpers/events.js';

const ORIGIN = 'https://app.example';
const WS_PATH = '/v1/workspaces/{workspace_id}/events';

let dir: string;
let engine: EmbeddedEngine;
let tenants: Tenants;
let org: string;
let ws: string;
/** Another workspace of the same organization, and its application. */
let ws2: string;
let app: string;
/** A workspace of another organization. */
let foreignWs: string;
let orgKey: string;
let appKey: string;
/** Organization-wide, narrowed to publishing. */
let publishOnlyKey: string;
let pubKey: string;
let oauthToken: string;
let narrowOauthToken: string;
let endUserToken: string;

const tokenFor = async (clientId: string, applicationId: string, workspaceId: string) =>
  (await issueToken(engine, { kind: 'oauth_client', subject: clientId, organizationId: org, applicationId, workspaceId }, 3600)).token;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  useSettings();
  dir = mkdtempSync(join(tmpdir(), 'evaccess-'));
  engine = createEmbeddedEngine({ dataDir: join(dir, 'main') });
  useEngine(engine);
  const now = () => engine.clock.now();
  tenants = new Tenants(engine.kv, now);
  org = (await tenants.createOrganization('o')).id;
  ws = (await tenants.createWorkspace(org, 'w')).id;
  ws2 = (await tenants.createWorkspace(org, 'w2')).id;
  app = (await tenants.createApplication(ws, 'a', [])).id;
  const other = (await tenants.createOrganization('other')).id;
  foreignWs = (await tenants.createWorkspace(other, 'theirs')).id;
  orgKey = (await tenants.createSecretKey(org)).key;
  appKey = (await tenants.createSecretKey(org, app)).key;
  publishOnlyKey = (await tenants.createSecretKey(org, undefined, { permissions: ['events:event.publish'] })).key;
  pubKey = (await new PublishableKeys(engine.kv, now).create(app, [ORIGIN])).key;
  const clients = new OAuthClients(engine.kv, now);
  oauthToken = await tokenFor((await clients.create(app)).client_id, app, ws);
  narrowOauthToken = await tokenFor((await clients.create(app, { permissions: ['events:subscription.read', 'events:stats.read'] })).client_id, app, ws);
  endUserToken = (await issueToken(engine, { kind: 'end_user', subject: 'user-1', organizationId: org, applicationId: app, workspaceId: ws }, 3600)).token;
});
afterAll(async () => {
  await flushActivity();
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });
const principalOf = (credential: string, on = engine) => authenticate(on, `Bearer ${credential}`);

/** What a refused call threw: always a PlatformError. */
async function refusal(promise: Promise<unknown>): Promise<PlatformError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, 'expected a refusal').toBeInstanceOf(PlatformError);
  return error as PlatformError;
}

describe('permissions on credentials', () => {
  it('a secret key or OAuth client created without a list holds every Events permission (null)', async () => {
    expect((await principalOf(orgKey)).permissions).toBeNull();
    expect((await principalOf(appKey)).permissions).toBeNull();
    expect((await principalOf(oauthToken)).permissions).toBeNull();
  });

  it('a narrowed key or client holds its stored list, deduplicated in canonical order', async () => {
    expect((await principalOf(publishOnlyKey)).permissions).toEqual(['events:event.publish']);
    expect((await principalOf(narrowOauthToken)).permissions).toEqual(['events:subscription.read', 'events:stats.read']);
    const { record } = await tenants.createSecretKey(org, undefined, { permissions: ['events:stats.read', 'events:event.publish', 'events:stats.read'] });
    expect(record.permissions).toEqual(['events:event.publish', 'events:stats.read']);
  });

  it('a publishable key holds only events:stream.open, an end-user token nothing', async () => {
    expect((await principalOf(pubKey)).permissions).toEqual(['events:stream.open']);
    expect((await principalOf(endUserToken)).permissions).toEqual([]);
  });

  it('refuses unknown names and an empty list at creation, naming them', async () => {
    await expect(tenants.createSecretKey(org, undefined, { permissions: ['events:event.publish', 'events:teleport'] })).rejects.toThrow(/unknown permissions: events:teleport/);
    await expect(tenants.createSecretKey(org, undefined, { permissions: [] })).rejects.toThrow(TenantError);
    await expect(new OAuthClients(engine.kv, () => engine.clock.now()).create(app, { permissions: ['*'] })).rejects.toThrow(/unknown permissions: \*/);
  });

  it('reads an OAuth client’s permissions from its record at verification: narrowing it takes effect within the credential cache time', async () => {
    const clock = new ManualClock();
    const clocked = createEmbeddedEngine({ dataDir: join(dir, 'clocked'), clock });
    try {
      const t = new Tenants(clocked.kv, () => clock.now());
      const o = (await t.createOrganization('c')).id;
      const w = (await t.createWorkspace(o, 'w')).id;
      const a = (await t.createApplication(w, 'a', [])).id;
      const client = await new OAuthClients(clocked.kv, () => clock.now()).create(a);
      const token = (await issueToken(clocked, { kind: 'oauth_client', subject: client.client_id, organizationId: o, applicationId: a, workspaceId: w }, 3600)).token;
      expect((await principalOf(token, clocked)).permissions).toBeNull();
      // Narrowed in the store (as an operator would): the same, unexpired token follows.
      await clocked.kv.update({ key: { pk: `oauthclient#${client.client_id}`, sk: 'client' }, set: { permissions: ['events:stats.read'] } });
      expect((await principalOf(token, clocked)).permissions).toBeNull(); // still cached
      clock.advance(settings().credentialCacheMs);
      expect((await principalOf(token, clocked)).permissions).toEqual(['events:stats.read']);
    } finally {
      await clocked.close();
    }
  });
});

describe('permission step', () => {
  const route = testRoute({ api: 'events', method: 'POST', path: WS_PATH, permission: 'events:event.publish' });
  const check = async (principal: Principal, needed: Permission) =>
    permission({ permission: needed }).before!(platformRequest({ route, engine, principal }));

  it('lets a principal holding the permission through', async () => {
    await check(await principalOf(orgKey), 'events:dead.replay');
    await check(await principalOf(publishOnlyKey), 'events:event.publish');
    await check(await principalOf(pubKey), 'events:stream.open');
    await check(await principalOf(narrowOauthToken), 'events:stats.read');
  });

  it('refuses one lacking it with 403 forbidden naming the permission', async () => {
    const cases: [string, Permission][] = [
      [publishOnlyKey, 'events:subscription.write'],
      [narrowOauthToken, 'events:event.publish'],
      [pubKey, 'events:event.publish'],
      [endUserToken, 'events:stream.open'],
    ];
    for (const [credential, needed] of cases) {
      const error = await refusal(check(await principalOf(credential), needed));
      expect([error.code, error.status]).toEqual(['forbidden', 403]);
      expect(error.message).toContain(needed);
    }
  });
});

describe('workspace step', () => {
  const route = testRoute({ api: 'events', method: 'POST', path: WS_PATH, permission: 'events:event.publish' });
  /** Runs workspace() alone; resolves to the workspace it handed on. */
  async function resolveFor(credential: string, workspaceId: string | undefined) {
    const request = platformRequest({ route, engine, principal: await principalOf(credential), event: { params: workspaceId === undefined ? {} : { workspace_id: workspaceId } } });
    await (workspace({ param: 'workspace_id' }) as Required<Middleware>).before(request);
    return request.context.platform.workspace;
  }

  it('an application-bound credential may name its application’s workspace, and the handler gets it', async () => {
    for (const credential of [appKey, oauthToken, pubKey]) {
      expect(await resolveFor(credential, ws)).toMatchObject({ id: ws, organization_id: org, name: 'w' });
    }
  });

  it('an organization-wide credential may name any workspace of its organization', async () => {
    expect(await resolveFor(orgKey, ws)).toMatchObject({ id: ws });
    expect(await resolveFor(orgKey, ws2)).toMatchObject({ id: ws2, name: 'w2' });
    // A workspace created after the key, named for the first time.
    const fresh = (await tenants.createWorkspace(org, 'fresh')).id;
    expect(await resolveFor(orgKey, fresh)).toMatchObject({ id: fresh });
  });

  it('refuses everything else with one identical 403 forbidden: no existence leak', async () => {
    const missing = `ws_${'0'.repeat(26)}`;
    const cases: [string, string | undefined][] = [
      [appKey, ws2], // its organization's, not its application's
      [oauthToken, ws2],
      [pubKey, ws2],
      [appKey, foreignWs],
      [orgKey, foreignWs], // another organization's
      [orgKey, missing], // does not exist
      [appKey, missing],
      [orgKey, 'ws_not-an-id'], // malformed
      [orgKey, 'x'.repeat(5000)],
      [orgKey, ''],
      [orgKey, undefined],
    ];
    const seen = new Set<string>();
    for (const [credential, id] of cases) {
      const error = await refusal(resolveFor(credential, id));
      seen.add(JSON.stringify([error.code, error.status, error.message, error.param]));
    }
    expect([...seen]).toEqual([JSON.stringify(['forbidden', 403, 'This credential may not use this workspace.', null])]);
  });
});

describe('chainFor with Events routes', () => {
  const eventsRoute = (over: Partial<RouteDef> = {}) => testRoute({ id: 'events.test', api: 'events', method: 'POST', path: WS_PATH, permission: 'events:event.publish', ...over });

  it('puts permission then workspace after credentials and the rate limit, before the body', () => {
    expect(chainFor(eventsRoute()).names).toEqual(['activity', 'respond', 'credentials', 'rateLimit', 'permission', 'workspace', 'jsonBody']);
    expect(chainFor(eventsRoute({ method: 'GET', body: 'raw' })).names).toEqual(['activity', 'respond', 'credentials', 'rateLimit', 'permission', 'workspace']);
    // No workspace in the path: no workspace step; no permission: no permission step.
    expect(chainFor(testRoute({ api: 'data', path: '/v1/things', permission: 'events:stats.read' })).names).toContain('permission');
    expect(chainFor(testRoute({ api: 'data', path: '/v1/things' })).names).not.toContain('permission');
    expect(chainFor(testRoute({ api: 'data', path: '/v1/things' })).names).not.toContain('workspace');
    // Uncredentialed routes get neither.
    expect(chainFor(eventsRoute({ credentials: 'none' })).names).toEqual(['activity', 'respond', 'jsonBody']);
  });

  it('refuses to build an Events workspace route without a permission (cold start, not an open route)', () => {
    expect(() => chainFor(eventsRoute({ permission: undefined }))).toThrow(/needs a permission/);
  });

  it('every Events route of the table that names a workspace names the permission docs/events/permissions.md gives it', () => {
    // The doc's table: | `events:…` | `METHOD /suffix`, `METHOD /suffix` … |
    const doc = readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'events', 'permissions.md'), 'utf8');
    const documented = new Map<string, string>();
    for (const [, name, routes] of doc.matchAll(/^\| `(events:[a-z.]+)` \| (.*) \|$/gm)) {
      for (const [, route] of routes.matchAll(/`((?:GET|POST|DELETE|PUT|PATCH) \/[^`]*)`/g)) documented.set(route, name);
    }
    expect(documented.size).toBe(11); // spec 4.21's eleven routes
    expect(new Set(documented.values())).toEqual(new Set(EVENTS_PERMISSIONS));
    for (const route of ROUTES.filter((r) => r.api === 'events' && scopedToWorkspace(r))) {
      const suffix = `${route.method} ${route.path.replace('/v1/workspaces/{workspace_id}', '')}`;
      expect(route.permission, route.id).toBeDefined();
      expect(documented.get(suffix), `${route.id}: ${suffix}`).toBe(route.permission);
    }
  });
});

describe('the whole chain through workspaceHandler()', () => {
  const publish = eventsHandler(testRoute({ id: 'events.test.publish', api: 'events', method: 'POST', path: WS_PATH, permission: 'events:event.publish' }));
  const stream = eventsHandler(
    testRoute({ id: 'events.test.stream', api: 'events', method: 'GET', path: '/v1/workspaces/{workspace_id}/subscriptions/{subscription_id}/stream', permission: 'events:stream.open', credentials: ['secret_key', 'oauth_client', 'publishable_key'] }),
  );

  function eventsHandler(route: RouteDef) {
    return workspaceHandler(route, async (_req, scope) => ({ status: 200, body: { workspace: scope.workspace.id, organization: scope.workspace.organization_id } }));
  }

  async function call(handler: ReturnType<typeof eventsHandler>, workspaceId: string, headers: Record<string, string>, body?: string, method = 'POST') {
    const res = await handler(apiEvent({ method, path: `/v1/workspaces/${workspaceId}/events`, params: { workspace_id: workspaceId, subscription_id: 'sub_1' }, headers, body }), lambdaContext());
    return { status: res.statusCode, body: res.body ? JSON.parse(res.body) : undefined };
  }
  const json = { 'content-type': 'application/json' };

  it('hands the checked workspace to the handler', async () => {
    expect(await call(publish, ws, { ...bearer(appKey), ...json }, '{}')).toEqual({ status: 200, body: { workspace: ws, organization: org } });
    expect(await call(publish, ws2, { ...bearer(orgKey), ...json }, '{}')).toEqual({ status: 200, body: { workspace: ws2, organization: org } });
  });

  it('answers a foreign, missing or malformed workspace with the same 403 body, whatever the body sent', async () => {
    const bodies = new Set<string>();
    for (const [credential, id] of [[appKey, ws2], [orgKey, foreignWs], [orgKey, `ws_${'0'.repeat(26)}`], [orgKey, 'nope']] as const) {
      // Not JSON: the 403 comes before the body is parsed.
      const r = await call(publish, id, { ...bearer(credential), ...json }, '{not json');
      expect(r.status).toBe(403);
      bodies.add(JSON.stringify(r.body));
    }
    expect([...bodies]).toEqual([JSON.stringify({ error: { code: 'forbidden', message: 'This credential may not use this workspace.', type: 'permission_error', param: null } })]);
  });

  it('answers 401 before any 403, and the permission before the workspace', async () => {
    expect((await call(publish, foreignWs, {})).body.error.code).toBe('missing_credentials');
    expect((await call(publish, 'nope', bearer(`aik_${'0'.repeat(64)}`))).body.error.code).toBe('invalid_credentials');
    const narrow = await call(publish, foreignWs, bearer(narrowOauthToken));
    expect([narrow.status, narrow.body.error.code]).toEqual([403, 'forbidden']);
    expect(narrow.body.error.message).toContain('events:event.publish');
  });

  it('end users are refused on Events; a publishable key may open a stream in its workspace and nothing else', async () => {
    expect((await call(publish, ws, bearer(endUserToken))).status).toBe(401);
    expect((await call(publish, ws, { ...bearer(pubKey), origin: ORIGIN })).body.error.code).toBe('publishable_key_not_allowed');
    expect(await call(stream, ws, { ...bearer(pubKey), origin: ORIGIN }, undefined, 'GET')).toMatchObject({ status: 200, body: { workspace: ws } });
    expect((await call(stream, ws2, { ...bearer(pubKey), origin: ORIGIN }, undefined, 'GET')).body.error.code).toBe('forbidden');
    expect((await call(stream, ws, bearer(publishOnlyKey), undefined, 'GET')).body.error.message).toContain('events:stream.open');
  });

  it('workspaceHandler() refuses a route without {workspace_id}', () => {
    expect(() => workspaceHandler(testRoute({ api: 'events', path: '/v1/other' }), async () => ({ status: 204 }))).toThrow(/workspace_id/);
    // httpHandler() of such a route still works, without a workspace.
    expect(typeof httpHandler(testRoute({ api: 'events', path: '/v1/other' }), async () => ({ status: 204 }))).toBe('function');
  });
});
