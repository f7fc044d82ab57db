/**
 * Large JSON bodies on the local server, one organization's at a time per process
 * (lambdas/local/large-body-turns.ts, docs/decisions/serving-fairness.md): the turns alone, then the
 * real HTTP server (createApiServer) with a route of the whole chain over an embedded engine, whose
 * handler counts how many of each organization's requests it holds at once.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { httpHandler } from '../../lambdas/http/handler.js';
import { createApiServer } from '../../lambdas/local/http-server.js';
import { LARGE_BODY_BYTES, LargeBodyTurns, MAX_WAITING, PAUSE_FACTOR } from '../../lambdas/local/large-body-turns.js';
import { testRoute } from '../helpers/events.js';

describe('LargeBodyTurns', () => {
  it('gives an organization one turn at a time, in order, and other organizations theirs at once', async () => {
    const turns = new LargeBodyTurns();
    const order: string[] = [];
    const a1 = await turns.take('a');
    const a2 = turns.take('a').then((r) => (order.push('a2'), r));
    const a3 = turns.take('a').then((r) => (order.push('a3'), r));
    const b1 = await turns.take('b'); // not behind a's
    expect(turns.holders).toBe(2);
    await sleep(5);
    expect(order).toEqual([]);
    a1();
    a1(); // a second release of the same turn frees nothing more
    const r2 = await a2;
    await sleep(5);
    expect(order).toEqual(['a2']);
    r2();
    (await a3)();
    b1();
    expect(order).toEqual(['a2', 'a3']);
    expect(turns.holders).toBe(0);
  });
});

describe('LargeBodyTurns bounds', () => {
  it(`refuses an organization's large body with 429 rate_limited once ${MAX_WAITING} wait, and takes it again once one is served`, async () => {
    const turns = new LargeBodyTurns();
    const first = await turns.take('a');
    const waiting = Array.from({ length: MAX_WAITING }, () => turns.take('a'));
    await expect(turns.take('a')).rejects.toMatchObject({ code: 'rate_limited', status: 429, retryAfterSeconds: 1 });
    expect(await turns.take('b').then((release) => (release(), 'b served'))).toBe('b served'); // another organization: not counted
    first();
    const next = await waiting[0];
    const again = turns.take('a'); // room for one more
    next();
    for (const w of waiting.slice(1)) (await w)();
    (await again)();
    expect(turns.holders).toBe(0);
  });
});

describe('LargeBodyTurns pauses', () => {
  it(`pauses an organization's next turn ${PAUSE_FACTOR} times the last one's length while another organization is served, and never one alone`, async () => {
    vi.useFakeTimers();
    try {
      let t = 0;
      const turns = new LargeBodyTurns(() => t, 1_000);
      const admitted: string[] = [];
      const take = (name: string) => turns.take('a').then((release) => (admitted.push(name), release));
      const first = await take('1');
      const second = take('2');
      t = 10;
      first(); // a alone: the next turn at once
      await vi.advanceTimersByTimeAsync(0);
      expect(admitted).toEqual(['1', '2']);
      const secondRelease = await second; // admitted at t = 10
      turns.seen('b');
      const third = take('3');
      t = 20;
      secondRelease(); // 10 ms long while b was served: a pause of 30 ms
      await vi.advanceTimersByTimeAsync(10 * PAUSE_FACTOR - 1);
      expect(admitted).toEqual(['1', '2']);
      await vi.advanceTimersByTimeAsync(1);
      expect(admitted).toEqual(['1', '2', '3']);
      const fourth = take('4');
      t = 2_000; // b last seen more than a second ago: no pause, however long the turn
      (await third)();
      await vi.advanceTimersByTimeAsync(0);
      expect(admitted).toEqual(['1', '2', '3', '4']);
      (await fourth)();
      expect(turns.holders).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('the local server takes large JSON bodies an organization at a time', () => {
  let dir: string;
  let engine: EmbeddedEngine;
  let server: Server;
  let url: string;
  let base: string;
  const keys: Record<string, string> = {};
  const inHand: Record<string, number> = {};
  const most: Record<string, number> = {};
  /** The same count on a route that does not store its body (it would wait on an upstream). */
  let upstreamInHand = 0;
  let upstreamMost = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'turns-'));
    engine = createEmbeddedEngine({ dataDir: dir });
    useEngine(engine);
    const t = new Tenants(engine.kv, () => Date.now());
    for (const name of ['a', 'b']) {
      const org = await t.createOrganization(name);
      await t.createWorkspace(org.id, 'w');
      keys[name] = (await t.createSecretKey(org.id)).key;
    }
    const route = testRoute({ api: 'data', path: '/v1/test', storesBody: true });
    const upstreamRoute = testRoute({ id: 'test.upstream', api: 'data', path: '/v1/upstream' });
    const upstream = httpHandler(upstreamRoute, async () => {
      upstreamMost = Math.max(upstreamMost, ++upstreamInHand);
      await sleep(30);
      upstreamInHand--;
      return { status: 200, body: {} };
    });
    const handler = httpHandler(route, async (req, scope) => {
      const org = scope.principal.organizationId;
      inHand[org] = (inHand[org] ?? 0) + 1;
      most[org] = Math.max(most[org] ?? 0, inHand[org]);
      await sleep(30);
      inHand[org]--;
      return { status: 200, body: { bytes: req.body.length, fields: Object.keys(req.json as object) } };
    });
    const fallback = testRoute({ id: 'test.fallback', api: 'data', method: 'ANY', path: '$default' });
    const notFound = httpHandler(fallback, async () => ({ status: 404 }));
    server = await createApiServer('data', [route, upstreamRoute, fallback], async (r) => (r.id === route.id ? handler : r.id === upstreamRoute.id ? upstream : notFound));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    url = `${base}/v1/test`;
  });
  afterAll(async () => {
    if (!server) return;
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await engine.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const send = (key: string, bytes: number) =>
    fetch(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ text: 'x'.repeat(bytes) }) });

  it('holds one large body of an organization at a time, never another organization behind it, and small bodies not at all', async () => {
    for (const k of Object.keys(most)) delete most[k];
    const started = performance.now();
    const large = Array.from({ length: 6 }, () => send(keys.a, LARGE_BODY_BYTES).then((r) => ({ r, at: performance.now() })));
    await sleep(20);
    const other = await send(keys.b, LARGE_BODY_BYTES); // b's large body while a's six wait their turns
    const otherAt = performance.now();
    const answers = await Promise.all(large);
    const small = await Promise.all(Array.from({ length: 6 }, () => send(keys.a, 100)));
    expect([other.status, ...answers.map((a) => a.r.status), ...small.map((r) => r.status)].every((s) => s === 200)).toBe(true);
    expect(((await other.json()) as { fields: string[] }).fields).toEqual(['text']);
    const [orgA, orgB] = Object.keys(most);
    expect(most[orgA]).toBe(6); // the six small ones, together
    expect(most[orgB]).toBe(1);
    // a's six large ones took 30 ms each, one after another, with pauses once b was served; b's did not wait for them.
    expect(Math.max(...answers.map((a) => a.at)) - started).toBeGreaterThan(180);
    expect(otherAt).toBeLessThan(Math.max(...answers.map((a) => a.at)));
  });

  it('takes no turn on a route that does not store its body: an upstream wait would hold it', async () => {
    const answers = await Promise.all(
      Array.from({ length: 4 }, () => fetch(`${base}/v1/upstream`, { method: 'POST', headers: { authorization: `Bearer ${keys.a}`, 'content-type': 'application/json' }, body: JSON.stringify({ text: 'x'.repeat(LARGE_BODY_BYTES) }) })),
    );
    expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
    expect(upstreamMost).toBe(4);
  });

  it('keeps taking an organization\'s large bodies after one is refused', async () => {
    const bad = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${keys.a}`, 'content-type': 'application/json' }, body: `{"text": "${'x'.repeat(LARGE_BODY_BYTES)}` });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { code: string } }).error.code).toBe('invalid_body');
    const ok = await send(keys.a, LARGE_BODY_BYTES);
    expect(ok.status).toBe(200);
  });
});
