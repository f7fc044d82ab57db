/**
 * The console's deliveries list (docs/decisions/console-resources.md "Deliveries"): a subscription's
 * recent push deliveries from the delivery log, driven by real attempts of the delivery worker against
 * a local receiver and the engine's manual clock: retrying with its attempts, last error and next
 * attempt, then completed or dead; newest first with a cursor; another organization's subscription and
 * workspace refused as the other console routes refuse them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { retryDelaySeconds } from '../../lambdas/events/delivery.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { bearer, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { ConsoleBrowser, expectError, signedInPerson, strangerOwner } from '../helpers/console-browser.js';

const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
let p: TestPlatform;
let ws: string;
let viewer: ConsoleBrowser;
let developer: ConsoleBrowser;
let stranger: ConsoleBrowser;
let strangerWs: string;
let receiver: http.Server;
let hookBase: string;
/** Requests per path; `/flaky` fails its first two, `/down` every one. */
const hits = new Map<string, number>();

beforeAll(async () => {
  useSettings({ eventsAllowLoopbackWebhooks: true });
  receiver = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const n = (hits.get(req.url!) ?? 0) + 1;
      hits.set(req.url!, n);
      res.statusCode = req.url === '/down' ? 503 : req.url === '/flaky' && n <= 2 ? 500 : 200;
      res.end('ok');
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  hookBase = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  p = await startTestPlatform({ console: true, clock });
  const org = p.credentials.organization_id;
  ws = p.credentials.workspace_id;
  viewer = (await signedInPerson(p.engine, p.consoleUrl!, org, 'viewer')).browser;
  developer = (await signedInPerson(p.engine, p.consoleUrl!, org, 'developer')).browser;
  ({ workspaceId: strangerWs, browser: stranger } = await strangerOwner(p.engine, p.consoleUrl!));
});
afterAll(async () => {
  await p?.close();
  await new Promise((r) => receiver.close(r));
  useSettings(undefined);
});

const base = () => `/console/api/workspaces/${ws}`;
const subscribe = async (who: ConsoleBrowser, workspace: string, path: string) => {
  const made = await who.call('POST', `/console/api/workspaces/${workspace}/subscriptions`, { types: ['order.*'], delivery: { mode: 'webhook', url: `${hookBase}${path}` } });
  expect(made.status, made.text).toBe(201);
  return made.body.subscription_id as string;
};
const publish = async () => {
  const r = await fetch(`${p.urls.events}/v1/workspaces/${ws}/events`, {
    method: 'POST',
    headers: { ...bearer(p.credentials.secret_key), 'content-type': 'application/json' },
    body: JSON.stringify({ event: { type: 'order.paid', data: { n: 1 } } }),
  });
  expect(r.status).toBe(202);
  return ((await r.json()) as { accepted: { event_id: string }[] }).accepted[0].event_id;
};
const list = async (sub: string, extra = '') => {
  const r = await viewer.call('GET', `${base()}/deliveries?subscription_id=${sub}${extra}`);
  expect(r.status, r.text).toBe(200);
  return r.body as { deliveries: Array<Record<string, unknown>>; next_cursor: string | null };
};
/** Waits until the subscription's newest delivery has made `attempts` attempts with `status` logged. */
const logged = async (sub: string, status: string, attempts: number) => {
  let d: Record<string, unknown> | undefined;
  for (let i = 0; i < 250; i++) {
    d = (await list(sub)).deliveries[0];
    if (d?.status === status && d.attempts === attempts) return d;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`${sub}: never ${status} after ${attempts} attempts; last seen ${JSON.stringify(d)}`);
};

describe('deliveries with attempts and last error', () => {
  it('a receiver failing twice shows retrying, then completed after 3 attempts; one always failing ends dead after 5', async () => {
    const flaky = await subscribe(developer, ws, '/flaky');
    const down = await subscribe(developer, ws, '/down');
    expect(await list(flaky)).toEqual({ deliveries: [], next_cursor: null });
    const eventId = await publish();

    let at = clock.now();
    expect(await logged(flaky, 'retrying', 1)).toEqual({
      event_id: eventId,
      type: 'order.paid',
      status: 'retrying',
      attempts: 1,
      last_error: 'webhook_status_500',
      last_attempt_at: new Date(at).toISOString(),
      next_attempt_at: new Date(at + retryDelaySeconds(1) * 1000).toISOString(),
    });
    expect(await logged(down, 'retrying', 1)).toMatchObject({ last_error: 'webhook_status_503' });

    clock.advance(retryDelaySeconds(1) * 1000);
    at = clock.now();
    expect(await logged(flaky, 'retrying', 2)).toMatchObject({ last_error: 'webhook_status_500', last_attempt_at: new Date(at).toISOString(), next_attempt_at: new Date(at + retryDelaySeconds(2) * 1000).toISOString() });
    await logged(down, 'retrying', 2);

    clock.advance(retryDelaySeconds(2) * 1000);
    at = clock.now();
    expect(await logged(flaky, 'completed', 3)).toEqual({ event_id: eventId, type: 'order.paid', status: 'completed', attempts: 3, last_error: null, last_attempt_at: new Date(at).toISOString(), next_attempt_at: null });
    await logged(down, 'retrying', 3);

    for (const attempt of [3, 4]) {
      clock.advance(retryDelaySeconds(attempt) * 1000);
      if (attempt < 4) await logged(down, 'retrying', attempt + 1);
    }
    expect(await logged(down, 'dead', 5)).toEqual({ event_id: eventId, type: 'order.paid', status: 'dead', attempts: 5, last_error: 'webhook_status_503', last_attempt_at: new Date(clock.now()).toISOString(), next_attempt_at: null });
    expect(hits.get('/flaky')).toBe(3);
    expect(hits.get('/down')).toBe(5);

    // Newest first, a page at a time: the next event fails again at /down; at /flaky it succeeds at its
    // first attempt, which is counted only (no log row: what nearly every delivery is).
    const second = await publish();
    await logged(down, 'retrying', 1);
    const first = await list(down, '&limit=1');
    expect(first.deliveries.map((d) => d.event_id)).toEqual([second]);
    expect(first.next_cursor).toBe(second);
    const next = await list(down, `&limit=1&cursor=${first.next_cursor}`);
    expect(next.deliveries.map((d) => d.event_id)).toEqual([eventId]);
    for (let i = 0; i < 100 && hits.get('/flaky') !== 4; i++) await new Promise((r) => setTimeout(r, 20));
    expect(hits.get('/flaky')).toBe(4);
    expect((await list(flaky)).deliveries.map((d) => d.event_id)).toEqual([eventId]);
  });

  it("refuses another organization's subscription and workspace, and a bad query, as the other routes do", async () => {
    const theirs = await subscribe(stranger, strangerWs, '/theirs');
    expectError(await developer.call('GET', `${base()}/deliveries?subscription_id=${theirs}`), 404, 'subscription_not_found');
    expectError(await developer.call('GET', `/console/api/workspaces/${strangerWs}/deliveries?subscription_id=${theirs}`), 403, 'forbidden');
    expectError(await stranger.call('GET', `${base()}/deliveries?subscription_id=${theirs}`), 403, 'forbidden');
    expectError(await developer.call('GET', `${base()}/deliveries`), 400, 'invalid_query');
    expectError(await developer.call('GET', `${base()}/deliveries?subscription_id=__proto__`), 400, 'invalid_id', 'subscription_id');
    const own = (await viewer.call('GET', `${base()}/subscriptions`)).body.subscriptions[0].subscription_id;
    expectError(await developer.call('GET', `${base()}/deliveries?subscription_id=${own}&cursor=x`), 400, 'invalid_cursor');
    expectError(await developer.call('GET', `${base()}/deliveries?subscription_id=${own}&limit=0`), 400, 'invalid_query');
  });
});
