/**
 * Each middleware of the chain alone, called on a plain event (test/helpers/events.ts) over a real
 * embedded engine; then which steps chainFor() assembles, with which options, for routes of the real
 * route table. The whole chain, driven through httpHandler(), is chain.test.ts.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { EngineUnavailableError } from '../../lambdas/engine/errors.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { OAuthClients } from '../../lambdas/auth/oauth-clients.js';
import { issueToken } from '../../lambdas/auth/tokens.js';
import { authenticate } from '../../lambdas/auth/credentials.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import { flushActivity } from '../../lambdas/activity/activity.js';
import { listActivity } from '../../lambdas/activity/listing.js';
import { PlatformError, type ErrorCode } from '../../lambdas/shared/errors.js';
import { settings, useSettings } from '../../lambdas/shared/settings.js';
import { chainFor } from '../../lambdas/http/chain.js';
import { ROUTES, routeById } from '../../lambdas/http/routes.js';
import type { HttpResponse, Middleware, RouteResult, Transport } from '../../lambdas/http/types.js';
import { activity } from '../../lambdas/http/middleware/activity.js';
import { credentials, type CredentialsOptions } from '../../lambdas/http/middleware/credentials.js';
import { jsonBody, type BodyLimit } from '../../lambdas/http/middleware/json-body.js';
import { operationIdRequired } from '../../lambdas/http/middleware/operation-id.js';
import { rateLimit } from '../../lambdas/http/middleware/rate-limit.js';
import { respond } from '../../lambdas/http/middleware/respond.js';
import { streamBody } from '../../lambdas/http/middleware/stream-body.js';
import { platformRequest, testRoute, type ApiEventOptions, type PlatformRequest, type PlatformRequestOptions } from '../helpers/events.js';

const ORIGIN = 'https://app.example';

let dir: string;
let engine: EmbeddedEngine;
let tenants: Tenants;
let org: string;
let ws: string;
let app: string;
/** Organization-wide secret key. */
let orgKey: string;
/** Secret key bound to an application that enabled `ai.chat` only. */
let appKey: string;
/** Publishable key of that application, for ORIGIN. */
let pubKey: string;
let oauthToken: string;
let endUserToken: string;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  useSettings();
  dir = mkdtempSync(join(tmpdir(), 'mws-'));
  engine = createEmbeddedEngine({ dataDir: join(dir, 'main') });
  const now = () => engine.clock.now();
  tenants = new Tenants(engine.kv, now);
  org = (await tenants.createOrganization('o')).id;
  ws = (await tenants.createWorkspace(org, 'w')).id;
  app = (await tenants.createApplication(ws, 'a', ['ai.chat'])).id;
  orgKey = (await tenants.createSecretKey(org)).key;
  appKey = (await tenants.createSecretKey(org, app)).key;
  pubKey = (await new PublishableKeys(engine.kv, now).create(app, [ORIGIN])).key;
  const client = await new OAuthClients(engine.kv, now).create(app);
  const subject = { organizationId: org, applicationId: app, workspaceId: ws };
  oauthToken = (await issueToken(engine, { kind: 'oauth_client', subject: client.client_id, ...subject }, 3600)).token;
  endUserToken = (await issueToken(engine, { kind: 'end_user', subject: 'user-1', ...subject }, 3600)).token;
});
afterAll(async () => {
  await flushActivity();
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

const bearer = (credential: string) => ({ authorization: `Bearer ${credential}` });

/** Runs one phase of a middleware; a synchronous throw becomes a rejection, as middy awaits it. */
async function run(middleware: Middleware, phase: 'before' | 'after' | 'onError', request: PlatformRequest): Promise<PlatformRequest> {
  const fn = middleware[phase];
  if (!fn) throw new Error(`the middleware has no ${phase}`);
  await fn(request);
  return request;
}

/** What a refused call threw: always a PlatformError (the JSON error shape's source). */
async function refusal(promise: Promise<unknown>): Promise<PlatformError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, 'expected the middleware to refuse').toBeInstanceOf(PlatformError);
  return error as PlatformError;
}

async function refusedWith(promise: Promise<unknown>, code: ErrorCode, status: number): Promise<PlatformError> {
  const error = await refusal(promise);
  expect([error.code, error.status]).toEqual([code, status]);
  return error;
}

describe('credentials', () => {
  const serverOnly: CredentialsOptions = { accepted: ['secret_key', 'oauth_client'], browsers: false, publishableKeyOnlyStreams: false, tenantHeaders: false };
  const everyKind: CredentialsOptions = { ...serverOnly, accepted: ['secret_key', 'oauth_client', 'publishable_key', 'end_user'] };

  /** Runs credentials(options) alone; resolves to the principal it set. */
  async function authorize(options: Partial<CredentialsOptions>, headers: Record<string, string>) {
    const request = platformRequest({ route: testRoute({ api: 'data', method: 'GET' }), event: { headers }, engine });
    await run(credentials({ ...serverOnly, ...options }), 'before', request);
    return request.context.platform.principal;
  }

  it('answers 401 missing_credentials without a credential, invalid_credentials for a malformed or unknown one, and sets no principal', async () => {
    await refusedWith(authorize({}, {}), 'missing_credentials', 401);
    await refusedWith(authorize({}, { authorization: '   ' }), 'missing_credentials', 401);
    await refusedWith(authorize({}, { authorization: `Basic ${orgKey}` }), 'invalid_credentials', 401);
    await refusedWith(authorize({}, bearer(`aik_${'0'.repeat(64)}`)), 'invalid_credentials', 401);
    await refusedWith(authorize({}, bearer('a.b.c')), 'invalid_credentials', 401);

    const request = platformRequest({ route: testRoute(), event: { headers: bearer(`aik_${'1'.repeat(64)}`) }, engine });
    await refusal(run(credentials(serverOnly), 'before', request));
    expect(request.context.platform.principal).toBeUndefined();
  });

  it('sets the principal resolved from the credential', async () => {
    expect(await authorize({}, bearer(orgKey))).toMatchObject({ kind: 'secret_key', organizationId: org, applicationId: null, capabilities: null });
    expect(await authorize({}, bearer(appKey))).toMatchObject({ kind: 'secret_key', organizationId: org, applicationId: app, workspaceId: ws, capabilities: ['ai.chat'] });
    expect(await authorize({}, bearer(oauthToken))).toMatchObject({ kind: 'oauth_client', organizationId: org, applicationId: app });
  });

  it('takes only the kinds of credential it accepts (401 for the others)', async () => {
    await refusedWith(authorize({ accepted: ['secret_key'] }, bearer(oauthToken)), 'invalid_credentials', 401);
    await refusedWith(authorize({ accepted: ['oauth_client'] }, bearer(orgKey)), 'invalid_credentials', 401);
    await refusedWith(authorize(serverOnly, bearer(endUserToken)), 'invalid_credentials', 401);
    expect(await authorize(everyKind, bearer(endUserToken))).toMatchObject({ kind: 'end_user', userId: 'user-1', organizationId: org, applicationId: app });
  });

  it('tells a publishable key 403 publishable_key_not_allowed only with publishableKeyOnlyStreams, else 401', async () => {
    const fromBrowser = { ...bearer(pubKey), origin: ORIGIN };
    await refusedWith(authorize({ publishableKeyOnlyStreams: true, browsers: true }, fromBrowser), 'publishable_key_not_allowed', 403);
    await refusedWith(authorize({ publishableKeyOnlyStreams: false, browsers: true }, fromBrowser), 'invalid_credentials', 401);
    // Where publishable keys are accepted the option changes nothing.
    expect(await authorize({ ...everyKind, browsers: true, publishableKeyOnlyStreams: true }, fromBrowser)).toMatchObject({ kind: 'publishable_key' });
  });

  it('refuses server credentials from a browser (403 secret_key_in_browser) only where browsers may call', async () => {
    const origin = { origin: ORIGIN };
    await refusedWith(authorize({ ...everyKind, browsers: true }, { ...bearer(orgKey), ...origin }), 'secret_key_in_browser', 403);
    await refusedWith(authorize({ ...everyKind, browsers: true }, { ...bearer(oauthToken), ...origin }), 'secret_key_in_browser', 403);
    // Without browsers (the AI API) an Origin header means nothing; without Origin it is a server.
    expect(await authorize({ ...everyKind, browsers: false }, { ...bearer(orgKey), ...origin })).toMatchObject({ kind: 'secret_key' });
    expect(await authorize({ ...everyKind, browsers: true }, bearer(orgKey))).toMatchObject({ kind: 'secret_key' });
    // Browser credentials are fine from a browser.
    expect(await authorize({ ...everyKind, browsers: true }, { ...bearer(endUserToken), ...origin })).toMatchObject({ kind: 'end_user' });
  });

  it('lets a publishable key in only from one of its origins (403 origin_not_allowed)', async () => {
    const options = { ...everyKind, browsers: true };
    expect(await authorize(options, { ...bearer(pubKey), origin: ORIGIN })).toMatchObject({ kind: 'publishable_key', origins: [ORIGIN], applicationId: app });
    await refusedWith(authorize(options, { ...bearer(pubKey), origin: 'https://evil.example' }), 'origin_not_allowed', 403);
    await refusedWith(authorize(options, bearer(pubKey)), 'origin_not_allowed', 403);
  });

  it('requires the route’s capability of an application-bound credential (403 capability_not_enabled)', async () => {
    expect(await authorize({ capability: 'ai.chat' }, bearer(appKey))).toMatchObject({ applicationId: app });
    const refused = await refusedWith(authorize({ capability: 'knowledge' }, bearer(appKey)), 'capability_not_enabled', 403);
    expect(refused.message).toContain('knowledge');
    await refusedWith(authorize({ capability: 'knowledge' }, bearer(oauthToken)), 'capability_not_enabled', 403);
    // An organization-wide key has every capability.
    expect(await authorize({ capability: 'knowledge' }, bearer(orgKey))).toMatchObject({ organizationId: org });
  });

  it('refuses headers naming another tenant only with tenantHeaders (400 unsupported_field)', async () => {
    for (const name of ['openai-organization', 'x-organization-id', 'x-workspace-id', 'x-application-id']) {
      const refused = await refusedWith(authorize({ tenantHeaders: true }, { ...bearer(appKey), [name]: 'org_someone_else' }), 'unsupported_field', 400);
      expect(refused.param).toBe(name);
      expect(await authorize({ tenantHeaders: false }, { ...bearer(appKey), [name]: 'org_someone_else' }), name).toMatchObject({ organizationId: org });
    }
    // The caller's own tenant may be named.
    const own = { 'openai-organization': org, 'x-organization-id': org, 'x-workspace-id': ws, 'x-application-id': app };
    expect(await authorize({ tenantHeaders: true }, { ...bearer(appKey), ...own })).toMatchObject({ organizationId: org, applicationId: app });
  });
});

describe('rateLimit', () => {
  let clock: ManualClock;
  let clocked: EmbeddedEngine;
  /** A second engine over the same store: another worker process, or another Lambda instance. */
  let peer: EmbeddedEngine;
  let clockedTenants: Tenants;
  let clockedOrg: string;

  beforeAll(async () => {
    clock = new ManualClock();
    clocked = createEmbeddedEngine({ dataDir: join(dir, 'clocked'), clock });
    peer = createEmbeddedEngine({ dataDir: join(dir, 'clocked'), clock });
    clockedTenants = new Tenants(clocked.kv, () => clock.now());
    clockedOrg = (await clockedTenants.createOrganization('limited')).id;
  });
  afterAll(async () => {
    await peer.close();
    await clocked.close();
  });

  /** A fresh credential of the clocked engine, resolved as credentials() resolves it. */
  const newPrincipal = async (): Promise<Principal> => authenticate(clocked, `Bearer ${(await clockedTenants.createSecretKey(clockedOrg)).key}`);
  const take = (middleware: Middleware, principal: Principal, on: EmbeddedEngine = clocked) =>
    run(middleware, 'before', platformRequest({ route: testRoute({ api: 'events', method: 'GET' }), engine: on, principal }));

  it('allows perMinute calls, then throws 429 rate_limited with retryAfterSeconds, and allows again once that has passed', async () => {
    const limit = rateLimit({ perMinute: 3, scope: 'events' });
    const caller = await newPrincipal();
    // Half a second into a window, so the wait is not a whole number of seconds: Retry-After rounds up.
    clock.advance(60_000 - (clock.now() % 60_000) + 500);
    for (let i = 0; i < 3; i++) await take(limit, caller);
    const refused = await refusedWith(take(limit, caller), 'rate_limited', 429);
    expect(refused.retryAfterSeconds).toBeGreaterThanOrEqual(1);
    expect(Number.isInteger(refused.retryAfterSeconds)).toBe(true);
    // Refused calls are not counted, and waiting less than Retry-After is not enough.
    clock.advance(refused.retryAfterSeconds! * 1000 - 1000);
    await refusedWith(take(limit, caller), 'rate_limited', 429);
    clock.advance(1000);
    await take(limit, caller);
  });

  it('counts per credential and per scope', async () => {
    const [a, b] = [await newPrincipal(), await newPrincipal()];
    const events = rateLimit({ perMinute: 2, scope: 'events' });
    await take(events, a);
    await take(events, a);
    await refusedWith(take(events, a), 'rate_limited', 429);
    // Another credential has its own count...
    await take(events, b);
    await take(events, b);
    await refusedWith(take(events, b), 'rate_limited', 429);
    // ...and so has the same credential on another API.
    const data = rateLimit({ perMinute: 2, scope: 'data' });
    await take(data, a);
    await take(data, a);
    await refusedWith(take(data, a), 'rate_limited', 429);
  });

  it('counts in the key-value store: two instances over one store share the limit', async () => {
    const caller = await newPrincipal();
    const limit = rateLimit({ perMinute: 2, scope: 'events' });
    await take(limit, caller, clocked);
    await take(limit, caller, peer);
    await refusedWith(take(limit, caller, peer), 'rate_limited', 429);
    await refusedWith(take(rateLimit({ perMinute: 2, scope: 'events' }), caller, clocked), 'rate_limited', 429);
  });

  it('counts end users of two organizations apart, though their applications gave them one user id', async () => {
    const endUser = (org: string, app: string): Principal => ({
      kind: 'end_user', credentialId: 'user-1', userId: 'user-1', organizationId: org, applicationId: app, workspaceId: 'ws', capabilities: [], claims: {}, origins: null, permissions: [],
    });
    const limit = rateLimit({ perMinute: 1, scope: 'data' });
    await take(limit, endUser('org_a', 'app_a'));
    await refusedWith(take(limit, endUser('org_a', 'app_a')), 'rate_limited', 429);
    await take(limit, endUser('org_b', 'app_b'));
    await take(limit, endUser('org_a', 'app_c'));
  });
});

describe('jsonBody', () => {
  const limit: BodyLimit = { maxBytes: 64, tooLargeCode: 'payload_too_large' };
  const json = { 'content-type': 'application/json' };
  /** Runs jsonBody alone on a POST; resolves to the request it parsed. */
  const parse = async (event: ApiEventOptions, options = limit) => {
    const request = platformRequest({ route: testRoute({ api: 'data' }), event: { method: 'POST', ...event } });
    await run(jsonBody(options), 'before', request);
    return request.context.platform.req;
  };
  /** A JSON document of exactly `size` bytes. */
  const documentOf = (size: number) => `{"a":"${'x'.repeat(size - 8)}"}`;

  it('parses a JSON body into req.json', async () => {
    expect((await parse({ headers: json, body: '{"a":[1,2],"b":"é"}' })).json).toEqual({ a: [1, 2], b: 'é' });
    expect((await parse({ headers: json, body: Buffer.from('[true,null]') })).json).toEqual([true, null]);
  });

  it('refuses a body over maxBytes with the given tooLargeCode (413), before looking at its type', async () => {
    expect(documentOf(64)).toHaveLength(64);
    expect((await parse({ headers: json, body: documentOf(64) })).json).toEqual({ a: 'x'.repeat(56) });
    await refusedWith(parse({ headers: json, body: documentOf(65) }), 'payload_too_large', 413);
    await refusedWith(parse({ headers: json, body: documentOf(65) }, { maxBytes: 64, tooLargeCode: 'request_too_large' }), 'request_too_large', 413);
    await refusedWith(parse({ headers: { 'content-type': 'text/plain' }, body: 'x'.repeat(65) }), 'payload_too_large', 413);
    // Bytes, not characters: 34 characters, 66 bytes.
    await refusedWith(parse({ headers: json, body: `"${'é'.repeat(32)}"` }), 'payload_too_large', 413);
  });

  it('requires a JSON content type, +json ones included (400 invalid_body)', async () => {
    for (const type of ['application/json', 'application/json; charset=utf-8', 'APPLICATION/JSON', 'application/merge-patch+json', 'application/vnd.api+json', 'application/vnd.github.v3+json']) {
      expect((await parse({ headers: { 'content-type': type }, body: '{"ok":1}' })).json, type).toEqual({ ok: 1 });
    }
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/jsonx', 'application/json-seq', 'text/json', '']) {
      await refusedWith(parse({ headers: type ? { 'content-type': type } : {}, body: '{"ok":1}' }), 'invalid_body', 400);
    }
  });

  it('refuses malformed JSON (400 invalid_body)', async () => {
    for (const body of ['{"a":', '{a:1}', "{'a':1}", 'undefined', '[1,]']) {
      await refusedWith(parse({ headers: json, body }), 'invalid_body', 400);
    }
  });

  it('leaves an empty body alone, whatever its content type', async () => {
    for (const headers of [{}, { 'content-type': 'text/plain' }, json]) {
      const req = await parse({ headers });
      expect(req.json).toBeUndefined();
      expect(req.body.length).toBe(0);
    }
    expect((await parse({ headers: { 'content-type': 'text/plain' }, body: '' })).json).toBeUndefined();
  });
});

describe('streamBody', () => {
  const limit: BodyLimit = { maxBytes: 10, tooLargeCode: 'payload_too_large' };
  const route = testRoute({ api: 'data', method: 'PUT', body: 'stream', maxBodyBytes: 10 });
  const piped = (chunks: Buffer[]): Transport => ({ mode: 'piped', bodyStream: Readable.from(chunks) });
  const readAll = async (stream: Readable) => {
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer));
    return Buffer.concat(chunks);
  };
  /** Runs streamBody alone; resolves to the request whose stream() the handler would read. */
  const open = async (options: Pick<PlatformRequestOptions, 'event' | 'transport'>, bodyLimit = limit) => {
    const request = platformRequest({ route, ...options });
    await run(streamBody(bodyLimit), 'before', request);
    return request.context.platform.req;
  };

  it('refuses a declared Content-Length over maxBytes with the given code before reading a byte (413)', async () => {
    const transport = piped([randomBytes(11)]);
    await refusedWith(open({ event: { method: 'PUT', headers: { 'content-length': '11' } }, transport }), 'payload_too_large', 413);
    expect(transport.bodyStream!.readableDidRead).toBe(false);
    await refusedWith(open({ event: { method: 'PUT', headers: { 'content-length': '11' } } }, { maxBytes: 10, tooLargeCode: 'request_too_large' }), 'request_too_large', 413);
  });

  it('counts an undeclared body as it streams and fails past maxBytes (413)', async () => {
    // A piping runtime's socket stream, in chunks.
    const req = await open({ event: { method: 'PUT' }, transport: piped([randomBytes(6), randomBytes(6)]) });
    await refusedWith(readAll(req.stream()), 'payload_too_large', 413);
    // Lambda: the body whole in the event.
    const inEvent = await open({ event: { method: 'PUT', body: randomBytes(11) } });
    await refusedWith(readAll(inEvent.stream()), 'payload_too_large', 413);
    // A declared length under the limit does not excuse more bytes.
    const lying = await open({ event: { method: 'PUT', headers: { 'content-length': '5' } }, transport: piped([randomBytes(5), randomBytes(6)]) });
    await refusedWith(readAll(lying.stream()), 'payload_too_large', 413);
  });

  it('passes a body up to maxBytes through unchanged and unparsed', async () => {
    const bytes = randomBytes(10);
    const req = await open({ event: { method: 'PUT', headers: { 'content-length': '10' } }, transport: piped([bytes.subarray(0, 3), bytes.subarray(3)]) });
    expect((await readAll(req.stream())).equals(bytes)).toBe(true);
    const inEvent = await open({ event: { method: 'PUT', headers: { 'content-type': 'application/json' }, body: '{not json!' } });
    expect((await readAll(inEvent.stream())).toString()).toBe('{not json!');
    expect(inEvent.json).toBeUndefined();
  });
});

describe('operationIdRequired', () => {
  const check = (method: string, headers: Record<string, string> = {}) =>
    run(operationIdRequired(), 'before', platformRequest({ route: testRoute({ method: 'POST' }), event: { method, headers } }));

  for (const method of ['POST', 'PUT', 'DELETE']) {
    it(`requires one on ${method} (400 missing_operation_id)`, async () => {
      expect((await refusedWith(check(method), 'missing_operation_id', 400)).param).toBe('x-operation-id');
      await check(method, { 'x-operation-id': 'op-00000001' });
    });
  }

  it('does not require one on GET', async () => {
    await check('GET');
    await check('GET', { 'x-operation-id': 'op-00000001' });
  });

  it('refuses one outside 8..128 of letters, digits, _ and - (400 invalid_operation_id), on reads too', async () => {
    for (const bad of ['1234567', 'a'.repeat(129), 'has space1', 'dots.not.ok', '']) {
      // The header is named (the OpenAPI fuzzer found the param null): the client sees which input to fix.
      expect((await refusedWith(check('POST', { 'x-operation-id': bad }), 'invalid_operation_id', 400)).param).toBe('x-operation-id');
    }
    await refusedWith(check('GET', { 'x-operation-id': 'short' }), 'invalid_operation_id', 400);
    for (const good of ['12345678', 'a'.repeat(128), 'A_b-9_zz']) await check('POST', { 'x-operation-id': good });
  });

  it("on a route marked operationIds: 'optional', takes none, or the Idempotency-Key as the id (checked)", async () => {
    const optional = (headers: Record<string, string> = {}) => {
      const r = platformRequest({ route: testRoute({ method: 'POST' }), event: { method: 'POST', headers } });
      return run(operationIdRequired({ optional: true }), 'before', r).then(() => r.context.platform.operationId);
    };
    const made = await optional();
    expect(made).toMatch(/^op_/);
    expect(await optional({ 'idempotency-key': 'retry-key-0001' })).toBe('retry-key-0001');
    await refusedWith(optional({ 'idempotency-key': 'short' }), 'invalid_operation_id', 400);
    await refusedWith(optional({ 'x-operation-id': 'short' }), 'invalid_operation_id', 400);
    // With an X-Operation-Id too (which is the id then), a malformed key is still refused: the route documents it.
    await refusedWith(optional({ 'x-operation-id': 'op-00000001', 'idempotency-key': 'abc' }), 'invalid_operation_id', 400);
  });
});

describe('respond', () => {
  const dataRoute = testRoute({ api: 'data', method: 'GET' });
  /** respond() alone: `after` with a handler's answer, or `onError` with an error; resolves to the result. */
  async function answer(options: { cors: boolean }, outcome: { response: HttpResponse } | { error: Error }, request: Partial<PlatformRequestOptions> = {}): Promise<RouteResult> {
    const r = platformRequest({ route: dataRoute, engine, ...request, ...('error' in outcome ? { error: outcome.error } : { response: outcome.response }) });
    await run(respond(options), 'error' in outcome ? 'onError' : 'after', r);
    return r.response!;
  }
  const body = (result: RouteResult) => JSON.parse(String(result.body));

  it('turns the handler’s answer into the result', async () => {
    const r = await answer({ cors: false }, { response: { status: 201, body: { a: 1 }, headers: { etag: '"v1"' } } });
    expect(r).toMatchObject({ statusCode: 201, headers: { 'content-type': 'application/json', etag: '"v1"' } });
    expect(body(r)).toEqual({ a: 1 });
    const bytes = randomBytes(8);
    const binary = await answer({ cors: false }, { response: { status: 200, body: bytes } });
    expect([binary.isBase64Encoded, Buffer.from(String(binary.body), 'base64').equals(bytes)]).toEqual([true, true]);
  });

  it('answers a PlatformError in the JSON error shape, with its status and type', async () => {
    const r = await answer({ cors: false }, { error: new PlatformError('capability_not_enabled', 'Not enabled.') });
    expect(r.statusCode).toBe(403);
    expect(r.headers).toMatchObject({ 'content-type': 'application/json' });
    expect(body(r)).toEqual({ error: { code: 'capability_not_enabled', message: 'Not enabled.', type: 'permission_error', param: null } });
    const withParam = await answer({ cors: false }, { error: new PlatformError('unsupported_field', 'No.', 'model') });
    expect([withParam.statusCode, body(withParam)]).toEqual([400, { error: { code: 'unsupported_field', message: 'No.', type: 'invalid_request_error', param: 'model' } }]);
    expect((await answer({ cors: false }, { error: new PlatformError('not_found', 'No.') })).headers?.['retry-after']).toBeUndefined();
  });

  it('sends Retry-After from retryAfterSeconds', async () => {
    const r = await answer({ cors: false }, { error: new PlatformError('rate_limited', 'Slow down.', { retryAfterSeconds: 42 }) });
    expect(r.statusCode).toBe(429);
    expect(r.headers?.['retry-after']).toBe('42');
    expect(body(r).error).toMatchObject({ code: 'rate_limited', type: 'rate_limit_error' });
  });

  it('answers a plain Error with a bare 500, no detail', async () => {
    const r = await answer({ cors: false }, { error: new Error('secret internals at /srv/app.ts:12') });
    expect(r.statusCode).toBe(500);
    expect(body(r)).toEqual({ error: { code: 'internal_error', message: expect.any(String), type: 'api_error', param: null } });
    expect(String(r.body)).not.toContain('internals');
  });

  it('answers an unavailable engine with 503 service_unavailable', async () => {
    const r = await answer({ cors: false }, { error: new EngineUnavailableError('throttled') });
    expect([r.statusCode, body(r).error.code, body(r).error.type]).toEqual([503, 'service_unavailable', 'api_error']);
  });

  it('adds CORS headers only with cors: true and an Origin, to errors too', async () => {
    const ok: { response: HttpResponse } = { response: { status: 200, body: {} } };
    const fromApp = { event: { headers: { origin: ORIGIN } } };
    const allowed = { vary: 'Origin', 'access-control-allow-origin': ORIGIN, 'access-control-expose-headers': 'etag, location, x-request-id' };
    expect((await answer({ cors: true }, ok, fromApp)).headers).toMatchObject(allowed);
    expect((await answer({ cors: true }, { error: new PlatformError('forbidden', 'No.') }, fromApp)).headers).toMatchObject(allowed);
    // An origin no publishable key lists is told nothing but Vary.
    const stranger = (await answer({ cors: true }, ok, { event: { headers: { origin: 'https://evil.example' } } })).headers ?? {};
    expect([stranger.vary, stranger['access-control-allow-origin']]).toEqual(['Origin', undefined]);
    // No Origin, or an API without CORS: no CORS headers at all.
    for (const r of [await answer({ cors: true }, ok), await answer({ cors: false }, ok, fromApp)]) {
      expect(r.headers?.vary).toBeUndefined();
      expect(r.headers?.['access-control-allow-origin']).toBeUndefined();
    }
  });

  it('names the request on every answer, errors included: x-request-id', async () => {
    const ok = await answer({ cors: false }, { response: { status: 200, body: {} } }, { event: { requestId: 'req-ok' } });
    const failed = await answer({ cors: true }, { error: new Error('boom') }, { event: { requestId: 'req-failed', headers: { origin: ORIGIN } } });
    expect([ok.headers?.['x-request-id'], failed.headers?.['x-request-id']]).toEqual(['req-ok', 'req-failed']);
    // The first step failed before it set the platform: the id the route function gave the request.
    const early = platformRequest({ route: dataRoute, error: new Error('early') });
    delete (early.context as Partial<typeof early.context>).platform;
    Object.assign(early.context, { logIds: { request_id: 'req-early' } });
    await run(respond({ cors: false }), 'onError', early);
    expect([early.response?.statusCode, early.response?.headers?.['x-request-id']]).toEqual([500, 'req-early']);
  });

  it('echoes the operation id on answers and errors, when there is one', async () => {
    const op = { operationId: 'op-00000001' };
    expect((await answer({ cors: false }, { response: { status: 200, body: {} } }, op)).headers?.['x-operation-id']).toBe('op-00000001');
    expect((await answer({ cors: false }, { error: new Error('boom') }, op)).headers?.['x-operation-id']).toBe('op-00000001');
    expect((await answer({ cors: false }, { response: { status: 200, body: {} } })).headers?.['x-operation-id']).toBeUndefined();
  });

  it('passes a Readable body as `stream` in piped mode only', async () => {
    const stream = Readable.from([Buffer.from('abc')]);
    const r = await answer({ cors: false }, { response: { status: 200, body: stream } }, { transport: { mode: 'piped' } });
    expect(r.stream).toBe(stream);
    expect([r.body, r.headers?.['content-type']]).toEqual(['', 'application/octet-stream']);
    // Buffered (Lambda): the handler step reads a stream whole first; one that reaches respond is a bug.
    for (const transport of [undefined, { mode: 'buffered' as const }]) {
      await expect(answer({ cors: false }, { response: { status: 200, body: Readable.from([Buffer.from('abc')]) } }, { transport })).rejects.toThrow(/buffered/);
    }
  });
});

describe('activity', () => {
  let actOrg: string;
  let actKey: string;
  let actAppKey: string;
  let actPrincipal: Principal;

  beforeAll(async () => {
    actOrg = (await tenants.createOrganization('act')).id;
    const actWs = (await tenants.createWorkspace(actOrg, 'w')).id;
    const actApp = (await tenants.createApplication(actWs, 'a', ['ai.chat'])).id;
    actKey = (await tenants.createSecretKey(actOrg)).key;
    actAppKey = (await tenants.createSecretKey(actOrg, actApp)).key;
    actPrincipal = await authenticate(engine, `Bearer ${actKey}`);
  });

  const recordRoute = testRoute({ id: 'data.test.record', api: 'data', method: 'GET', path: '/v1/databases/{database}/collections/{collection}/records/{id}' });
  const recordEvent: ApiEventOptions = { method: 'GET', path: '/v1/databases/db1/collections/c1/records/r1', params: { database: 'db1', collection: 'c1', id: 'r1' } };
  const jsonResult = (statusCode: number, value: unknown): RouteResult => ({ statusCode, headers: { 'content-type': 'application/json' }, body: JSON.stringify(value) });
  const logged = async () => {
    await flushActivity(engine);
    const page = await listActivity(engine.kv, { organizationId: actOrg, applicationId: null }, { from: 0, to: Date.now() + 1, kinds: null, file_sha256: null }, { limit: 100, now: Date.now() });
    return page.items;
  };

  it('records an api.call for an answer, with the principal’s organization and the path’s related record', async () => {
    const before = (await logged()).length;
    const request = platformRequest({ route: recordRoute, event: { ...recordEvent, headers: bearer(actKey) }, engine, principal: actPrincipal, response: jsonResult(200, { ok: true }) });
    await run(activity({ credentialed: true, relatedFromPath: true }), 'after', request);
    const items = await logged();
    expect(items).toHaveLength(before + 1);
    expect(items[0]).toMatchObject({
      kind: 'api.call',
      organization_id: actOrg,
      actor_kind: 'secret_key',
      actor_id: actPrincipal.credentialId,
      source: 'data',
      method: 'GET',
      route: recordRoute.path,
      status: 200,
      outcome: 'success',
      error_code: null,
      bytes_out: 11,
      related: { database: 'db1', collection_id: 'c1', record_id: 'r1' },
    });
    expect(items[0].latency_ms).toBeGreaterThanOrEqual(0);
  });

  it('records a 403 of the credential checks, resolving the credential again, with its error code', async () => {
    const before = (await logged()).length;
    // credentials() threw, so no principal was set: only the Authorization header tells who called.
    const request = platformRequest({
      route: recordRoute,
      event: { ...recordEvent, headers: bearer(actAppKey) },
      engine,
      error: new PlatformError('capability_not_enabled', 'No.'),
      response: jsonResult(403, { error: { code: 'capability_not_enabled', message: 'No.', type: 'permission_error', param: null } }),
    });
    await run(activity({ credentialed: true, relatedFromPath: false }), 'onError', request);
    const items = await logged();
    expect(items).toHaveLength(before + 1);
    expect(items[0]).toMatchObject({ kind: 'api.call', organization_id: actOrg, status: 403, outcome: 'client_error', error_code: 'capability_not_enabled', related: null });
  });

  it('records nothing for a 401, nor on a route that reads no credential', async () => {
    const before = (await logged()).length;
    const unauthorized = platformRequest({
      route: recordRoute,
      event: { ...recordEvent, headers: bearer(actKey) },
      engine,
      response: jsonResult(401, { error: { code: 'invalid_credentials' } }),
      error: new PlatformError('invalid_credentials', 'No.'),
    });
    await run(activity({ credentialed: true, relatedFromPath: true }), 'onError', unauthorized);
    const uncredentialed = platformRequest({ route: recordRoute, event: { ...recordEvent, headers: bearer(actKey) }, engine, principal: actPrincipal, response: jsonResult(200, {}) });
    await run(activity({ credentialed: false, relatedFromPath: true }), 'after', uncredentialed);
    expect(await logged()).toHaveLength(before);
  });
});

describe('chainFor over the route table', () => {
  const names = (id: string) => chainFor(routeById(id)).names;
  const step = (id: string, name: string): Middleware => {
    const { names: steps, middlewares } = chainFor(routeById(id));
    expect(steps, `${id} has no ${name}`).toContain(name);
    return middlewares[steps.indexOf(name)];
  };
  afterEach(() => useSettings());

  it('gives each route its steps, in chain order', () => {
    expect(names('ai.models.list')).toEqual(['activity', 'respond', 'credentials', 'operationId', 'jsonBody']);
    expect(names('data.records.list')).toEqual(['activity', 'respond', 'credentials', 'jsonBody']);
    expect(names('data.blobs.put')).toEqual(['activity', 'respond', 'credentials', 'streamBody']);
    expect(names('data.uploads.part')).toContain('streamBody');
    expect(names('data.uploads.part')).not.toContain('jsonBody');
    // No credential read: no credentials step (nor any that needs a principal); raw bodies are the handler's.
    expect(names('data.oauth.token')).toEqual(['activity', 'respond']);
    expect(names('ai.oauth.token')).toEqual(['activity', 'respond']);
    expect(names('data.preflight')).not.toContain('credentials');
    // The AI fallback has no operation to require an id of.
    expect(names('ai.fallback')).toEqual(['activity', 'respond', 'credentials', 'jsonBody']);
    for (const route of ROUTES) expect(chainFor(route).names.slice(0, 2), route.id).toEqual(['activity', 'respond']);
  });

  it('rate-limits the Events API (600 a minute by default), not its uncredentialed routes', () => {
    expect(settings().eventsRateLimitPerMinute).toBe(600);
    expect(names('events.fallback')).toEqual(['activity', 'respond', 'credentials', 'rateLimit', 'jsonBody']);
    expect(names('events.oauth.token')).not.toContain('rateLimit');
    expect(names('events.preflight')).not.toContain('rateLimit');
    for (const route of ROUTES.filter((r) => r.api !== 'events')) expect(chainFor(route).names, route.id).not.toContain('rateLimit');
  });

  it('rate-limits the Data API only when configured', () => {
    useSettings({ dataRateLimitPerMinute: 5 });
    expect(names('data.records.list')).toEqual(['activity', 'respond', 'credentials', 'rateLimit', 'jsonBody']);
    expect(names('data.blobs.put')).toContain('rateLimit');
    expect(names('data.oauth.token')).not.toContain('rateLimit');
    expect(names('ai.models.list')).not.toContain('rateLimit');
    useSettings();
    expect(names('data.records.list')).not.toContain('rateLimit');
  });

  describe('with the options of the route’s API', () => {
    let clocked: EmbeddedEngine;
    let limitedKey: string;
    beforeAll(async () => {
      clocked = createEmbeddedEngine({ dataDir: join(dir, 'chain'), clock: new ManualClock() });
      const t = new Tenants(clocked.kv, () => clocked.clock.now());
      limitedKey = (await t.createSecretKey((await t.createOrganization('o')).id)).key;
    });
    afterAll(() => clocked.close());

    const calls = (middleware: Middleware, principal: Principal, n: number) =>
      Promise.all(Array.from({ length: n }, () => run(middleware, 'before', platformRequest({ route: 'events.fallback', engine: clocked, principal }))));

    it('Events: 600 calls a minute per credential', async () => {
      const principal = await authenticate(clocked, `Bearer ${limitedKey}`);
      const limit = step('events.fallback', 'rateLimit');
      await calls(limit, principal, 600);
      await refusedWith(calls(limit, principal, 1), 'rate_limited', 429);
    });

    it('Data: the configured limit, counted apart from Events', async () => {
      useSettings({ dataRateLimitPerMinute: 5 });
      const principal = await authenticate(clocked, `Bearer ${limitedKey}`);
      const limit = step('data.records.list', 'rateLimit');
      const call = () => run(limit, 'before', platformRequest({ route: 'data.records.list', engine: clocked, principal }));
      for (let i = 0; i < 5; i++) await call();
      await refusedWith(call(), 'rate_limited', 429);
    });

    it('the credentials step: publishable keys, browsers and tenant headers as the API says', async () => {
      const check = (id: string, headers: Record<string, string>) =>
        run(step(id, 'credentials'), 'before', platformRequest({ route: id, event: { headers }, engine }));
      await refusedWith(check('events.fallback', { ...bearer(pubKey), origin: ORIGIN }), 'publishable_key_not_allowed', 403);
      await refusedWith(check('ai.fallback', { ...bearer(pubKey), origin: ORIGIN }), 'invalid_credentials', 401);
      await check('data.fallback', { ...bearer(pubKey), origin: ORIGIN });
      await refusedWith(check('data.fallback', { ...bearer(orgKey), origin: ORIGIN }), 'secret_key_in_browser', 403);
      await check('ai.fallback', { ...bearer(orgKey), origin: ORIGIN });
      await refusedWith(check('ai.models.list', { ...bearer(orgKey), 'openai-organization': 'org_other' }), 'unsupported_field', 400);
      await check('data.databases.list', { ...bearer(orgKey), 'openai-organization': 'org_other' });
      await refusedWith(check('data.activity.list', bearer(pubKey)), 'origin_not_allowed', 403);
    });

    it('the body steps: the route’s own limit and its API’s 413 code', async () => {
      const parse = (id: string, size: number) =>
        run(step(id, 'jsonBody'), 'before', platformRequest({ route: id, event: { method: 'POST', headers: { 'content-type': 'application/json' }, body: `"${'x'.repeat(size - 2)}"` } }));
      const MiB = 1024 * 1024;
      await parse('data.records.create', MiB);
      await refusedWith(parse('data.records.create', MiB + 1), 'payload_too_large', 413);
      // The AI default is 5 MiB, answered request_too_large.
      await parse('ai.models.list', MiB + 1);
      await refusedWith(parse('ai.models.list', 5 * MiB + 1), 'request_too_large', 413);
      await refusedWith(
        run(step('data.blobs.put', 'streamBody'), 'before', platformRequest({ route: 'data.blobs.put', event: { method: 'PUT', headers: { 'content-length': String(100 * MiB + 1) } } })),
        'payload_too_large',
        413,
      );
    });

    it('the respond step: CORS on Data and Events answers, none on the AI API', async () => {
      const cors = async (id: string) => {
        const request = platformRequest({ route: id, event: { headers: { origin: ORIGIN } }, engine, response: { status: 200, body: {} } });
        await run(step(id, 'respond'), 'after', request);
        return request.response?.headers?.['access-control-allow-origin'];
      };
      expect(await cors('data.fallback')).toBe(ORIGIN);
      expect(await cors('events.fallback')).toBe(ORIGIN);
      expect(await cors('ai.fallback')).toBeUndefined();
    });
  });
});
