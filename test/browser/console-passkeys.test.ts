/**
 * Console passkeys in headless Chromium (issue 37; docs/decisions/console-passkeys.md), driving the
 * built bundle with Chromium's virtual authenticator (the DevTools protocol's WebAuthn domain: a
 * platform authenticator with resident keys and user verification, its presence simulated): after an
 * invitation's password the person adds a passkey, signs out and signs in with it alone; the Security
 * page lists it, refuses a second one on the same device, removes it, and the removed passkey no longer
 * signs in; "Skip" signs in without one. The pages are opened at `http://localhost:<port>`: an IP
 * address cannot be a WebAuthn RP ID, and the page served at 127.0.0.1 offers no passkey step. Each
 * page passes axe-core (no serious or critical violation); screenshots go to test/artifacts/console/.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, CDPSession, Page } from 'playwright-core';
import { launchChromium, requireChromium } from '../helpers/browser.js';
import { axeViolations, heading, invitationToken } from '../helpers/console-browser.js';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { bootstrap, type DevCredentials } from '../../lambdas/local/bootstrap.js';
import { startPlatform } from '../../lambdas/local/platform.js';

const TIMEOUT = 120_000;
const ROOT = join(import.meta.dirname, '..', '..');
const ARTIFACTS = join(ROOT, 'test', 'artifacts', 'console');
const PASSWORD = 'passkeys are phishing-resistant 37';

let engine: EmbeddedEngine;
let credentials: DevCredentials;
let close: (() => Promise<void>) | undefined;
let browser: Browser | undefined;
/** The console under `localhost` (the server listens on 127.0.0.1, which `localhost` reaches). */
let consoleUrl = '';
let ipUrl = '';

beforeAll(async () => {
  requireChromium();
  execFileSync(process.execPath, [join(ROOT, 'scripts', 'build-console.mjs'), '--if-stale'], { cwd: ROOT, stdio: 'inherit' });
  mkdirSync(ARTIFACTS, { recursive: true });
  const dataDir = mkdtempSync(join(tmpdir(), 'console-passkeys-'));
  engine = createEmbeddedEngine({ dataDir });
  ({ credentials } = await bootstrap(engine, dataDir));
  const running = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 }, consolePort: 0 });
  close = async () => {
    await running.close();
    rmSync(dataDir, { recursive: true, force: true });
  };
  ipUrl = running.consoleUrl!;
  consoleUrl = `http://localhost:${new URL(ipUrl).port}`;
  browser = await launchChromium();
}, TIMEOUT);

afterAll(async () => {
  await browser?.close().catch(() => {});
  await close?.();
}, TIMEOUT);

const invite = (email: string) => invitationToken(engine, credentials.organization_id, email, 'developer');

/** A page of a new context with a virtual platform authenticator (resident keys, user verification). */
async function pageWithAuthenticator(context: BrowserContext): Promise<{ page: Page; cdp: CDPSession; authenticatorId: string }> {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  await cdp.send('WebAuthn.enable');
  const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
    options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true, automaticPresenceSimulation: true },
  });
  return { page, cdp, authenticatorId };
}

async function setPassword(page: Page, token: string): Promise<void> {
  await page.goto(`${consoleUrl}/invite#${token}`);
  await heading(page, 'Join Development').waitFor();
  await page.getByLabel('Password', { exact: true }).fill(PASSWORD);
  await page.getByLabel('Repeat the password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Set password and sign in' }).click();
}

async function signOut(page: Page): Promise<void> {
  await page.getByRole('button', { name: 'Sign out' }).click();
  await heading(page, 'Sign in').waitFor();
}

describe('console passkeys in a browser', () => {
  it('adds a passkey after the invitation, signs in with it alone, lists and removes it; a removed passkey signs in no more', async () => {
    const email = 'passkey-person@example.com';
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    const { page, cdp, authenticatorId } = await pageWithAuthenticator(context);
    const failed: string[] = [];
    page.on('console', (m) => m.type() === 'error' && failed.push(m.text()));

    await setPassword(page, await invite(email));
    await page.getByRole('button', { name: 'Skip' }).waitFor();
    expect(await axeViolations(page)).toEqual([]);
    await page.screenshot({ path: join(ARTIFACTS, 'passkey-step.png'), fullPage: true });
    await page.getByRole('button', { name: 'Add passkey' }).click();
    await heading(page, 'Overview').waitFor();
    const { credentials: held } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
    expect(held).toHaveLength(1);
    expect(held[0]).toMatchObject({ isResidentCredential: true, rpId: 'localhost' });

    // The Security page lists it.
    await page.getByRole('link', { name: 'Security' }).click();
    await heading(page, 'Security').waitFor();
    const row = page.getByRole('row', { name: /Passkey 1/ });
    await row.waitFor();
    expect(await row.textContent()).toContain('never');
    expect(await axeViolations(page)).toEqual([]);

    // Signed out, the passkey alone signs in (no email typed), and its last use shows.
    await signOut(page);
    await page.getByRole('button', { name: 'Sign in with a passkey', exact: true }).click();
    await heading(page, 'Overview').waitFor();
    expect(await page.locator('header').textContent()).toContain(email);
    await page.goto(`${consoleUrl}/security`);
    await page.getByRole('row', { name: /Passkey 1/ }).waitFor();
    expect(await page.getByRole('row', { name: /Passkey 1/ }).textContent()).not.toContain('never');
    await page.screenshot({ path: join(ARTIFACTS, 'passkeys.png'), fullPage: true });

    // A second passkey on the same device: the browser refuses it (the options exclude the first).
    await page.getByLabel('Name (optional)').fill('Same laptop');
    await page.getByRole('button', { name: 'Add passkey' }).click();
    await page.getByText('passkey_exists').waitFor();

    // Removed, the passkey the device still holds is refused.
    await page.getByRole('button', { name: 'Remove Passkey 1' }).click();
    await page.getByRole('button', { name: 'Really remove Passkey 1' }).click();
    await page.getByText('No passkeys yet').waitFor();
    await signOut(page);
    await page.getByRole('button', { name: 'Sign in with a passkey', exact: true }).click();
    await page.getByText('invalid_credentials').waitFor();
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe('Sign in');
    // Its password still signs in.
    await page.getByLabel('Email').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in', exact: true }).click();
    await heading(page, 'Overview').waitFor();
    expect(failed.filter((t) => /Content Security Policy/i.test(t))).toEqual([]);
    await context.close();
  }, TIMEOUT);

  it('"Skip" signs in without a passkey; one can be added later from the Security page and used', async () => {
    const email = 'passkey-later@example.com';
    const context = await browser!.newContext();
    const { page, cdp, authenticatorId } = await pageWithAuthenticator(context);
    await setPassword(page, await invite(email));
    await page.getByRole('button', { name: 'Skip' }).click();
    await heading(page, 'Overview').waitFor();
    expect((await cdp.send('WebAuthn.getCredentials', { authenticatorId })).credentials).toEqual([]);
    await page.goto(`${consoleUrl}/security`);
    await page.getByText('No passkeys yet').waitFor();
    await page.getByLabel('Name (optional)').fill('Work laptop');
    await page.getByRole('button', { name: 'Add passkey' }).click();
    await page.getByRole('row', { name: /Work laptop/ }).waitFor();
    await signOut(page);
    // With the email typed, the challenge is bound to that person.
    await page.getByLabel('Email').fill(email);
    await page.getByRole('button', { name: 'Sign in with a passkey', exact: true }).click();
    await heading(page, 'Overview').waitFor();
    await context.close();
  }, TIMEOUT);

  it('at 127.0.0.1 (no RP ID possible) the pages offer the localhost address instead of a passkey button', async () => {
    const context = await browser!.newContext();
    const page = await context.newPage();
    await page.goto(`${ipUrl}/sign-in`);
    await heading(page, 'Sign in').waitFor();
    expect(await page.getByRole('button', { name: 'Sign in with a passkey' }).count()).toBe(0);
    expect(await page.getByRole('link', { name: `${consoleUrl}/sign-in` }).count()).toBe(1);
    await context.close();
  }, TIMEOUT);
});
