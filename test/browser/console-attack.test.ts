/**
 * Stored XSS through every field the console shows (issue 37, the attacker's pass;
 * docs/decisions/console-attack-pass.md): markup stored as a record's values and field names, a
 * workspace's and an application's names, a model route's model and base URL, an event's data and a
 * dead letter's last error, an invited email, the activity log's entries, then every page opened in
 * headless Chromium over the built bundle. No payload's script runs (a global it would set stays
 * unset, no dialog opens), the console's CSP reports no violation (an inline handler the page let
 * through would be one), and the payloads are on the page as text.
 */
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { Invitations } from '../../lambdas/console/invitations.js';
import { recordDeadLetter } from '../../lambdas/events/dead-letters.js';
import { deliveryLogWrite } from '../../lambdas/events/delivery-log.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { bearer, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { signedInPerson, type ConsoleBrowser } from '../helpers/console-browser.js';

const TIMEOUT = 120_000;
const ROOT = join(import.meta.dirname, '..', '..');
/** Each sets window.__xss to its number if it ever runs. */
const XSS = [
  '<img src=x onerror="window.__xss=1">',
  '<script>window.__xss=2</script>',
  '"><svg onload="window.__xss=3">',
  'javascript:window.__xss=4',
  "'\"><iframe srcdoc=\"<script>parent.__xss=5</script>\">",
  '<a href="javascript:window.__xss=6">click</a>',
];
const EMAIL_XSS = '<img/src=x/onerror=window.__xss=7>@example.com';

let p: TestPlatform;
let browser: Browser | undefined;
let owner: ConsoleBrowser;
let workspace: string;

beforeAll(async () => {
  requireChromium();
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.mjs'), '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
  useSettings({ eventsAllowLoopbackWebhooks: true });
  p = await startTestPlatform({ console: true });
  const org = p.credentials.organization_id;
  owner = (await signedInPerson(p.engine, p.consoleUrl!, org, 'owner')).browser;
  const ok = (r: { status: number; text: string }, what: string) => expect(r.status, `${what}: ${r.text}`).toBeLessThan(300);

  // A workspace and an application named with markup (the keys and applications pages show them).
  const ws = await owner.call('POST', '/console/api/workspaces', { name: XSS[0] });
  ok(ws, 'workspace');
  workspace = ws.body.id ?? ws.body.workspace?.id;
  ok(await owner.call('POST', '/console/api/applications', { workspace_id: workspace, name: XSS[2], capabilities: ['ai.chat'] }), 'application');
  ok(await owner.call('POST', '/console/api/keys', {}), 'key');
  // A record's values and a field name.
  ok(await owner.call('PUT', '/console/api/databases/xss'), 'database');
  ok(await owner.call('PUT', '/console/api/databases/xss/collections/c', { mode: 'free' }), 'collection');
  ok(await owner.call('POST', '/console/api/databases/xss/collections/c/records', { html: XSS[0], script: XSS[1], attr: XSS[2], url: XSS[3], frame: XSS[4], link: XSS[5], nested: { deep: [XSS[0]] } }), 'record');
  const named = await owner.call('POST', '/console/api/databases/xss/collections/c/records', { [XSS[2]]: 'a field named with markup' });
  expect(named.status, named.text).toBeLessThan(500);
  // A model route's model and base URL.
  ok(await owner.call('PUT', '/console/api/routes/xss-route', { endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: 'https://upstream.example/v1', model: XSS[0] }), 'route');
  // An invitation to an email with markup (the address rule takes it: no space, one @, a dot after).
  await new Invitations(p.engine.kv, () => p.engine.clock.now()).create({ organizationId: org, email: EMAIL_XSS, role: 'viewer' });
  // An event with markup in its data, dead-lettered with markup in its last error.
  const sub = await owner.call('POST', `/console/api/workspaces/${workspace}/subscriptions`, { types: ['xss.happened'], delivery: { mode: 'webhook', url: 'http://127.0.0.1:9/hook' } });
  ok(sub, 'subscription');
  const keyForWs = await new Tenants(p.engine.kv, () => p.engine.clock.now()).createSecretKey(org, (await new Tenants(p.engine.kv, () => p.engine.clock.now()).createApplication(workspace, 'publisher', ['ai.chat'])).id);
  const published = await fetch(`${p.urls.events}/v1/workspaces/${workspace}/events`, {
    method: 'POST',
    headers: { ...bearer(keyForWs.key), 'content-type': 'application/json' },
    body: JSON.stringify({ event: { type: 'xss.happened', data: { note: XSS[0], script: XSS[1], nested: { html: XSS[2] } } } }),
  });
  expect(published.status, await published.clone().text()).toBe(202);
  const eventId = ((await published.json()) as { accepted: { event_id: string }[] }).accepted[0].event_id;
  await recordDeadLetter(p.engine, workspace, eventId, sub.body.subscription_id, { attempts: 5, last_error: XSS[1] });
  // A delivery-log row with hostile text where the page shows the last error (an id no real attempt writes, so no retry overwrites it).
  await p.engine.kv.transact([deliveryLogWrite(p.engine.clock.now(), { workspaceId: workspace, subscriptionId: sub.body.subscription_id, eventId: `evt_${'z'.repeat(26)}`, status: 'dead', attempt: 5, lastError: XSS[1] })]);
  browser = await launchChromium();
}, TIMEOUT);

afterAll(async () => {
  await browser?.close().catch(() => {});
  await p?.close();
  useSettings();
}, TIMEOUT);

/** Opens `path` signed in as the owner, with a CSP violation and dialog watch installed before any script. */
async function open(path: string): Promise<{ page: Page; dialogs: string[] }> {
  const context = await browser!.newContext();
  const url = new URL(p.consoleUrl!);
  await context.addCookies([...owner.cookies].map(([name, value]) => ({ name, value, domain: url.hostname, path: '/', sameSite: 'Strict' as const, httpOnly: name === 'session' })));
  // Run through the DevTools protocol, which the page's CSP does not govern.
  await context.addInitScript({
    content: "window.__csp = []; document.addEventListener('securitypolicyviolation', (e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI + ' ' + e.sample));",
  });
  const page = await context.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  await page.goto(`${p.consoleUrl}${path}`);
  await page.waitForLoadState('networkidle');
  await page.locator('h1').first().waitFor();
  return { page, dialogs };
}

const PAGES: [string, string[]][] = [
  ['/', []],
  ['/keys', [XSS[2]]],
  ['/applications', [XSS[0], XSS[2]]],
  ['/routes', [XSS[0]]],
  ['/data?db=xss&collection=c', XSS],
  ['/events?workspace=WS&tab=dead', [XSS[0], XSS[1]]],
  ['/events?workspace=WS&tab=deliveries', [XSS[1]]],
  ['/events?workspace=WS&tab=subscriptions', [XSS[0]]],
  ['/people', [EMAIL_XSS]],
  ['/activity', []],
  ['/api-reference', []],
];

describe('stored XSS in the console', () => {
  it('no page runs a stored payload or breaks its CSP; the payloads show as text', async () => {
    const shown: string[] = [];
    for (const [template, expected] of PAGES) {
      const path = template.replace('WS', encodeURIComponent(workspace));
      const { page, dialogs } = await open(path);
      // Give a late onerror (a broken image) its turn.
      await page.waitForTimeout(300);
      const state = await page.evaluate<{ xss?: number; csp: string[]; text: string }>('({ xss: window.__xss, csp: window.__csp, text: document.body.innerText })');
      expect(state.xss, `${path} ran payload ${state.xss}`).toBeUndefined();
      expect(dialogs, path).toEqual([]);
      expect(state.csp, path).toEqual([]);
      // No element the payloads would have made, and no javascript: link.
      expect(await page.locator('main img[src="x"], main svg[onload], main iframe[srcdoc], main script, main a[href^="javascript:"]').count(), path).toBe(0);
      for (const text of expected) {
        expect(state.text, `${path} shows ${text}`).toContain(text);
        shown.push(text);
      }
      await page.context().close();
    }
    // The watch works: markup put into the page the way a careless renderer would (innerHTML) is blocked
    // by the CSP and reported, so an empty report above means nothing was blocked, not nothing watched.
    const { page } = await open('/');
    await page.evaluate(`document.querySelector('main').insertAdjacentHTML('beforeend', ${JSON.stringify(XSS[0] + XSS[2])})`);
    await page.waitForTimeout(300);
    const control = await page.evaluate<{ xss?: number; csp: string[] }>('({ xss: window.__xss, csp: window.__csp })');
    expect(control.xss).toBeUndefined();
    expect(control.csp.length).toBeGreaterThan(0);
    await page.context().close();
    expect(shown.length).toBe(PAGES.reduce((n, [, e]) => n + e.length, 0));
  }, TIMEOUT);
});
