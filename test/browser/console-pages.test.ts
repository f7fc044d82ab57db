/**
 * The console's pages against the real console API in headless Chromium (issue 37, Acceptance), the
 * built bundle (console/dist/) served by the local platform's console port:
 * - a database, a collection (a bad schema refused inline at its field) and a record made from the
 *   Data page, then found in the records page by filter, sort and paging;
 * - a subscription whose webhook URL the checks refuse shows the code at the URL field;
 * - a dead letter replayed from the Events page reaches the receiver again;
 * - a model route edited in the page keeps what the form does not show (prices, the operator's key);
 * - a cross-site form post (a page on another origin posting a plain HTML form to the console API)
 *   is `403 csrf_failed` and changes nothing;
 * - every page and every tab of it (with data in it) passes axe-core with no serious or critical
 *   violation and breaks no CSP rule; a screenshot of each goes to test/artifacts/console/pages/
 *   (gitignored) and, with CONSOLE_SCREENSHOTS_TO_DOCS=1, the window's part of it to docs/console/ (the ones
 *   docs/console.md shows).
 *
 * Chromium comes from Debian (/usr/bin/chromium, installed by `npm test`'s pretest); without it this
 * suite fails rather than skips.
 */
import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { bearer } from '../helpers/platform.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { axeViolations, ConsoleBrowser, heading, invitationToken, signedInPerson } from '../helpers/console-browser.js';
import { listen, webhookReceiver } from '../helpers/servers.js';
import { waitFor } from '../helpers/wait.js';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { bootstrap, type DevCredentials } from '../../lambdas/local/bootstrap.js';
import { startPlatform, type RunningPlatform } from '../../lambdas/local/platform.js';
import { recordDeadLetter } from '../../lambdas/events/dead-letters.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { useSettings } from '../../lambdas/shared/settings.js';

const TIMEOUT = 180_000;
const ROOT = join(import.meta.dirname, '..', '..');
const ARTIFACTS = join(ROOT, 'test', 'artifacts', 'console', 'pages');
const DOCS_SHOTS = join(ROOT, 'docs', 'console');
const TO_DOCS = process.env.CONSOLE_SCREENSHOTS_TO_DOCS === '1';

let running: RunningPlatform | undefined;
let engine: EmbeddedEngine | undefined;
let credentials: DevCredentials;
let dataDir = '';
let consoleUrl = '';
let browser: Browser | undefined;
let owner: BrowserContext | undefined;
/** The owner's session over plain HTTP (the same cookies as the browser context), for seeding. */
let api: ConsoleBrowser;
let receiver: http.Server;
let hookBase = '';
let received: Array<{ path: string; body: string }> = [];
/** A page on another origin (another port of 127.0.0.1: same site, so SameSite=Strict cookies go with its form). */
let attacker: http.Server;
let attackerUrl = '';

async function seed(method: string, path: string, body?: unknown) {
  const res = await api.call(method, `/console/api${path}`, body);
  expect(res.status, `${method} ${path}: ${res.text}`).toBeLessThan(300);
  return res.body;
}

async function shot(page: Page, name: string): Promise<void> {
  await page.waitForLoadState('networkidle');
  const file = join(ARTIFACTS, `${name}.png`);
  await page.screenshot({ path: file, fullPage: true });
  // The docs keep what a 1280×800 window shows (a long page's whole length would weigh the repository).
  if (TO_DOCS) await page.screenshot({ path: join(DOCS_SHOTS, `${name}.png`) });
}

beforeAll(async () => {
  requireChromium();
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.mjs'), '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(ARTIFACTS, { recursive: true });
  if (TO_DOCS) mkdirSync(DOCS_SHOTS, { recursive: true });
  // The replayed delivery goes to a receiver on this machine.
  useSettings({ eventsAllowLoopbackWebhooks: true });
  ({ server: receiver, url: hookBase, received } = await webhookReceiver());

  dataDir = mkdtempSync(join(tmpdir(), 'console-pages-'));
  engine = createEmbeddedEngine({ dataDir });
  ({ credentials } = await bootstrap(engine, dataDir));
  running = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 }, consolePort: 0 });
  registerApiOrigins(running.urls);
  consoleUrl = running.consoleUrl!;

  // The attacker's page: a plain HTML form, auto-submitted, to the console API (no script of the console's).
  attacker = http.createServer((req, res) => {
    const target = new URL(req.url!, 'http://x').searchParams.get('target') ?? '/console/api/keys';
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end(`<!doctype html><title>Win a prize</title><form id="f" method="POST" action="${consoleUrl}${target}">
      <input name="email" value="owner@example.com"><input name="password" value="guessed password 123">
      <input name="x-csrf-token" value="guess"></form><script>document.getElementById('f').submit()</script>`);
  });
  attackerUrl = await listen(attacker);

  // The owner, signed in through the accept route (the invitation page itself is console.test.ts's).
  const person = await signedInPerson(engine, consoleUrl, credentials.organization_id, 'owner');
  api = person.browser;
  browser = await launchChromium();
  owner = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  await owner.addCookies([...api.cookies].map(([name, value]) => ({ name, value, url: consoleUrl, sameSite: 'Strict' as const, httpOnly: name === 'session' })));
}, TIMEOUT);

afterAll(async () => {
  await browser?.close().catch(() => {});
  await running?.close();
  await new Promise((r) => receiver?.close(r));
  await new Promise((r) => attacker?.close(r));
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  useSettings();
}, TIMEOUT);

describe('the console pages against the console API', () => {
  it('creates a database, a collection (a bad schema refused at its field) and a record, and finds it by filter, sort and paging', async () => {
    const page = await owner!.newPage();
    await page.goto(`${consoleUrl}/data`);
    await heading(page, 'Data').waitFor();
    await page.getByLabel('New database').fill('shop');
    await page.getByRole('button', { name: 'Create database' }).click();
    await page.getByRole('link', { name: 'shop', exact: true }).click();
    await page.getByRole('heading', { name: 'Collections of shop' }).waitFor();

    await page.getByRole('button', { name: 'New collection' }).click();
    const form = page.getByRole('form', { name: 'New collection' });
    await form.getByLabel('Collection name').fill('products');
    // A field type the Data API does not know: its refusal under the Fields box, nothing saved.
    await form.getByLabel('Fields (JSON)').fill(JSON.stringify([{ name: 'title', type: 'colour' }]));
    await form.getByRole('button', { name: 'Save collection' }).click();
    const fields = form.getByLabel('Fields (JSON)');
    await expect.poll(() => fields.getAttribute('aria-invalid')).toBe('true');
    const refusal = await form.locator(`#${(await fields.getAttribute('aria-describedby'))!.split(' ').pop()}`).textContent();
    expect(refusal).toMatch(/invalid_schema|invalid_body|invalid_field/);
    await form.getByLabel('Fields (JSON)').fill(JSON.stringify([{ name: 'title', type: 'text', indexed: true }, { name: 'price', type: 'integer', indexed: true }]));
    await form.getByRole('button', { name: 'Save collection' }).click();
    await page.getByRole('link', { name: 'products', exact: true }).click();
    await page.getByRole('heading', { name: 'Records of products' }).first().waitFor();

    // The record made in the page; eleven more beside it from the same session, so there are pages.
    await page.getByLabel('Record (JSON)').fill(JSON.stringify({ title: 'needle', price: 42 }));
    await page.getByRole('button', { name: 'Create record' }).click();
    await page.getByText(/^Created record rec_/).waitFor();
    for (let i = 1; i <= 11; i++) await seed('POST', '/databases/shop/collections/products/records', { title: `hay ${i}`, price: i });
    await page.reload();
    await page.getByRole('cell', { name: 'needle' }).waitFor();

    // Filter: title equals needle, one row.
    await page.getByLabel('Filter field').fill('title');
    await page.getByLabel('Value').fill('needle');
    await page.getByRole('button', { name: 'Apply' }).click();
    const rows = page.getByRole('table', { name: 'Records of products' }).locator('tbody tr');
    await expect.poll(() => rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain('needle');
    expect(new URL(page.url()).searchParams.get('value')).toBe('needle');

    // Sort by price, descending, ten a page: the needle (42) first, then 11, 10, …; page 2 holds the last two.
    await page.getByLabel('Filter field').fill('');
    await page.getByLabel('Value').fill('');
    await page.getByLabel('Sort by').selectOption('price');
    await page.getByLabel('Descending').check();
    await page.getByLabel('Per page').selectOption('10');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => rows.count()).toBe(10);
    await expect.poll(async () => (await rows.first().textContent()) ?? '').toContain('needle');
    expect(await rows.nth(1).textContent()).toContain('hay 11');
    await page.getByRole('button', { name: 'Next page' }).click();
    await page.getByText('Page 2').waitFor();
    await expect.poll(() => rows.count()).toBe(2);
    expect(await rows.allTextContents()).toEqual([expect.stringContaining('hay 2'), expect.stringContaining('hay 1')]);
    await page.getByRole('button', { name: 'Previous page' }).click();
    await expect.poll(async () => (await rows.first().textContent()) ?? '').toContain('needle');
    await page.close();
  }, TIMEOUT);

  it("shows the webhook URL checks' refusal at the URL field of a new subscription", async () => {
    const page = await owner!.newPage();
    await page.goto(`${consoleUrl}/events`);
    await heading(page, 'Events').waitFor();
    const form = page.getByRole('form', { name: 'New subscription' });
    await form.getByLabel('Event types').fill('order.*');
    await form.getByLabel('Webhook URL').fill('https://10.0.0.1/hook');
    await form.getByRole('button', { name: 'Create subscription' }).click();
    const url = form.getByLabel('Webhook URL');
    await expect.poll(() => url.getAttribute('aria-invalid')).toBe('true');
    const errorId = (await url.getAttribute('aria-describedby'))!.split(' ').pop()!;
    expect(await page.locator(`#${errorId}`).textContent()).toContain('url_destination_blocked');
    await shot(page, 'events-url-refused');
    expect((await seed('GET', `/workspaces/${credentials.workspace_id}/subscriptions`)).subscriptions).toEqual([]);
    await page.close();
  }, TIMEOUT);

  it('replays a dead letter from the Events page: the receiver gets the event again', async () => {
    const ws = credentials.workspace_id;
    const sub = await seed('POST', `/workspaces/${ws}/subscriptions`, { types: ['order.*'], delivery: { mode: 'webhook', url: `${hookBase}/hook` } });
    const published = await fetch(`${running!.urls.events}/v1/workspaces/${ws}/events`, {
      method: 'POST',
      headers: { ...bearer(credentials.secret_key), 'content-type': 'application/json' },
      body: JSON.stringify({ event: { type: 'order.paid', data: { order: 'A-17', note: '<img src=x onerror=alert(1)>' } } }),
    });
    expect(published.status).toBe(202);
    const eventId = ((await published.json()) as { accepted: { event_id: string }[] }).accepted[0].event_id;
    await waitFor('the first delivery', () => received.some((r) => r.body.includes(eventId)), 10_000);
    // Its attempts all failed, as the delivery consumer records a death (lambdas/events/delivery.ts).
    await recordDeadLetter(engine!, ws, eventId, sub.subscription_id, { attempts: 5, last_error: 'webhook_status_503' });

    const page = await owner!.newPage();
    await page.goto(`${consoleUrl}/events?workspace=${ws}&tab=dead`);
    const row = page.getByRole('row').filter({ hasText: eventId });
    await row.waitFor();
    expect(await row.textContent()).toContain('webhook_status_503');
    await shot(page, 'events-dead');
    await row.getByRole('button', { name: 'Replay' }).click();
    await page.getByText(`Replayed ${eventId}.`).waitFor();
    await waitFor('the replayed delivery', () => received.filter((r) => r.body.includes(eventId)).length === 2, 10_000);
    // The Replays column counts it.
    await expect.poll(async () => (await page.getByRole('row').filter({ hasText: eventId }).getByRole('cell').nth(5).textContent()) ?? '').toBe('1');
    await page.close();
  }, TIMEOUT);

  it('answers a cross-site form post 403 csrf_failed and changes nothing (the signed-in cookie goes with it: same site, another origin)', async () => {
    const before = (await seed('GET', '/keys')).data.length;
    const page = await owner!.newPage();
    for (const target of ['/console/api/keys', '/console/api/session', `/console/api/workspaces/${credentials.workspace_id}/subscriptions`]) {
      const answer = page.waitForResponse((r) => r.url() === `${consoleUrl}${target}` && r.request().method() === 'POST');
      await page.goto(`${attackerUrl}/?target=${encodeURIComponent(target)}`);
      const res = await answer;
      expect(res.request().headers()['content-type']).toBe('application/x-www-form-urlencoded');
      expect(res.request().headers().origin).toBe(attackerUrl);
      expect(res.status(), target).toBe(403);
      expect(((await res.json()) as { error: { code: string } }).error.code, target).toBe('csrf_failed');
    }
    await page.close();
    expect((await seed('GET', '/keys')).data.length).toBe(before);
    // The session the form rode on still works for the console itself.
    expect((await api.call('GET', '/console/api/me')).status).toBe(200);
  }, TIMEOUT);

  it("edits a model route in the page without losing what the form does not show (its prices, the operator's upstream key)", async () => {
    // As the operator's `route set --api-key-env … --price-in-per-mtok …` makes it.
    await new ModelRoutes(engine!.kv, () => engine!.clock.now()).set(credentials.organization_id, {
      id: 'priced',
      endpoint: '/v1/chat/completions',
      provider: 'openai-compatible',
      base_url: 'https://api.openai.com/v1',
      upstream_model: 'gpt-4o',
      api_key_env: 'OPENAI_API_KEY',
      price_in_per_mtok: 2.5,
      price_out_per_mtok: 10,
      max_tokens: 2048,
    });
    const page = await owner!.newPage();
    await page.goto(`${consoleUrl}/routes`);
    await page.getByRole('row').filter({ hasText: 'priced' }).getByRole('button', { name: 'Edit' }).click();
    const form = page.getByRole('form', { name: 'Edit route priced' });
    await form.getByLabel('Upstream model').fill('gpt-4o-2024-11-20');
    await form.getByRole('button', { name: 'Save route' }).click();
    await page.getByRole('cell', { name: 'gpt-4o-2024-11-20' }).waitFor();
    const route = (await seed('GET', '/routes')).data.find((r: { id: string }) => r.id === 'priced');
    expect(route).toMatchObject({ upstream_model: 'gpt-4o-2024-11-20', api_key_env: 'OPENAI_API_KEY', price_in_per_mtok: 2.5, price_out_per_mtok: 10, max_tokens: 2048 });
    await page.close();
  }, TIMEOUT);

  it('every page and tab passes axe-core (no serious or critical violation) and breaks no CSP rule; a screenshot of each', async () => {
    // Things on every page, so the checks and the screenshots see tables, not only empty states.
    const ws = credentials.workspace_id;
    const app = await seed('POST', '/applications', { workspace_id: ws, name: 'storefront', capabilities: ['ai.chat', 'ai.embeddings'] });
    await seed('POST', '/oauth-clients', { application_id: app.id });
    await seed('POST', '/publishable-keys', { application_id: app.id, origins: ['https://shop.example.com'] });
    await seed('PUT', '/routes/chat', { endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: 'https://api.openai.com/v1', model: 'gpt-4o-mini', default: true });
    await seed('PUT', '/routes/embed', { endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: 'https://api.openai.com/v1', model: 'text-embedding-3-small' });
    await seed('PUT', '/rerank-profiles/default', { provider: 'openai-compatible', base_url: 'https://rerank.example.com/v1', model: 'rerank-1' });
    await seed('POST', '/keys', { application_id: app.id });
    await seed('POST', '/invitations', { email: 'dev@example.com', role: 'developer', expires_in_hours: 168 });

    /** [path, h1, screenshot name, a text that shows the page's data arrived]. */
    const PAGES: Array<[string, string, string, string | RegExp]> = [
      ['/', 'Overview', 'overview', 'Feature switches'],
      ['/keys', 'Keys', 'keys', /…[0-9a-f]{4}/],
      ['/applications', 'Applications', 'applications', 'storefront'],
      ['/applications?tab=oauth-clients', 'Applications', 'applications-oauth-clients', /cli_/],
      ['/applications?tab=publishable-keys', 'Applications', 'applications-publishable-keys', /pbk_/],
      ['/routes', 'Model routes', 'routes', 'gpt-4o-mini'],
      ['/routes?tab=rerank-profiles', 'Model routes', 'routes-rerank-profiles', 'rerank-1'],
      ['/routes?tab=vector-databases', 'Model routes', 'routes-vector-databases', 'no vector database'],
      ['/routes?tab=collections', 'Model routes', 'routes-collections', 'No knowledge collections yet.'],
      ['/routes?tab=knowledge-jobs', 'Model routes', 'routes-knowledge-jobs', 'Nothing here yet.'],
      ['/data', 'Data', 'data', 'shop'],
      ['/data?db=shop', 'Data', 'data-collections', 'Files of shop'],
      ['/data?db=shop&collection=products', 'Data', 'data-records', 'needle'],
      ['/events', 'Events', 'events', 'order.*'],
      [`/events?workspace=${ws}&tab=deliveries`, 'Events', 'events-deliveries', 'completed'],
      [`/events?workspace=${ws}&tab=dead`, 'Events', 'events-dead', 'webhook_status_503'],
      [`/events?workspace=${ws}&tab=stats`, 'Events', 'events-stats', 'published'],
      ['/activity', 'Activity', 'activity', 'console'],
      ['/people', 'People', 'people', 'dev@example.com'],
      ['/api-reference', 'API reference', 'api-reference', 'operations'],
      ['/api-reference?api=data', 'API reference', 'api-reference-data', 'operations'],
      ['/api-reference?api=events', 'API reference', 'api-reference-events', 'operations'],
      ['/security', 'Security', 'security', 'No passkeys yet'],
    ];
    const failures: string[] = [];
    const watch = (page: Page) => {
      page.on('console', (m) => {
        if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) failures.push(`${page.url()}: ${m.text()}`);
      });
      // A page calling a path the console API does not have, or with a shape it refuses, is a mismatch.
      page.on('response', (r) => {
        if (r.url().includes('/console/api/') && r.status() >= 400) failures.push(`${page.url()}: ${r.request().method()} ${r.url()} answered ${r.status()}`);
      });
    };
    const check = async (page: Page, name: string) => {
      await page.waitForLoadState('networkidle');
      for (const v of await axeViolations(page)) failures.push(`${name}: ${v}`);
      const alerts = (await page.getByRole('alert').allTextContents()).filter((t) => t.trim());
      if (alerts.length) failures.push(`${name}: error shown: ${alerts.join(' / ')}`);
      await shot(page, name);
    };

    const page = await owner!.newPage();
    watch(page);
    for (const [path, title, name, ready] of PAGES) {
      await page.goto(`${consoleUrl}${path}`);
      await heading(page, title).waitFor();
      await page.getByText(ready).first().waitFor({ timeout: 15_000 }).catch(() => failures.push(`${name}: never showed ${String(ready)}`));
      await check(page, name);
    }
    // A key's settings, read from GET /keys/{id}/ai when opened (the list carries neither limits nor routes).
    await page.goto(`${consoleUrl}/keys`);
    await page.getByText('Settings').first().click();
    await page.getByLabel('Model routes it may call').first().waitFor();
    await page.getByText(/spent_usd/).first().waitFor();
    await check(page, 'keys-settings');
    await page.close();

    const anonymous = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const p = await anonymous.newPage();
      watch(p);
      const token = await invitationToken(engine!, credentials.organization_id, 'someone@example.com', 'developer');
      await p.goto(`${consoleUrl}/invite#${token}`);
      await heading(p, 'Join Development').waitFor();
      await check(p, 'invite');
      await p.goto(`${consoleUrl}/sign-in`);
      await heading(p, 'Sign in').waitFor();
      await check(p, 'sign-in');
    } finally {
      await anonymous.close();
    }
    expect(failures).toEqual([]);
  }, TIMEOUT);
});
