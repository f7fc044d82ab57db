/**
 * The browser itself enforces the Data API's CORS rules for a publishable key: headless Chromium
 * loads the same page from a listed origin (A) and an unlisted one (B, another port). The page
 * calls the Data API with `authorization: Bearer apb_...`, a non-simple request, so Chromium sends
 * a preflight first. From A the page reads the answers; from B its fetch rejects.
 *
 * Chromium comes from Debian (/usr/bin/chromium, installed by `npm test`'s pretest,
 * scripts/ensure-debian-package.sh); without it this suite fails rather than skips.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, type BrowserContext, type CDPSession, type Page } from 'playwright-core';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { adminOk } from '../helpers/cli.js';
import { pageOrigins } from '../helpers/servers.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';

const TIMEOUT = 60_000;

/** What the page saw for one call: it read the answer, or its fetch rejected. */
type Outcome = { outcome: 'read'; status: number; code: string | null } | { outcome: 'rejected'; name: string; message: string };
interface PageResults {
  get: Outcome;
  post: Outcome;
}

/** One Data API call as Chromium's network stack saw it (DevTools protocol; Playwright's own events hide preflights). */
interface WireCall {
  /** Status of the preflight (OPTIONS) Chromium sent, and the Access-Control-Allow-Origin it got back. */
  preflight?: { status: number; allowOrigin: string | null };
  /** Status of the actual request's answer, when Chromium let it through. */
  response?: number;
  /** Chromium's CORS error, when it blocked the call. */
  blocked?: string;
}

/** The page both origins serve; its script runs the two calls in order and leaves the results on window. */
function pageHtml(dataUrl: string, key: string): string {
  return `<!doctype html>
<html><head><meta charset="utf-8"><title>cors probe</title></head>
<body>
<script type="module">
  const DATA = ${JSON.stringify(dataUrl)};
  const KEY = ${JSON.stringify(key)};
  async function call(method, path, body) {
    const headers = { authorization: 'Bearer ' + KEY };
    if (body !== undefined) headers['content-type'] = 'application/json';
    try {
      const res = await fetch(DATA + path, { method, headers, body });
      let code = null;
      try { code = (await res.json()).error?.code ?? null; } catch {}
      return { outcome: 'read', status: res.status, code };
    } catch (e) {
      return { outcome: 'rejected', name: e.name, message: e.message };
    }
  }
  const get = await call('GET', '/v1/databases');
  const post = await call('POST', '/v1/end-user-tokens', JSON.stringify({ subject: 'user-1' }));
  window.results = { get, post };
</script>
</body></html>`;
}

let platform: TestPlatform | undefined;
let browser: Browser | undefined;
let pages: Awaited<ReturnType<typeof pageOrigins>> | undefined;
let originA = '';
let originB = '';

beforeAll(async () => {
  requireChromium();
  platform = await startTestPlatform();

  pages = await pageOrigins();
  ({ originA, originB } = pages);

  const app = adminOk(platform.dataDir, 'app', 'create', '--workspace', platform.credentials.workspace_id, '--name', 'web');
  const pk = adminOk(platform.dataDir, 'publishable-key', 'create', '--app', app.id, '--origins', originA);
  expect(pk.key).toMatch(/^apb_/);
  expect(pk.origins).toEqual([originA]);
  pages.setHtml(pageHtml(platform.urls.data, pk.key));

  // Playwright's default: a fresh temporary profile, removed on close.
  browser = await launchChromium();
}, TIMEOUT);

afterAll(async () => {
  await browser?.close().catch(() => {});
  await pages?.close();
  await platform?.close();
}, TIMEOUT);

interface PageRun {
  results: PageResults;
  /** Data API calls by path, as Chromium's network stack saw them. */
  wire: () => Record<string, WireCall>;
}

/** Loads the page from `origin` in a new browser context (own preflight cache) and returns what its script read. */
async function runPage(origin: string): Promise<PageRun> {
  const context: BrowserContext = await browser!.newContext();
  const page: Page = await context.newPage();
  const cdp: CDPSession = await context.newCDPSession(page);
  const dataUrl = platform!.urls.data;
  const pathOf = new Map<string, string>();
  const calls: Record<string, WireCall> = {};
  const call = (requestId: string): WireCall | undefined => {
    const path = pathOf.get(requestId);
    return path === undefined ? undefined : (calls[path] ??= {});
  };
  try {
    await cdp.send('Network.enable');
    cdp.on('Network.requestWillBeSent', (e) => {
      if (e.request.url.startsWith(dataUrl)) pathOf.set(e.requestId, new URL(e.request.url).pathname);
    });
    cdp.on('Network.responseReceived', (e) => {
      const c = call(e.requestId);
      if (!c) return;
      if (e.type === 'Preflight') {
        const headers = Object.fromEntries(Object.entries(e.response.headers).map(([k, v]) => [k.toLowerCase(), String(v)]));
        c.preflight = { status: e.response.status, allowOrigin: headers['access-control-allow-origin'] ?? null };
      } else {
        c.response = e.response.status;
      }
    });
    cdp.on('Network.loadingFailed', (e) => {
      const c = call(e.requestId);
      if (c) c.blocked = e.corsErrorStatus?.corsError ?? `not CORS: ${e.errorText}`;
    });
    await page.goto(`${origin}/`);
    await page.waitForFunction('window.results !== undefined', undefined, { timeout: 30_000 });
    const results = (await page.evaluate('window.results')) as PageResults;
    return { results, wire: () => structuredClone(calls) };
  } finally {
    await context.close();
  }
}

describe('Chromium enforces the Data API CORS rules for a publishable key', () => {
  it('from the listed origin the preflight passes and the page reads the status and error code', async () => {
    const { results, wire } = await runPage(originA);

    // No records routes yet: GET /v1/databases is a JSON error, but a readable one.
    expect(results.get).toEqual({ outcome: 'read', status: expect.any(Number), code: expect.any(String) });
    const get = results.get as Extract<Outcome, { outcome: 'read' }>;
    expect([get.status, get.code]).toEqual(get.status === 403 ? [403, 'forbidden'] : [404, 'not_found']);
    // A publishable key may not mint end-user tokens, and the page can read that it may not.
    expect(results.post).toEqual({ outcome: 'read', status: 401, code: 'invalid_credentials' });

    // Chromium preflighted both calls (the authorization header is not CORS-safelisted) and sent them after a 204.
    await expect
      .poll(wire, { timeout: 5_000 })
      .toEqual({
        '/v1/databases': { preflight: { status: 204, allowOrigin: originA }, response: get.status },
        '/v1/end-user-tokens': { preflight: { status: 204, allowOrigin: originA }, response: 401 },
      });
  }, TIMEOUT);

  it('from an unlisted origin the preflight fails and the page cannot read anything', async () => {
    const { results, wire } = await runPage(originB);

    expect(results).toEqual({
      get: { outcome: 'rejected', name: 'TypeError', message: 'Failed to fetch' },
      post: { outcome: 'rejected', name: 'TypeError', message: 'Failed to fetch' },
    });

    // The API answered the preflights 403 without Access-Control-Allow-Origin, so Chromium never sent
    // the calls themselves: the rejection is the browser's CORS check, not a network failure.
    await expect
      .poll(wire, { timeout: 5_000 })
      .toEqual({
        '/v1/databases': { preflight: { status: 403, allowOrigin: null }, blocked: 'PreflightMissingAllowOriginHeader' },
        '/v1/end-user-tokens': { preflight: { status: 403, allowOrigin: null }, blocked: 'PreflightMissingAllowOriginHeader' },
      });
  }, TIMEOUT);
});
