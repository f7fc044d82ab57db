/**
 * The console in headless Chromium, driving the built bundle (console/dist/, rebuilt here when its
 * sources changed) served by the local platform's console port: a person accepts an invitation, sets
 * a password (a breached one refused inline) and is signed in; signs out and in again; creates a
 * secret key, sees it once, calls the Data API with it over real HTTP, disables it and sees
 * `403 key_disabled`; a viewer is offered no "Create key" and the API refuses them
 * `403 role_forbidden`. Every page passes axe-core (no serious or critical violation) and breaks no
 * rule of the console's CSP; a screenshot of each goes to test/artifacts/console/ (gitignored).
 *
 * Chromium comes from Debian (/usr/bin/chromium, installed by `npm test`'s pretest); without it this
 * suite fails rather than skips.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { bearer } from '../helpers/platform.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { axeViolations, heading, invitationToken } from '../helpers/console-browser.js';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { bootstrap, type DevCredentials } from '../../lambdas/local/bootstrap.js';
import { startPlatform, type RunningPlatform } from '../../lambdas/local/platform.js';
import { useSettings } from '../../lambdas/shared/settings.js';

const TIMEOUT = 120_000;
const ROOT = join(import.meta.dirname, '..', '..');
const ARTIFACTS = join(ROOT, 'test', 'artifacts', 'console');
const OWNER = { email: 'owner@example.com', password: 'correct horse battery staple 37' };
const VIEWER = { email: 'viewer@example.com', password: 'a viewer only reads, 2024!' };
/** Every page of the shell, by path (console/src/main.tsx's PAGES), and its heading. */
const PAGES = [
  ['/', 'Overview'],
  ['/keys', 'Keys'],
  ['/applications', 'Applications'],
  ['/routes', 'Model routes'],
  ['/data', 'Data'],
  ['/events', 'Events'],
  ['/activity', 'Activity'],
  ['/people', 'People'],
  ['/api-reference', 'API reference'],
] as const;

/** The local platform as `npm start` runs it, with the console's port (its pages from console/dist/ and its API). */
interface ConsolePlatform {
  urls: RunningPlatform['urls'];
  credentials: DevCredentials;
  engine: EmbeddedEngine;
  close(): Promise<void>;
}

async function startConsolePlatform(): Promise<ConsolePlatform & { consoleUrl: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'console-'));
  const engine = createEmbeddedEngine({ dataDir });
  const { credentials } = await bootstrap(engine, dataDir);
  const running = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 }, consolePort: 0 });
  registerApiOrigins(running.urls);
  return {
    urls: running.urls,
    consoleUrl: running.consoleUrl!,
    credentials,
    engine,
    close: async () => {
      await running.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

let platform: ConsolePlatform | undefined;
let browser: Browser | undefined;
let consoleUrl = '';
let owner: BrowserContext | undefined;

/** An invitation of the bootstrap organization, its token. */
const invite = (email: string, role: 'owner' | 'admin' | 'developer' | 'viewer') => invitationToken(platform!.engine, platform!.credentials.organization_id, email, role);

async function shot(page: Page, name: string): Promise<void> {
  await page.waitForLoadState('networkidle');
  await page.screenshot({ path: join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Accepts the invitation `token` in `context` with `password`: the page then shows the overview. */
async function accept(context: BrowserContext, token: string, email: string, password: string): Promise<Page> {
  const page = await context.newPage();
  await page.goto(`${consoleUrl}/invite#${token}`);
  await heading(page, 'Join Development').waitFor();
  expect(await page.getByLabel('Email').inputValue()).toBe(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByLabel('Repeat the password').fill(password);
  await page.getByRole('button', { name: 'Set password and sign in' }).click();
  await heading(page, 'Overview').waitFor();
  return page;
}

/** A console API call from the page itself (its cookies, its CSRF token): status and error code. */
async function callFromPage(page: Page, method: string, path: string, body?: unknown): Promise<{ status: number; code: string | null }> {
  return page.evaluate(`(async () => {
    const csrf = (document.cookie.split('; ').find((c) => c.startsWith('csrf=')) || '').slice(5);
    const res = await fetch(${JSON.stringify(`/console/api${path}`)}, {
      method: ${JSON.stringify(method)},
      credentials: 'same-origin',
      headers: { 'content-type': 'application/json', 'x-csrf-token': decodeURIComponent(csrf) },
      body: ${JSON.stringify(body === undefined ? null : JSON.stringify(body))},
    });
    let code = null;
    try { code = (await res.json()).error?.code ?? null; } catch {}
    return { status: res.status, code };
  })()`);
}

beforeAll(async () => {
  requireChromium();
  // The bundle the tests drive: built now when console/'s sources changed since the last build.
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.mjs'), '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(ARTIFACTS, { recursive: true });
  // A disabled key is refused at its next call, not after the credential cache's 30 s.
  useSettings({ credentialCacheMs: 0 });
  const started = await startConsolePlatform();
  platform = started;
  consoleUrl = started.consoleUrl;
  expect(consoleUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
  browser = await launchChromium();
  owner = await browser.newContext({ viewport: { width: 1280, height: 800 } });
}, TIMEOUT);

afterAll(async () => {
  await browser?.close().catch(() => {});
  await platform?.close();
  useSettings();
}, TIMEOUT);

describe('the console in a browser', () => {
  it('accepts an invitation: a breached password is refused inline, a good one signs the person in; sign-out and sign-in work', async () => {
    const token = await invite(OWNER.email, 'owner');
    const page = await owner!.newPage();
    await page.goto(`${consoleUrl}/invite#${token}`);
    await heading(page, 'Join Development').waitFor();
    expect(await page.getByText('You are invited as').textContent()).toContain('owner');

    // A password from the breach list: the API's words under the field, nothing signed in.
    await page.getByLabel('Password', { exact: true }).fill('Password1234');
    await page.getByLabel('Repeat the password').fill('Password1234');
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    const refusal = page.getByRole('alert');
    await refusal.waitFor();
    expect(await refusal.textContent()).toContain('weak_password');
    expect(await page.getByLabel('Password', { exact: true }).getAttribute('aria-invalid')).toBe('true');

    await page.getByLabel('Password', { exact: true }).fill(OWNER.password);
    await page.getByLabel('Repeat the password').fill(OWNER.password);
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await heading(page, 'Overview').waitFor();
    // The spent token left the address bar; the header names the person.
    expect(new URL(page.url()).hash).toBe('');
    expect(await page.locator('header').textContent()).toContain(OWNER.email);

    // The same link again: used.
    const again = await owner!.newPage();
    await again.goto(`${consoleUrl}/invite#${token}`);
    await again.getByText('invitation_used').waitFor();
    await again.close();

    await page.getByRole('button', { name: 'Sign out' }).click();
    await heading(page, 'Sign in').waitFor();
    await page.goto(`${consoleUrl}/keys`);
    await heading(page, 'Sign in').waitFor();
    await page.getByLabel('Email').fill(OWNER.email);
    await page.getByLabel('Password').fill('not the password at all');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByText('invalid_credentials').waitFor();
    await page.getByLabel('Password').fill(OWNER.password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    // Back to the page asked for before signing in.
    await heading(page, 'Keys').waitFor();
    await page.close();
  }, TIMEOUT);

  it('creates a secret key shown once, which calls the Data API until disabled, then answers 403 key_disabled', async () => {
    const page = await owner!.newPage();
    await page.goto(`${consoleUrl}/keys`);
    await heading(page, 'Keys').waitFor();
    await page.getByRole('button', { name: 'Create key' }).click();
    const field = page.getByLabel(/^Secret key /);
    await field.waitFor();
    expect(await field.getAttribute('readonly')).not.toBeNull();
    const secret = await field.inputValue();
    expect(secret).toMatch(/^aik_[0-9a-f]{64}$/);
    await page.getByRole('button', { name: 'Copy' }).waitFor();
    await shot(page, 'keys-created');

    // The key works on the Data API, over real HTTP from a server (no Origin header).
    const ok = await fetch(`${platform!.urls.data}/v1/databases`, { headers: bearer(secret) });
    expect(ok.status).toBe(200);

    // Shown once: after a reload the page holds its last 4 characters, never the secret.
    await page.reload();
    await heading(page, 'Keys').waitFor();
    const row = page.getByRole('row').filter({ hasText: `…${secret.slice(-4)}` });
    await row.waitFor();
    expect(await page.content()).not.toContain(secret);

    await row.getByRole('button', { name: 'Disable' }).click();
    await row.getByRole('button', { name: 'Confirm disable' }).click();
    await row.getByText('Disabled').waitFor();
    await shot(page, 'keys');

    const refused = await fetch(`${platform!.urls.data}/v1/databases`, { headers: bearer(secret) });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('key_disabled');
    await page.close();
  }, TIMEOUT);

  it('offers a viewer no "Create key" nor People, and the API refuses them 403 role_forbidden', async () => {
    const context = await browser!.newContext();
    try {
      const page = await accept(context, await invite(VIEWER.email, 'viewer'), VIEWER.email, VIEWER.password);
      const nav = page.getByRole('navigation', { name: 'Console sections' });
      await nav.getByRole('link', { name: 'Keys' }).click();
      await heading(page, 'Keys').waitFor();
      await page.getByRole('heading', { name: 'Secret keys' }).waitFor();
      await page.waitForLoadState('networkidle');
      expect(await page.getByRole('button', { name: 'Create key' }).count()).toBe(0);
      expect(await page.getByRole('button', { name: 'Disable' }).count()).toBe(0);
      expect(await nav.getByRole('link', { name: 'People' }).count()).toBe(0);
      await shot(page, 'keys-viewer');

      expect(await callFromPage(page, 'POST', '/keys', {})).toEqual({ status: 403, code: 'role_forbidden' });
    } finally {
      await context.close();
    }
  }, TIMEOUT);

  it('every page passes axe-core with no serious or critical violation and breaks no CSP rule (a screenshot of each in test/artifacts/console/)', async () => {
    const failures: string[] = [];
    const check = async (page: Page, name: string) => {
      await page.waitForLoadState('networkidle');
      for (const v of await axeViolations(page)) failures.push(`${name}: ${v}`);
      await shot(page, name);
    };
    const watch = (page: Page) =>
      page.on('console', (m) => {
        if (m.type() === 'error' && /Content Security Policy/i.test(m.text())) failures.push(`${page.url()}: ${m.text()}`);
      });

    const page = await owner!.newPage();
    watch(page);
    for (const [path, title] of PAGES) {
      await page.goto(`${consoleUrl}${path}`);
      await heading(page, title).waitFor();
      await check(page, path === '/' ? 'overview' : path.slice(1));
    }
    await page.close();

    // The pages without a session: an invitation (not accepted) and the sign-in page.
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    try {
      const anonymous = await context.newPage();
      watch(anonymous);
      await anonymous.goto(`${consoleUrl}/invite#${await invite('someone@example.com', 'developer')}`);
      await heading(anonymous, 'Join Development').waitFor();
      await check(anonymous, 'invite');
      await anonymous.goto(`${consoleUrl}/sign-in`);
      await heading(anonymous, 'Sign in').waitFor();
      await check(anonymous, 'sign-in');
    } finally {
      await context.close();
    }
    expect(failures).toEqual([]);
  }, TIMEOUT);
});
