/**
 * The Events page's live tail in headless Chromium over the built bundle (issue 37, Deliver 2): a
 * viewer starts the tail, events published with a secret key over HTTP appear at the top within a few
 * seconds, markup in their data is shown as text (no script runs, no CSP violation), pausing stops
 * the polling, the polite live region announces counts rather than each event, and the tab passes
 * axe-core with rows in it. A screenshot is kept as an artifact (and in docs/console/ with
 * CONSOLE_SCREENSHOTS_TO_DOCS=1).
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { bearer, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { signedInPerson, type ConsoleBrowser } from '../helpers/console-browser.js';

const TIMEOUT = 120_000;
const ROOT = join(import.meta.dirname, '..', '..');
const ARTIFACTS = join(ROOT, 'test', 'artifacts', 'console', 'tail');
const TO_DOCS = process.env.CONSOLE_SCREENSHOTS_TO_DOCS === '1';
const XSS = '<img src=x onerror="window.__xss=1"><script>window.__xss=2</script>';
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let p: TestPlatform;
let browser: Browser | undefined;
let viewer: ConsoleBrowser;

beforeAll(async () => {
  requireChromium();
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.mjs'), '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(ARTIFACTS, { recursive: true });
  p = await startTestPlatform({ console: true });
  viewer = (await signedInPerson(p.engine, p.consoleUrl!, p.credentials.organization_id, 'viewer')).browser;
  browser = await launchChromium();
}, TIMEOUT);
afterAll(async () => {
  await browser?.close().catch(() => {});
  await p?.close();
}, TIMEOUT);

/** Publishes with the bootstrap's secret key over HTTP, as an application would. */
async function publish(events: Array<{ type: string; data: unknown }>): Promise<string[]> {
  const res = await fetch(`${p.urls.events}/v1/workspaces/${p.credentials.workspace_id}/events`, {
    method: 'POST',
    headers: { ...bearer(p.credentials.secret_key), 'content-type': 'application/json' },
    body: JSON.stringify({ events }),
  });
  expect(res.status, await res.clone().text()).toBe(202);
  return ((await res.json()) as { accepted: { event_id: string }[] }).accepted.map((a) => a.event_id);
}

async function openTail(): Promise<{ page: Page; failures: string[]; tailCalls: () => number }> {
  const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
  const url = new URL(p.consoleUrl!);
  await context.addCookies([...viewer.cookies].map(([name, value]) => ({ name, value, domain: url.hostname, path: '/', sameSite: 'Strict' as const, httpOnly: name === 'session' })));
  // Through the DevTools protocol, which the page's CSP does not govern.
  await context.addInitScript({ content: "window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));" });
  const page = await context.newPage();
  const failures: string[] = [];
  let calls = 0;
  page.on('dialog', (d) => {
    failures.push(`dialog: ${d.message()}`);
    void d.dismiss();
  });
  page.on('response', (r) => {
    if (r.url().includes('/events/tail')) calls++;
    if (r.url().includes('/console/api/') && r.status() >= 400) failures.push(`${r.request().method()} ${r.url()} answered ${r.status()}`);
  });
  await page.goto(`${p.consoleUrl}/events?workspace=${encodeURIComponent(p.credentials.workspace_id)}&tab=tail`);
  await page.getByRole('heading', { level: 2, name: 'Live tail' }).waitFor();
  return { page, failures, tailCalls: () => calls };
}

it(
  'a viewer starts the tail, sees events published over HTTP appear newest first within seconds, their markup as text; pause stops polling',
  async () => {
    const { page, failures, tailCalls } = await openTail();
    const before = await publish([{ type: 'tail.before', data: { n: 0 } }]);
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    // Started with the recent events (the one published before, once settled).
    const rows = page.locator('table tbody tr');
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(1);
    expect(await rows.first().locator('td').first().textContent()).toBe(before[0]);

    const sent = Date.now();
    const ids = await publish([
      { type: 'tail.markup', data: { html: XSS } },
      { type: 'tail.after', data: { n: 2 } },
    ]);
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(3);
    const within = Date.now() - sent;
    expect(within).toBeLessThan(10_000);
    // Newest at the top: the last published first, the first one at the bottom.
    expect(await rows.locator('td:first-child').allTextContents()).toEqual([ids[1], ids[0], before[0]]);
    const markupRow = rows.nth(1);
    expect(await markupRow.locator('td').nth(1).textContent()).toBe('tail.markup');
    expect(await markupRow.locator('td').nth(3).textContent()).toBe(JSON.stringify({ html: XSS }));
    expect(await page.locator('table img, table script').count()).toBe(0);
    expect(await page.evaluate('window.__xss')).toBeUndefined();
    expect(await page.evaluate('window.__csp')).toEqual([]);

    // The live region is polite and says counts (set at most every 10 s), never an event's contents.
    const region = page.locator('[aria-live="polite"]');
    expect(await region.count()).toBe(1);
    expect(await region.textContent()).toMatch(/^(Live tail started\.|\d+ new events?\.)$/);

    const axe = await axeViolations(page);
    expect(axe).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'events-tail.png'), fullPage: true });
    if (TO_DOCS) await page.screenshot({ path: join(ROOT, 'docs', 'console', 'events-tail.png') });

    // Paused: no more reads, and what was published meanwhile waits for Resume.
    await page.getByRole('button', { name: 'Pause', exact: true }).click();
    expect(await region.textContent()).toMatch(/^Live tail paused\./);
    const paused = tailCalls();
    const later = await publish([{ type: 'tail.later', data: 'x' }]);
    await new Promise((r) => setTimeout(r, 4500));
    expect(tailCalls()).toBe(paused);
    expect(await rows.count()).toBe(3);
    await page.getByRole('button', { name: 'Resume', exact: true }).click();
    await expect.poll(() => rows.count(), { timeout: 10_000 }).toBe(4);
    expect(await rows.first().locator('td').first().textContent()).toBe(later[0]);
    expect(failures).toEqual([]);
    await page.context().close();
  },
  TIMEOUT,
);

it(
  'a hidden tab stops polling and a visible one starts again',
  async () => {
    const { page, tailCalls } = await openTail();
    await page.getByRole('button', { name: 'Start', exact: true }).click();
    await expect.poll(() => tailCalls(), { timeout: 10_000 }).toBeGreaterThan(0);
    // Chromium headless keeps the page visible: the state the page reads is overridden, then the event sent.
    const setVisibility = (state: 'hidden' | 'visible') =>
      page.evaluate(`Object.defineProperty(document, 'visibilityState', { configurable: true, get: () => '${state}' }); document.dispatchEvent(new Event('visibilitychange'))`);
    await setVisibility('hidden');
    await page.getByText('Waiting: the tab is hidden.').waitFor();
    const hidden = tailCalls();
    await new Promise((r) => setTimeout(r, 4500));
    expect(tailCalls()).toBe(hidden);
    await setVisibility('visible');
    await expect.poll(() => tailCalls(), { timeout: 10_000 }).toBeGreaterThan(hidden);
    await page.context().close();
  },
  TIMEOUT,
);

/** axe-core's serious and critical violations (evaluated through DevTools, outside the page's CSP). */
async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  return page.evaluate(`axe.run(document).then((r) => r.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => v.impact + ' ' + v.id + ': ' + v.help + ' [' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ') + ']'))`);
}
