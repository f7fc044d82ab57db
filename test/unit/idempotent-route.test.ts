/**
 * The operation-idempotency block (lambdas/shared/operations.ts, its HTTP shape lambdas/http/idempotent.ts)
 * as a route declares it: fake routes on the whole chain over a real embedded engine with a manual
 * clock, so leases lapse without waiting.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PlatformError } from '../../lambdas/shared/errors.js';
import type { OperationRules } from '../../lambdas/shared/operations.js';
import { idempotentHandler, type OperationRouteHandler } from '../../lambdas/http/idempotent.js';
import { httpHandler, type RouteFunction } from '../../lambdas/http/handler.js';
import { API_POLICIES } from '../../lambdas/http/chain.js';
import { apiEvent, lambdaContext, testRoute } from '../helpers/events.js';

const HOLD_SECONDS = 10;
const clock = new ManualClock();
let dir: string;
let engine: EmbeddedEngine;
let key: string;
let route = 0;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  dir = mkdtempSync(join(tmpdir(), 'idem-route-'));
  engine = createEmbeddedEngine({ dataDir: dir, clock });
  useEngine(engine);
  const t = new Tenants(engine.kv, () => Date.now());
  key = (await t.createSecretKey((await t.createOrganization('o')).id)).key;
});
afterAll(async () => {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A fresh route (its own scope) declaring `requests`; the context is the caller's `x-app` header. */
function declare(requests: OperationRules['requests'], handle: (req: Parameters<OperationRouteHandler>[0], scope: Parameters<OperationRouteHandler>[1], app: string) => ReturnType<OperationRouteHandler>): RouteFunction {
  const n = ++route;
  return idempotentHandler(testRoute({ id: `test.items${n}.add` }), { scope: `test.items${n}`, ttlSeconds: 3600, requests }, (req, scope) => handle(req, scope, req.headers['x-app'] ?? 'a'));
}

/** The call as a route's service describes it: held HOLD_SECONDS, kept with the app, replayed only to the same app. */
const callOf = (tenant: string, app: string) => ({
  tenant,
  holdSeconds: HOLD_SECONDS,
  context: { app },
  checkReplay: async (kept: { app: string } | undefined) => {
    if (kept && kept.app !== app) throw new PlatformError('route_forbidden', 'Not yours.');
  },
});

async function post(fn: RouteFunction, id: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fn(apiEvent({ method: 'POST', path: '/v1/test', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': id, ...headers }, body: JSON.stringify(body) }), lambdaContext());
  return { status: res.statusCode, headers: res.headers ?? {}, body: res.body ? JSON.parse(res.body) : undefined };
}

/** A promise and its resolver: holds a run in progress until the test lets it go. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  return { open, opened };
}

describe('a route declaring the operation block', () => {
  it('any body: a reused id replays the kept answer, marked, whatever the new body says; the work ran once', async () => {
    let runs = 0;
    const fn = declare('any', (req, { operation, principal }, app) => operation.answer(callOf(principal.organizationId, app), async () => ({ run: ++runs, got: req.json })));
    const first = await post(fn, 'op-any-0001', { a: 1 });
    expect(first).toMatchObject({ status: 200, body: { run: 1, got: { a: 1 } } });
    expect(first.headers['x-idempotent-replay']).toBeUndefined();
    const again = await post(fn, 'op-any-0001', { something: 'else' });
    expect(again).toMatchObject({ status: 200, body: { run: 1, got: { a: 1 } } });
    expect(again.headers['x-idempotent-replay']).toBe('true');
    expect(again.headers['x-operation-id']).toBe('op-any-0001');
    expect(runs).toBe(1);
  });

  it('same request: another body under the id is 409 operation_id_reused; the same one (keys in any order) replays', async () => {
    let runs = 0;
    const fn = declare('same', (req, { operation, principal }, app) => operation.answer(callOf(principal.organizationId, app), async () => ({ run: ++runs }), 201));
    expect(await post(fn, 'op-same-0001', { file: 'a', size: 1 })).toMatchObject({ status: 201, body: { run: 1 } });
    const other = await post(fn, 'op-same-0001', { file: 'b', size: 1 });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('operation_id_reused');
    const same = await post(fn, 'op-same-0001', { size: 1, file: 'a' });
    expect(same).toMatchObject({ status: 201, body: { run: 1 } });
    expect(same.headers['x-idempotent-replay']).toBe('true');
    expect(runs).toBe(1);
  });

  it('a replay goes through the route\'s re-check hook: a caller it refuses gets the refusal, the one who asked still gets the answer', async () => {
    const fn = declare('any', (_req, { operation, principal }, app) => operation.answer(callOf(principal.organizationId, app), async () => ({ secret: app })));
    expect((await post(fn, 'op-check-001', {}, { 'x-app': 'owner' })).body).toEqual({ secret: 'owner' });
    const stranger = await post(fn, 'op-check-001', {}, { 'x-app': 'stranger' });
    expect(stranger.status).toBe(403);
    expect(stranger.body.error.code).toBe('route_forbidden');
    expect(JSON.stringify(stranger.body)).not.toContain('owner');
    const owner = await post(fn, 'op-check-001', {}, { 'x-app': 'owner' });
    expect(owner.body).toEqual({ secret: 'owner' });
    expect(owner.headers['x-idempotent-replay']).toBe('true');
  });

  it('while a call runs the id is 409 operation_in_progress; a failed call keeps nothing and the id is free at once', async () => {
    let runs = 0;
    let fail = true;
    const running = gate();
    const release = gate();
    const fn = declare('any', (_req, { operation, principal }, app) =>
      operation.answer(callOf(principal.organizationId, app), async () => {
        runs++;
        running.open();
        await release.opened;
        if (fail) throw new PlatformError('upstream_error', 'Failed.');
        return { run: runs };
      }),
    );
    const first = post(fn, 'op-abandon-1', {});
    await running.opened;
    const meanwhile = await post(fn, 'op-abandon-1', {});
    expect(meanwhile.status).toBe(409);
    expect(meanwhile.body.error.code).toBe('operation_in_progress');
    release.open();
    expect((await first).body.error.code).toBe('upstream_error');
    fail = false;
    // No clock advance: the failure let the id go.
    expect(await post(fn, 'op-abandon-1', {})).toMatchObject({ status: 200, body: { run: 2 } });
  });

  it('a holder past its lease is taken over by the next call; its late answer does not overwrite the new holder\'s', async () => {
    let runs = 0;
    const firstRunning = gate();
    const firstRelease = gate();
    const fn = declare('any', (_req, { operation, principal }, app) =>
      operation.answer(callOf(principal.organizationId, app), async () => {
        const run = ++runs;
        if (run === 1) {
          firstRunning.open();
          await firstRelease.opened;
        }
        return { run };
      }),
    );
    const stalled = post(fn, 'op-lease-001', {});
    await firstRunning.opened;
    clock.advance(HOLD_SECONDS * 1000 - 1);
    expect((await post(fn, 'op-lease-001', {})).body.error.code).toBe('operation_in_progress');
    clock.advance(2);
    expect(await post(fn, 'op-lease-001', {})).toMatchObject({ status: 200, body: { run: 2 } });
    firstRelease.open();
    expect((await stalled).body).toEqual({ run: 1 }); // answered; its record was lost, so not kept
    const replay = await post(fn, 'op-lease-001', {});
    expect(replay.body).toEqual({ run: 2 });
    expect(replay.headers['x-idempotent-replay']).toBe('true');
  });

  it('completionWrite in the service\'s transaction: the effect and the kept answer apply together, or neither does', async () => {
    const itemKey = (id: string) => ({ pk: `test-effect#${id}`, sk: 'item' });
    let runs = 0;
    let stall: { running: ReturnType<typeof gate>; release: ReturnType<typeof gate> } | undefined;
    const fn = declare('any', (req, { operation, principal, engine: e }, app) =>
      operation.answer(callOf(principal.organizationId, app), async ({ completionWrite }) => {
        runs++;
        const id = (req.json as { id: string }).id;
        const answer = { id, run: runs };
        if (stall) {
          stall.running.open();
          await stall.release.opened;
        }
        await e.kv.transact([{ put: { ...itemKey(id), run: runs }, condition: { ifAbsent: true } }, completionWrite(answer)]);
        return answer;
      }),
    );

    // Both: the item and the kept answer; a replay does not write again.
    expect((await post(fn, 'op-tx-00001', { id: 'one' })).body).toEqual({ id: 'one', run: 1 });
    expect(await engine.kv.get(itemKey('one'))).toMatchObject({ run: 1 });
    expect((await post(fn, 'op-tx-00001', { id: 'one' })).headers['x-idempotent-replay']).toBe('true');
    expect(runs).toBe(1);

    // The service's write fails: the answer is not kept either, and the id is free at once.
    expect((await post(fn, 'op-tx-00002', { id: 'one' })).status).toBe(500);
    const retried = await post(fn, 'op-tx-00002', { id: 'two' });
    expect(retried.body).toEqual({ id: 'two', run: 3 });
    expect(retried.headers['x-idempotent-replay']).toBeUndefined();

    // The record is lost (lease lapsed, taken over): the service's write is not applied either.
    stall = { running: gate(), release: gate() };
    const late = post(fn, 'op-tx-00003', { id: 'three' });
    await stall.running.opened;
    clock.advance(HOLD_SECONDS * 1000 + 1);
    const { release } = stall;
    stall = undefined;
    expect((await post(fn, 'op-tx-00003', { id: 'four' })).body).toEqual({ id: 'four', run: 5 });
    release.open();
    expect((await late).status).toBe(500);
    expect(await engine.kv.get(itemKey('three'))).toBeUndefined();
    expect((await post(fn, 'op-tx-00003', { id: 'three' })).body).toEqual({ id: 'four', run: 5 });
  });

  it('hold (a stream): the id is 409 while held, free once released, and nothing is kept', async () => {
    let release!: () => Promise<void>;
    const fn = declare('any', async (_req, { operation, principal }, app) => {
      const held = await operation.hold(callOf(principal.organizationId, app));
      if (held.kind === 'replay') return held.response;
      release = held.release;
      return { status: 200, body: { streaming: true } };
    });
    expect((await post(fn, 'op-hold-0001', {})).body).toEqual({ streaming: true });
    expect((await post(fn, 'op-hold-0001', {})).body.error.code).toBe('operation_in_progress');
    await release();
    const again = await post(fn, 'op-hold-0001', {});
    expect(again.body).toEqual({ streaming: true });
    expect(again.headers['x-idempotent-replay']).toBeUndefined();
    await release();
  });

  it('is declared only on writes of an API that requires operation ids: any other route stops at cold start', () => {
    const rules: OperationRules = { scope: 'test.cold', ttlSeconds: 60, requests: 'any' };
    const handle: OperationRouteHandler = async () => ({ status: 204 });
    expect(() => idempotentHandler(testRoute({ api: 'data' }), rules, handle)).toThrow(/operation ids/);
    expect(() => idempotentHandler(testRoute({ method: 'GET' }), rules, handle)).toThrow(/operation ids/);
  });

  it('which APIs carry operation ids is API_POLICIES alone: the chain picks and echoes the id by it, whatever the API', async () => {
    const policy = API_POLICIES.data;
    const before = policy.operationIds;
    try {
      policy.operationIds = true;
      const fn = httpHandler(testRoute({ id: 'test.data.op', api: 'data' }), async (_req, scope) => ({ status: 200, body: { id: scope.operationId ?? null } }));
      const res = await post(fn, 'op-policy-01', {});
      expect(res.body).toEqual({ id: 'op-policy-01' });
      expect(res.headers['x-operation-id']).toBe('op-policy-01');
    } finally {
      policy.operationIds = before;
    }
  });
});
