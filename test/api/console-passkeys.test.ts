/**
 * Console passkeys (issue 37; docs/decisions/console-passkeys.md) through the local server with a real
 * HTTP client and a software authenticator (test/helpers/software-authenticator.ts: P-256 keys,
 * attestation `none`, assertions built and signed here): adding a passkey to a signed-in person and
 * signing in with it (a new session, the old one ended); refused: a replayed or expired challenge, a
 * registration challenge of another session, another origin or RP ID, a counter gone back, a missing
 * user verification, a key that is not the passkey's, another person's passkey, a removed person's;
 * the sign-in limits count passkey failures as the password's. The engine's clock is a ManualClock.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { generateKeyPairSync } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { adminOk } from '../helpers/cli.js';
import { acceptInvitation, ConsoleBrowser, expectExactError as expectError, STRONG_PASSWORD as STRONG } from '../helpers/console-browser.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { assert, attest, FLAG, newCredential, type SoftCredential } from '../helpers/software-authenticator.js';

const clock = new ManualClock(Date.now());
let p: TestPlatform;
let consoleUrl: string;
/** Where a browser opens the local console to use passkeys (an IP address cannot be an RP ID). */
let pageOrigin: string;
const RP_ID = 'localhost';
const dist = mkdtempSync(join(tmpdir(), 'console-dist-'));

beforeAll(async () => {
  writeFileSync(join(dist, 'index.html'), '<!doctype html><title>console</title><div id="app"></div>');
  p = await startTestPlatform({ clock, console: true, consoleDist: dist });
  consoleUrl = p.consoleUrl!;
  pageOrigin = `http://localhost:${new URL(consoleUrl).port}`;
});
afterAll(async () => {
  await p?.close();
  rmSync(dist, { recursive: true, force: true });
});

/** A browser of one person on the page's origin (localhost: the passkeys' relying party). */
const newBrowser = (): ConsoleBrowser => {
  const browser = new ConsoleBrowser(consoleUrl);
  browser.origin = pageOrigin;
  return browser;
};

const tokenOf = (url: string) => /\/invite#([A-Za-z0-9_-]{43})$/.exec(url)![1];

/** A new person of the bootstrap organization, signed in through an invitation. */
async function newPerson(role = 'developer', org = p.credentials.organization_id) {
  const email = `${role}-${Math.random().toString(36).slice(2)}@example.com`;
  const { invitation_url } = adminOk(p.dataDir, 'org', 'invite', '--org', org, '--email', email, '--role', role);
  return { ...(await acceptInvitation(consoleUrl, tokenOf(invitation_url), { origin: pageOrigin })), email };
}

/** Registers a new software credential for the browser's person; returns it. */
async function addPasskey(browser: ConsoleBrowser, name?: string): Promise<SoftCredential> {
  const options = await browser.call('POST', '/console/api/passkeys/options');
  expect(options.status, JSON.stringify(options.body)).toBe(200);
  const credential = newCredential();
  const res = await browser.call('POST', '/console/api/passkeys', { response: attest(credential, { challenge: options.body.challenge, origin: pageOrigin, rpId: RP_ID, userHandle: options.body.user.id }), ...(name ? { name } : {}) });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return credential;
}

/** A passkey sign-in's options (no session), `email` binding them when given. */
async function signInOptions(browser = newBrowser(), email?: string) {
  const res = await browser.call('POST', '/console/api/session/passkey/options', email ? { email } : {});
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body as { challenge: string; rpId: string; allowCredentials?: unknown[]; userVerification: string };
}

async function signInWith(credential: SoftCredential, tweak: Partial<Parameters<typeof assert>[1]> = {}, browser = newBrowser(), email?: string) {
  const { challenge } = await signInOptions(browser, email);
  const response = assert(credential, { challenge, origin: pageOrigin, rpId: RP_ID, ...tweak });
  return { browser, response, res: await browser.call('POST', '/console/api/session/passkey', { response }) };
}

describe('adding passkeys', () => {
  it('a signed-in person gets options for the console as relying party, adds a passkey, lists it, and it is excluded from the next options', async () => {
    const { browser, person, email } = await newPerson();
    const options = await browser.call('POST', '/console/api/passkeys/options');
    expect(options.status).toBe(200);
    expect(options.body).toMatchObject({
      rp: { id: 'localhost', name: expect.any(String) },
      user: { id: Buffer.from(person.id).toString('base64url'), name: email },
      challenge: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
      attestation: 'none',
      authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
      excludeCredentials: [],
    });
    const credential = newCredential();
    const added = await browser.call('POST', '/console/api/passkeys', { response: attest(credential, { challenge: options.body.challenge, origin: pageOrigin, rpId: RP_ID }), name: 'Laptop' });
    expect(added.status, JSON.stringify(added.body)).toBe(201);
    expect(added.body).toEqual({ id: credential.id, name: 'Laptop', created_at: expect.any(String), last_used_at: null, transports: ['internal'], backed_up: false });
    const list = await browser.call('GET', '/console/api/passkeys');
    expect(list.body).toEqual({ data: [added.body] });
    const next = await browser.call('POST', '/console/api/passkeys/options');
    expect(next.body.excludeCredentials).toEqual([{ id: credential.id, type: 'public-key', transports: ['internal'] }]);
    // The same credential again: it is the person's already.
    const again = await browser.call('POST', '/console/api/passkeys', { response: attest(credential, { challenge: next.body.challenge, origin: pageOrigin, rpId: RP_ID }) });
    expectError(again, 409, 'already_exists', 'response');
  });

  it('needs a session and the CSRF token (401 not_signed_in, 403 csrf_failed)', async () => {
    expectError(await newBrowser().call('POST', '/console/api/passkeys/options'), 401, 'not_signed_in');
    expectError(await newBrowser().call('GET', '/console/api/passkeys'), 401, 'not_signed_in');
    const { browser } = await newPerson('viewer');
    const csrf = browser.cookies.get('csrf')!;
    browser.cookies.delete('csrf');
    expectError(await browser.call('POST', '/console/api/passkeys/options'), 403, 'csrf_failed');
    browser.cookies.set('csrf', csrf);
    expect((await browser.call('POST', '/console/api/passkeys/options')).status).toBe(200);
  });

  it('refuses a replayed, expired or other session\'s challenge, another origin or RP ID, no user verification (400 passkey_failed)', async () => {
    const { browser, email } = await newPerson();
    const create = async (b: ConsoleBrowser, tweak: Partial<Parameters<typeof attest>[1]> = {}, challenge?: string) => {
      const c = challenge ?? (await b.call('POST', '/console/api/passkeys/options')).body.challenge;
      return b.call('POST', '/console/api/passkeys', { response: attest(newCredential(), { challenge: c, origin: pageOrigin, rpId: RP_ID, ...tweak }) });
    };
    expectError(await create(browser, { origin: 'https://evil.example' }), 400, 'passkey_failed', 'response');
    expectError(await create(browser, { origin: consoleUrl }), 400, 'passkey_failed', 'response'); // 127.0.0.1 cannot be the RP's origin
    expectError(await create(browser, { rpId: 'evil.example' }), 400, 'passkey_failed', 'response');
    expectError(await create(browser, { flags: FLAG.UP | FLAG.AT }), 400, 'passkey_failed', 'response');
    // Used once, then replayed.
    const { challenge } = (await browser.call('POST', '/console/api/passkeys/options')).body;
    expect((await create(browser, {}, challenge)).status).toBe(201);
    expectError(await create(browser, {}, challenge), 400, 'passkey_failed', 'response');
    // Expired.
    const late = (await browser.call('POST', '/console/api/passkeys/options')).body.challenge;
    clock.advance(5 * 60_000 + 1);
    expectError(await create(browser, {}, late), 400, 'passkey_failed', 'response');
    // Issued to another session of the same person.
    const other = newBrowser();
    expect((await other.call('POST', '/console/api/session', { email, password: STRONG })).status).toBe(200);
    const theirs = (await other.call('POST', '/console/api/passkeys/options')).body.challenge;
    expectError(await create(browser, {}, theirs), 400, 'passkey_failed', 'response');
    // A sign-in challenge is not a registration's.
    expectError(await create(browser, {}, (await signInOptions()).challenge), 400, 'passkey_failed', 'response');
    expect((await browser.call('GET', '/console/api/passkeys')).body.data).toHaveLength(1);
  });

  it('answers bad bodies in the platform\'s shape (400 invalid_body, unknown_field), names from 1 to 64 characters', async () => {
    const { browser } = await newPerson();
    expectError(await browser.call('POST', '/console/api/passkeys', {}), 400, 'invalid_body', 'response');
    expectError(await browser.call('POST', '/console/api/passkeys', { response: 'nope' }), 400, 'invalid_body', 'response');
    expectError(await browser.call('POST', '/console/api/passkeys', { response: {}, extra: 1 }), 400, 'unknown_field', 'extra');
    expectError(await browser.call('POST', '/console/api/passkeys', { response: { id: 'x', response: { clientDataJSON: 'bm90IGpzb24' } } }), 400, 'passkey_failed', 'response');
    const { challenge } = (await browser.call('POST', '/console/api/passkeys/options')).body;
    const response = attest(newCredential(), { challenge, origin: pageOrigin, rpId: RP_ID });
    expectError(await browser.call('POST', '/console/api/passkeys', { response, name: 'x'.repeat(65) }), 400, 'invalid_body', 'name');
    expectError(await newBrowser().call('POST', '/console/api/session/passkey', { response: 42 }), 400, 'invalid_body', 'response');
    expectError(await newBrowser().call('POST', '/console/api/session/passkey/options', { email: 'not an email' }), 400, 'invalid_body', 'email');
  });
});

describe('signing in with a passkey', () => {
  it('makes a new session as the password does (cookies, csrf token; the browser\'s previous session ended) and stores the counter', async () => {
    const { browser, person } = await newPerson();
    const credential = await addPasskey(browser, 'Phone');
    const options = await signInOptions();
    expect(options).toMatchObject({ rpId: 'localhost', userVerification: 'required' });
    expect(options.allowCredentials ?? []).toEqual([]);
    const before = browser.cookies.get('session')!;
    const { res } = await signInWith(credential, {}, browser);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ person: { id: person.id, email: person.email, role: 'developer', created_at: expect.any(String) }, csrf_token: browser.csrf });
    expect(browser.cookies.get('session')).not.toBe(before);
    const stale = newBrowser();
    stale.cookies.set('session', before);
    expectError(await stale.call('GET', '/console/api/me'), 401, 'not_signed_in');
    expect((await browser.call('GET', '/console/api/me')).body.person).toMatchObject({ id: person.id });
    const [listed] = (await browser.call('GET', '/console/api/passkeys')).body.data;
    expect(listed.last_used_at).toEqual(expect.any(String));
    // Bound to the person's email, it signs in too (case and spaces as the password's sign-in takes them).
    expect((await signInWith(credential, {}, newBrowser(), ` ${person.email.toUpperCase()}`)).res.status).toBe(200);
  });

  it('refuses a replayed assertion, another origin or RP ID, no user verification, a key that is not the passkey\'s', async () => {
    const { browser } = await newPerson();
    const credential = await addPasskey(browser);
    const first = await signInWith(credential);
    expect(first.res.status).toBe(200);
    expectError(await newBrowser().call('POST', '/console/api/session/passkey', { response: first.response }), 400, 'passkey_failed', 'response');
    expectError((await signInWith(credential, { origin: 'https://evil.example' })).res, 400, 'passkey_failed', 'response');
    expectError((await signInWith(credential, { rpId: 'evil.example' })).res, 400, 'passkey_failed', 'response');
    expectError((await signInWith(credential, { flags: FLAG.UP })).res, 400, 'passkey_failed', 'response');
    expectError((await signInWith(credential, { signer: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey })).res, 400, 'passkey_failed', 'response');
    // An expired challenge.
    const { challenge } = await signInOptions();
    clock.advance(5 * 60_000 + 1);
    expectError(await newBrowser().call('POST', '/console/api/session/passkey', { response: assert(credential, { challenge, origin: pageOrigin, rpId: RP_ID }) }), 400, 'passkey_failed', 'response');
    // A registration challenge is not a sign-in's.
    const reg = (await browser.call('POST', '/console/api/passkeys/options')).body.challenge;
    expectError(await newBrowser().call('POST', '/console/api/session/passkey', { response: assert(credential, { challenge: reg, origin: pageOrigin, rpId: RP_ID }) }), 400, 'passkey_failed', 'response');
    expect((await signInWith(credential)).res.status).toBe(200);
  });

  it('refuses a signature counter that goes back (a cloned authenticator)', async () => {
    const { browser } = await newPerson();
    const credential = await addPasskey(browser);
    expect((await signInWith(credential, { counter: 5 })).res.status).toBe(200);
    expectError((await signInWith(credential, { counter: 3 })).res, 400, 'passkey_failed', 'response');
    expectError((await signInWith(credential, { counter: 5 })).res, 400, 'passkey_failed', 'response');
    expect((await signInWith(credential, { counter: 6 })).res.status).toBe(200);
  });

  it("refuses another person's passkey: bound to another email (401), another user handle (400), removing it (404)", async () => {
    const a = await newPerson();
    const b = await newPerson();
    const credential = await addPasskey(a.browser);
    expectError((await signInWith(credential, {}, newBrowser(), b.email)).res, 401, 'invalid_credentials');
    expectError((await signInWith(credential, { userHandle: Buffer.from(b.person.id).toString('base64url') })).res, 400, 'passkey_failed', 'response');
    expectError(await b.browser.call('DELETE', `/console/api/passkeys/${credential.id}`), 404, 'passkey_not_found');
    expectError(await b.browser.call('DELETE', '/console/api/passkeys/not*an*id'), 404, 'passkey_not_found');
    // Another person registering the same credential id.
    const { challenge } = (await b.browser.call('POST', '/console/api/passkeys/options')).body;
    expectError(await b.browser.call('POST', '/console/api/passkeys', { response: attest(credential, { challenge, origin: pageOrigin, rpId: RP_ID }) }), 409, 'already_exists', 'response');
    expect((await signInWith(credential)).res.status).toBe(200);
    // Its own person removes it: it signs in no more.
    expect((await a.browser.call('DELETE', `/console/api/passkeys/${credential.id}`)).status).toBe(204);
    expect((await a.browser.call('GET', '/console/api/passkeys')).body.data).toEqual([]);
    expectError((await signInWith(credential)).res, 401, 'invalid_credentials');
  });

  it("a removed person's passkeys sign in no more; an unknown passkey is 401 invalid_credentials", async () => {
    const { browser: owner } = await newPerson('admin');
    const gone = await newPerson('viewer');
    const credential = await addPasskey(gone.browser);
    expect((await owner.call('DELETE', `/console/api/people/${gone.person.id}`)).status).toBe(204);
    expectError((await signInWith(credential)).res, 401, 'invalid_credentials');
    expectError((await signInWith(newCredential())).res, 401, 'invalid_credentials');
  });

  it('counts failures against the account as the password does: locked, the right passkey is refused 429 for 15 minutes', async () => {
    clock.advance(16 * 60_000); // the address's failures of the tests above are out of the window
    const { browser, email } = await newPerson();
    const credential = await addPasskey(browser);
    for (let i = 0; i < 5; i++) expectError(await newBrowser().call('POST', '/console/api/session', { email, password: `wrong password ${i}` }), 401, 'invalid_credentials');
    for (let i = 0; i < 5; i++) expectError((await signInWith(credential, { flags: FLAG.UP })).res, 400, 'passkey_failed', 'response');
    const locked = (await signInWith(credential)).res;
    expectError(locked, 429, 'sign_in_limited');
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(800);
    // Bound to the email, the options say so before the prompt; the password is locked too.
    expectError(await newBrowser().call('POST', '/console/api/session/passkey/options', { email }), 429, 'sign_in_limited');
    expectError(await newBrowser().call('POST', '/console/api/session', { email, password: STRONG }), 429, 'sign_in_limited');
    clock.advance(15 * 60_000 + 1000);
    expect((await signInWith(credential)).res.status).toBe(200);
  });

  it('comes from the console only: a sign-in from another origin is 403 csrf_failed', async () => {
    const res = await fetch(`${consoleUrl}/console/api/session/passkey/options`, { method: 'POST', headers: { origin: 'https://evil.example', 'content-type': 'application/json' }, body: '{}' });
    expect(res.status).toBe(403);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('csrf_failed');
  });
});
