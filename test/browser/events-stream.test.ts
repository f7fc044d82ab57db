/**
 * A browser opens the Events stream with a publishable key (docs/events/stream.md): headless Chromium
 * loads a page from a listed origin (A) and an unlisted one (B, another port); the page runs
 * `new WebSocket(url, ['service.v1', 'bearer.' + key])`. From A it opens, receives an event the test
 * publishes, and acks it; from B the server refuses the handshake (403 origin_not_allowed) and the
 * page sees the socket fail without ever opening.
 *
 * Chromium comes from Debian (/usr/bin/chromium, installed by `npm test`'s pretest,
 * scripts/ensure-debian-package.sh); without it this suite fails rather than skips.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, type Page } from 'playwright-core';
import WebSocket from 'ws';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi } from '../helpers/data-api.js';
import { adminOk } from '../helpers/cli.js';
import { inboxKey } from '../../lambdas/events/keys.js';
import { pageOrigins } from '../helpers/servers.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';

const TIMEOUT = 60_000;

/** The page: opens the stream, keeps every frame and the close on window.stream, acks each frame. */
function pageHtml(streamUrl: string, key: string): string {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>stream probe</title></head>
<body>
<script type="module">
  const state = { opened: false, protocol: null, frames: [], closed: null, errored: false };
  window.stream = state;
  const ws = new WebSocket(${JSON.stringify(streamUrl)}, ['service.v1', 'bearer.' + ${JSON.stringify(key)}]);
  ws.onopen = () => { state.opened = true; state.protocol = ws.protocol; };
  ws.onmessage = (e) => {
    const frame = JSON.parse(e.data);
    state.frames.push(frame);
    ws.send(JSON.stringify({ ack: [frame.event_id] }));
  };
  ws.onerror = () => { state.errored = true; };
  ws.onclose = (e) => { state.closed = { code: e.code }; };
</script>
</body></html>`;
}

let platform: TestPlatform | undefined;
let browser: Browser | undefined;
let pages: Awaited<ReturnType<typeof pageOrigins>> | undefined;
let originA = '';
let originB = '';
let publishableKey = '';
let streamUrl = '';
let subscriptionId = '';

const events = (method: string, path: string, body?: unknown) =>
  callApi(platform!.urls.events, bearer(platform!.credentials.secret_key), method, `/v1/workspaces/${platform!.credentials.workspace_id}${path}`, body);

beforeAll(async () => {
  requireChromium();
  platform = await startTestPlatform();
  pages = await pageOrigins();
  ({ originA, originB } = pages);

  // The application's own workspace: a publishable key reaches only that one.
  const app = adminOk(platform.dataDir, 'app', 'create', '--workspace', platform.credentials.workspace_id, '--name', 'web');
  publishableKey = adminOk(platform.dataDir, 'publishable-key', 'create', '--app', app.id, '--origins', originA).key;
  const sub = await events('POST', '/subscriptions', { types: ['browser.*'], delivery: { mode: 'websocket' } });
  expect(sub.status).toBe(201);
  subscriptionId = sub.body.subscription_id;
  streamUrl = `${platform.urls.events.replace(/^http/, 'ws')}/v1/workspaces/${platform.credentials.workspace_id}/subscriptions/${subscriptionId}/stream`;
  pages.setHtml(pageHtml(streamUrl, publishableKey));

  browser = await launchChromium();
}, TIMEOUT);

afterAll(async () => {
  await browser?.close().catch(() => {});
  await pages?.close();
  await platform?.close();
}, TIMEOUT);

const state = (page: Page) => page.evaluate('window.stream') as Promise<{ opened: boolean; protocol: string | null; frames: any[]; closed: { code: number } | null; errored: boolean }>;

describe('Chromium opens the Events stream with a publishable key', () => {
  it('from the listed origin: opens with service.v1, receives a published event, and its ack removes it', async () => {
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${originA}/`);
      await page.waitForFunction('window.stream && (window.stream.opened || window.stream.closed)', undefined, { timeout: 15_000 });
      expect((await state(page)).opened).toBe(true);
      expect((await state(page)).protocol).toBe('service.v1');

      const published = await events('POST', '/events', { event: { type: 'browser.hello', data: { from: 'test' } } });
      expect(published.status).toBe(202);
      const eventId = published.body.accepted[0].event_id;
      await page.waitForFunction('window.stream.frames.length >= 1', undefined, { timeout: 10_000 });
      const { frames, closed } = await state(page);
      expect(frames).toEqual([expect.objectContaining({ event_id: eventId, type: 'browser.hello', data: { from: 'test' }, delivery_count: 1 })]);
      expect(closed).toBeNull();

      // The page acked it: the message leaves the inbox (leased but unacked, it would stay there).
      await expect.poll(() => platform!.engine.kv.get(inboxKey(subscriptionId, eventId)), { timeout: 5_000 }).toBeUndefined();
      await page.close();
    } finally {
      await context.close();
    }
  }, TIMEOUT);

  it('from an unlisted origin: the handshake is refused (403 origin_not_allowed) and the socket never opens', async () => {
    const context = await browser!.newContext();
    try {
      const page = await context.newPage();
      await page.goto(`${originB}/`);
      await page.waitForFunction('window.stream && window.stream.closed', undefined, { timeout: 15_000 });
      const s = await state(page);
      expect(s).toMatchObject({ opened: false, errored: true, frames: [], closed: { code: 1006 } });
    } finally {
      await context.close();
    }

    // What Chromium was told, seen from a plain client sending the same handshake.
    const answer = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const ws = new WebSocket(streamUrl, ['service.v1', `bearer.${publishableKey}`], { origin: originB });
      ws.once('open', () => reject(new Error('opened from an unlisted origin')));
      ws.once('unexpected-response', (_req, res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      });
      ws.once('error', reject);
    });
    expect({ status: answer.status, code: answer.body.error.code }).toEqual({ status: 403, code: 'origin_not_allowed' });
  }, TIMEOUT);

  it('a publishable key may open a stream only: any other Events route is 403 publishable_key_not_allowed', async () => {
    const res = await callApi(platform!.urls.events, { ...bearer(publishableKey), origin: originA }, 'GET', `/v1/workspaces/${platform!.credentials.workspace_id}/subscriptions`);
    expect({ status: res.status, code: res.body?.error?.code }).toEqual({ status: 403, code: 'publishable_key_not_allowed' });
  });
});
