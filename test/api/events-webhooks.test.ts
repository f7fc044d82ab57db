/**
 * Webhook delivery through the local server: a real receiver on loopback
 * (EVENTS_ALLOW_LOOPBACK_WEBHOOKS on for this file only), signatures checked by an independent HMAC
 * computation, the retry ladder and dead letters driven by the engine's manual clock, replay.
 */
import { createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError, ok } from '../helpers/data-api.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { retryDelaySeconds } from '../../lambdas/events/delivery.js';

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

let p: TestPlatform;
let key: Record<string, string>;
let W: string;
let receiver: http.Server;
let base: string;
const received: Received[] = [];
/** Status the receiver answers per path (default 200). */
const answers = new Map<string, number>();
const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
const call = (method: string, path: string, body?: unknown) => callApi(p.urls.events, key, method, `/v1/workspaces/${W}${path}`, body);


async function waitFor<T>(what: string, probe: () => T | undefined, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
const at = (path: string) => received.filter((r) => r.path === path);

beforeAll(async () => {
  useSettings({ eventsAllowLoopbackWebhooks: true });
  receiver = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      received.push({ path: req.url!, headers: req.headers, body });
      res.statusCode = answers.get(req.url!) ?? 200;
      res.end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  p = await startTestPlatform({ clock });
  key = bearer(p.credentials.secret_key);
  W = p.credentials.workspace_id;
});
afterAll(async () => {
  await p?.close();
  await new Promise((r) => receiver.close(r));
  useSettings(undefined);
});

describe('webhook delivery', () => {
  it('POSTs the envelope with the spec headers, signed with v1 HMAC-SHA256 over timestamp.body', async () => {
    const sub = await ok(call('POST', '/subscriptions', { types: ['paid.*'], delivery: { mode: 'webhook', url: `${base}/ok` } }), 201);
    const published = await ok(call('POST', '/events', { event: { type: 'paid.order', data: { n: 1, text: 'é ✓' } } }), 202);
    const eventId = published.accepted[0].event_id;
    const [got] = await waitFor('the delivery', () => (at('/ok').length ? at('/ok') : undefined));
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['x-event-id']).toBe(eventId);
    expect(got.headers['x-event-type']).toBe('paid.order');
    const timestamp = got.headers['x-event-timestamp'] as string;
    expect(timestamp).toBe(String(Math.floor(clock.now() / 1000)));
    const expected = createHmac('sha256', Buffer.from(sub.signing_secret, 'utf8')).update(`${timestamp}.${got.body}`).digest('hex');
    expect(got.headers['x-event-signature']).toBe(`v1=${expected}`);
    expect(JSON.parse(got.body)).toMatchObject({ event_id: eventId, type: 'paid.order', data: { n: 1, text: 'é ✓' } });
    // After a rotation both secrets sign, newest first.
    const rotated = await ok(call('POST', `/subscriptions/${sub.subscription_id}/rotate-secret`));
    await ok(call('POST', '/events', { event: { type: 'paid.again', data: 2 } }), 202);
    const second = await waitFor('the second delivery', () => at('/ok')[1]);
    const sig = (secret: string) => createHmac('sha256', secret).update(`${second.headers['x-event-timestamp']}.${second.body}`).digest('hex');
    expect(second.headers['x-event-signature']).toBe(`v1=${sig(rotated.signing_secret)},v1=${sig(sub.signing_secret)}`);
    await ok(call('DELETE', `/subscriptions/${sub.subscription_id}`), 204);
  });

  it('retries after 10 s doubling, 5 attempts in all, then keeps a dead letter; replay reaches only the failed subscription', async () => {
    answers.set('/down', 503);
    const down = await ok(call('POST', '/subscriptions', { types: ['ship.*'], delivery: { mode: 'webhook', url: `${base}/down` } }), 201);
    const up = await ok(call('POST', '/subscriptions', { types: ['ship.*'], delivery: { mode: 'webhook', url: `${base}/up` } }), 201);
    const before = await ok(call('GET', '/stats'));
    const eventId = (await ok(call('POST', '/events', { event: { type: 'ship.sent', data: 1 } }), 202)).accepted[0].event_id;
    await waitFor('the first attempts', () => (at('/down').length === 1 && at('/up').length === 1 ? true : undefined));
    expect([1, 2, 3, 4].map(retryDelaySeconds)).toEqual([10, 20, 40, 80]);
    /** The receiver has seen an attempt before the platform queued the next one: wait for the queueing (counted in stats). */
    const retriesQueued = async (n: number) => {
      for (let i = 0; i < 200; i++) {
        if ((await ok(call('GET', '/stats'))).retries - before.retries >= n) return;
        await new Promise((r) => setTimeout(r, 10));
      }
      throw new Error(`retry ${n} never queued`);
    };
    for (let attempt = 1; attempt < 5; attempt++) {
      await retriesQueued(attempt);
      // Not a moment before its delay...
      clock.advance(retryDelaySeconds(attempt) * 1000 - 1000);
      await new Promise((r) => setTimeout(r, 300)); // deliberate: no attempt comes meanwhile
      expect(at('/down')).toHaveLength(attempt);
      // ...and soon after it.
      clock.advance(1000);
      await waitFor(`attempt ${attempt + 1}`, () => (at('/down').length === attempt + 1 ? true : undefined));
    }
    let dead: any[] = [];
    for (let i = 0; i < 100 && !dead.length; i++) {
      dead = (await ok(call('GET', '/dead'))).dead;
      if (!dead.length) await new Promise((r) => setTimeout(r, 20));
    }
    expect(dead).toEqual([{ event: expect.objectContaining({ event_id: eventId, type: 'ship.sent' }), attempts: 5, dead_at: new Date(clock.now()).toISOString(), replay_count: 0, last_error: 'webhook_status_503' }]);
    expect(at('/up')).toHaveLength(1);
    const stats = await ok(call('GET', '/stats'));
    expect(stats.retries - before.retries).toBe(4);
    expect(stats.dlq_inflow - before.dlq_inflow).toBe(1);
    expect(stats.completed - before.completed).toBe(1);

    answers.set('/down', 200);
    expect((await call('POST', `/dead/${eventId}/replay`)).status).toBe(202);
    await waitFor('the replay', () => (at('/down').length === 6 ? true : undefined));
    await new Promise((r) => setTimeout(r, 300)); // deliberate: /up gets nothing meanwhile
    expect(at('/up')).toHaveLength(1);
    expect(at('/down')[5].headers['x-event-id']).toBe(eventId);
    expect((await ok(call('GET', '/dead'))).dead[0].replay_count).toBe(1);
    expectError(await call('POST', '/dead/evt_00000000000000000000000000/replay'), 404, 'dead_event_not_found');
    expectError(await call('GET', '/dead?limit=0'), 400, 'invalid_query');
    expectError(await call('GET', '/dead?cursor=x'), 400, 'invalid_query');
    for (const s of [down, up]) await ok(call('DELETE', `/subscriptions/${s.subscription_id}`), 204);
  });

  it('never follows a redirect, and refuses loopback destinations once the setting is off', async () => {
    answers.set('/moved', 302);
    const sub = await ok(call('POST', '/subscriptions', { types: ['redir.*'], delivery: { mode: 'webhook', url: `${base}/moved` } }), 201);
    await ok(call('POST', '/events', { event: { type: 'redir.x', data: 1 } }), 202);
    await waitFor('the redirect answer', () => at('/moved')[0]);
    await ok(call('DELETE', `/subscriptions/${sub.subscription_id}`), 204);
    useSettings({ eventsAllowLoopbackWebhooks: false });
    try {
      expectError(await call('POST', '/subscriptions', { types: ['*'], delivery: { mode: 'webhook', url: `${base}/x` } }), 400, 'url_not_https');
      expectError(await call('POST', '/subscriptions', { types: ['*'], delivery: { mode: 'webhook', url: 'https://127.0.0.1/x' } }), 400, 'url_destination_blocked');
    } finally {
      useSettings({ eventsAllowLoopbackWebhooks: true });
    }
  });
});
