/**
 * The middleware chain, driven with API Gateway v2 events exactly as Lambda would, over a real
 * embedded engine: error shape, operation ids, capabilities, JSON bodies.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { httpHandler } from '../../lambdas/http/handler.js';
import type { RouteDef } from '../../lambdas/http/routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { EngineUnavailableError } from '../../lambdas/engine/errors.js';
import { apiEvent, lambdaContext, testRoute } from '../helpers/events.js';

let dir: string;
let engine: EmbeddedEngine;
let orgKey: string;
let chatOnlyKey: string;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  dir = mkdtempSync(join(tmpdir(), 'mw-'));
  engine = createEmbeddedEngine({ dataDir: dir });
  useEngine(engine);
  const t = new Tenants(engine.kv, () => Date.now());
  const org = await t.createOrganization('o');
  const ws = await t.createWorkspace(org.id, 'w');
  const app = await t.createApplication(ws.id, 'a', ['ai.chat']);
  orgKey = (await t.createSecretKey(org.id)).key;
  chatOnlyKey = (await t.createSecretKey(org.id, app.id)).key;
});
afterAll(async () => {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

const route = testRoute;
const ctx = lambdaContext();
const echo = httpHandler(route({}), async (req, scope) => ({ status: 200, body: { json: req.json ?? null, org: scope.principal.organizationId } }));

async function call(handler: typeof echo, method: string, headers: Record<string, string>, body?: string) {
  const res = await handler(apiEvent({ method, path: '/v1/test', headers, body }), ctx);
  return { status: res.statusCode, headers: res.headers ?? {}, body: res.body ? JSON.parse(res.body) : undefined };
}

const auth = (key: string) => ({ authorization: `Bearer ${key}` });
const json = { 'content-type': 'application/json' };

describe('X-Operation-Id on the AI API (spec 4.1)', () => {
  for (const method of ['POST', 'PUT', 'DELETE']) {
    it(`is required on ${method}: 400 missing_operation_id`, async () => {
      const r = await call(httpHandler(route({ method: method as RouteDef['method'] }), async () => ({ status: 204 })), method, auth(orgKey));
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe('missing_operation_id');
      expect(r.headers['x-operation-id']).toMatch(/^op_[0-9a-f]{32}$/);
    });
  }

  it('refuses ids outside 8..128 of letters, digits, _ and -', async () => {
    for (const bad of ['1234567', 'a'.repeat(129), 'has space1', 'dots.not.ok']) {
      const r = await call(echo, 'POST', { ...auth(orgKey), 'x-operation-id': bad });
      expect(r.body.error.code, bad).toBe('invalid_operation_id');
    }
    for (const good of ['12345678', 'a'.repeat(128), 'A_b-9_zz']) {
      const r = await call(echo, 'POST', { ...auth(orgKey), 'x-operation-id': good });
      expect(r.status, good).toBe(200);
      expect(r.headers['x-operation-id']).toBe(good);
    }
  });

  it('checks credentials first: a bad key with no operation id is 401, not 400', async () => {
    const r = await call(echo, 'POST', {});
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe('missing_credentials');
  });

  it('is not read by the Data and Events APIs (spec 5 rule 7)', async () => {
    const data = httpHandler(route({ api: 'data' }), async () => ({ status: 200, body: {} }));
    const r = await call(data, 'POST', { ...auth(orgKey), 'x-operation-id': 'x' });
    expect(r.status).toBe(200);
    expect(r.headers['x-operation-id']).toBeUndefined();
  });
});

describe('capabilities (spec 5 rule 3)', () => {
  const chat = httpHandler(route({ capability: 'ai.chat' }), async () => ({ status: 200, body: {} }));
  const knowledge = httpHandler(route({ capability: 'knowledge' }), async () => ({ status: 200, body: {} }));
  const op = { 'x-operation-id': 'op-00000001' };

  it('lets an application key reach the routes its application enabled', async () => {
    expect((await call(chat, 'POST', { ...auth(chatOnlyKey), ...op })).status).toBe(200);
  });
  it('answers 403 capability_not_enabled for the others', async () => {
    const r = await call(knowledge, 'POST', { ...auth(chatOnlyKey), ...op });
    expect(r.status).toBe(403);
    expect(r.body.error).toMatchObject({ code: 'capability_not_enabled', type: 'permission_error' });
  });
  it('lets an organization key through everywhere', async () => {
    expect((await call(knowledge, 'POST', { ...auth(orgKey), ...op })).status).toBe(200);
  });
});

describe('JSON bodies', () => {
  const op = { 'x-operation-id': 'op-00000001' };
  it('parses JSON', async () => {
    const r = await call(echo, 'POST', { ...auth(orgKey), ...op, ...json }, '{"a":[1,2]}');
    expect(r.body.json).toEqual({ a: [1, 2] });
  });
  it('answers 400 invalid_body for malformed JSON and for a body that is not JSON', async () => {
    expect((await call(echo, 'POST', { ...auth(orgKey), ...op, ...json }, '{"a":')).body.error.code).toBe('invalid_body');
    expect((await call(echo, 'POST', { ...auth(orgKey), ...op, 'content-type': 'text/plain' }, '{}')).body.error.code).toBe('invalid_body');
  });
  it('answers 413 with the API’s own code over the route’s limit', async () => {
    const small = { maxBodyBytes: 10 };
    const ai = httpHandler(route(small), async () => ({ status: 200 }));
    const data = httpHandler(route({ ...small, api: 'data' }), async () => ({ status: 200 }));
    expect(await call(ai, 'POST', { ...auth(orgKey), ...op, ...json }, '{"a":"0123456789"}')).toMatchObject({ status: 413, body: { error: { code: 'request_too_large' } } });
    expect(await call(data, 'POST', { ...auth(orgKey), ...json }, '{"a":"0123456789"}')).toMatchObject({ status: 413, body: { error: { code: 'payload_too_large' } } });
  });
});

describe('error mapping', () => {
  it('answers an unexpected failure with a bare 500 and no detail', async () => {
    const boom = httpHandler(route({ method: 'GET' }), async () => {
      throw new Error('secret internals at /srv/app.ts:12');
    });
    const r = await call(boom, 'GET', auth(orgKey));
    expect(r.status).toBe(500);
    expect(r.body).toEqual({ error: { code: 'internal_error', message: expect.any(String), type: 'api_error', param: null } });
    expect(JSON.stringify(r.body)).not.toContain('internals');
  });
  it('answers an unavailable engine with 503 service_unavailable', async () => {
    const down = httpHandler(route({ method: 'GET' }), async () => {
      throw new EngineUnavailableError('throttled');
    });
    expect(await call(down, 'GET', auth(orgKey))).toMatchObject({ status: 503, body: { error: { code: 'service_unavailable' } } });
  });
});
