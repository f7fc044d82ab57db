/**
 * The console API's core (issue 37) through the local server with a real HTTP client: invitations
 * (CLI and console), passwords, sessions and their cookies, CSRF, roles, sign-in limits, keys shown once
 * and disabled, one organization's person kept from another's keys, and the activity log's actor. The
 * engine's clock is a ManualClock, so idle sessions and locks end when the test says so.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { Invitations } from '../../lambdas/console/invitations.js';
import { admin, adminOk } from '../helpers/cli.js';
import { acceptInvitation, ConsoleBrowser, expectExactError as expectError, STRONG_PASSWORD as STRONG } from '../helpers/console-browser.js';
import { bearer, startTestPlatform, type TestPlatform } from '../helpers/platform.js';

const clock = new ManualClock(Date.now());
let p: TestPlatform;
let consoleUrl: string;
const dist = mkdtempSync(join(tmpdir(), 'console-dist-'));
/** A browser of one person on the console's own origin. */
const newBrowser = () => new ConsoleBrowser(consoleUrl);

beforeAll(async () => {
  writeFileSync(join(dist, 'index.html'), '<!doctype html><title>console</title><div id="app"></div>');
  p = await startTestPlatform({ clock, console: true, consoleDist: dist });
  consoleUrl = p.consoleUrl!;
});
afterAll(async () => {
  await p?.close();
  rmSync(dist, { recursive: true, force: true });
});

const tokenOf = (url: string) => /\/invite#([A-Za-z0-9_-]{43})$/.exec(url)![1];

/** A new person of `org` with `role`, signed in (through an invitation from the CLI). */
async function personWith(org: string, role: string, email = `${role}-${Math.random().toString(36).slice(2)}@example.com`) {
  const { invitation_url } = adminOk(p.dataDir, 'org', 'invite', '--org', org, '--email', email, '--role', role);
  return { ...(await acceptInvitation(consoleUrl, tokenOf(invitation_url))), email };
}

describe('invitations', () => {
  it('the CLI prints {invitation_url, expires_at}: the console URL with the token in the fragment, 7 days by default', () => {
    const r = adminOk(p.dataDir, 'org', 'invite', '--org', p.credentials.organization_id, '--email', 'cli@example.com', '--role', 'viewer');
    expect(Object.keys(r).sort()).toEqual(['expires_at', 'invitation_url']);
    expect(r.invitation_url).toMatch(/^http:\/\/127\.0\.0\.1:8084\/invite#[A-Za-z0-9_-]{43}$/);
    expect(Date.parse(r.expires_at) - Date.now()).toBeGreaterThan(7 * 24 * 3600_000 - 60_000);
    const short = adminOk(p.dataDir, 'org', 'invite', '--org', p.credentials.organization_id, '--email', 'cli2@example.com', '--role', 'admin', '--expires-in', '12h');
    expect(Date.parse(short.expires_at) - Date.now()).toBeLessThan(12 * 3600_000 + 60_000);
    expect(admin(p.dataDir, 'org', 'invite', '--org', p.credentials.organization_id, '--email', 'x@example.com', '--role', 'superuser').status).toBe(2);
    expect(admin(p.dataDir, 'org', 'invite', '--org', p.credentials.organization_id, '--email', 'x@example.com', '--role', 'viewer', '--expires-in', '90d').status).toBe(2);
  });

  it('the first start invited the bootstrap organization\'s owner: reading it names the organization; an unknown token is 404', async () => {
    const b = newBrowser();
    const read = await b.call('POST', '/console/api/invitation/lookup', { token: tokenOf(p.credentials.console_invitation_url!) });
    expect(read.status).toBe(200);
    expect(read.body).toEqual({ email: 'owner@platform.localhost', role: 'owner', organization: { id: p.credentials.organization_id, name: 'Development' }, expires_at: expect.any(String) });
    expectError(await b.call('POST', '/console/api/invitation/lookup', { token: 'A'.repeat(43) }), 404, 'invitation_not_found');
    expectError(await b.call('POST', '/console/api/invitation/lookup', { token: 'short' }), 404, 'invitation_not_found');
  });

  it('refuses a short and a breached password (400 weak_password), then signs the person in once; a second accept is 409', async () => {
    const b = newBrowser();
    const path = '/console/api/invitation/accept';
    const token = tokenOf(p.credentials.console_invitation_url!);
    expectError(await b.call('POST', path, { token, password: 'short' }), 400, 'weak_password', 'password');
    expectError(await b.call('POST', path, { token, password: 'elevenchars' }), 400, 'weak_password', 'password');
    expectError(await b.call('POST', path, { token, password: 'qwerty123456' }), 400, 'weak_password', 'password');
    expectError(await b.call('POST', path, { token, password: 'QWERTY123456' }), 400, 'weak_password', 'password');
    const ok = await b.call('POST', path, { token, password: STRONG });
    expect(ok.status).toBe(200);
    expect(ok.body.person).toMatchObject({ email: 'owner@platform.localhost', role: 'owner', id: expect.stringMatching(/^per_/) });
    const session = ok.headers.getSetCookie().find((c) => c.startsWith('session='))!;
    expect(session).toMatch(/^session=[A-Za-z0-9_-]{43}; /);
    expect(session).toContain('HttpOnly');
    expect(session).toContain('SameSite=Strict');
    expect(session).toContain('Path=/');
    expect(session).not.toContain('Secure'); // plain http on a loopback address
    const csrf = ok.headers.getSetCookie().find((c) => c.startsWith('csrf='))!;
    expect(csrf).not.toContain('HttpOnly');
    expect(ok.body.csrf_token).toBe(b.csrf);
    expect((await b.call('GET', '/console/api/me')).body).toMatchObject({ person: { email: 'owner@platform.localhost', role: 'owner' }, organization: { id: p.credentials.organization_id, name: 'Development' } });
    expectError(await newBrowser().call('POST', path, { token, password: STRONG }), 409, 'invitation_used');
    expectError(await newBrowser().call('POST', '/console/api/invitation/lookup', { token }), 409, 'invitation_used');
  });

  it('an expired invitation is 410', async () => {
    const { token } = await new Invitations(p.engine.kv, () => clock.now()).create({ organizationId: p.credentials.organization_id, email: 'late@example.com', role: 'viewer', expiresInMs: 60_000 });
    clock.advance(60_001);
    expectError(await newBrowser().call('POST', '/console/api/invitation/lookup', { token }), 410, 'invitation_expired');
    expectError(await newBrowser().call('POST', '/console/api/invitation/accept', { token, password: STRONG }), 410, 'invitation_expired');
  });

  it('of two accepts of one invitation at once, exactly one wins', async () => {
    const { invitation_url } = adminOk(p.dataDir, 'org', 'invite', '--org', p.credentials.organization_id, '--email', 'race@example.com', '--role', 'viewer');
    const accept = { token: tokenOf(invitation_url), password: STRONG };
    const answers = await Promise.all([newBrowser().call('POST', '/console/api/invitation/accept', accept), newBrowser().call('POST', '/console/api/invitation/accept', accept)]);
    expect(answers.map((a) => a.status).sort()).toEqual([200, 409]);
    expect(answers.find((a) => a.status === 409)!.body.error.code).toBe('invitation_used');
    const people = await (await signIn('owner@platform.localhost')).call('GET', '/console/api/people');
    expect(people.body.data.filter((x: any) => x.email === 'race@example.com')).toHaveLength(1);
  });

  it('one email belongs to one organization: inviting a taken email is 409 already_exists', async () => {
    const other = adminOk(p.dataDir, 'org', 'create', '--name', 'Other').id;
    const r = admin(p.dataDir, 'org', 'invite', '--org', other, '--email', 'owner@platform.localhost', '--role', 'viewer');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('one email belongs to one organization');
  });
});

async function signIn(email: string, password = STRONG) {
  const b = newBrowser();
  const res = await b.call('POST', '/console/api/session', { email, password });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return b;
}

describe('sessions', () => {
  it('without a session the console API answers 401 not_signed_in, unknown paths included', async () => {
    const b = newBrowser();
    expectError(await b.call('GET', '/console/api/me'), 401, 'not_signed_in');
    expectError(await b.call('GET', '/console/api/keys'), 401, 'not_signed_in');
    expectError(await b.call('GET', '/console/api/nothing-here'), 401, 'not_signed_in');
    b.cookies.set('session', 'A'.repeat(43));
    const res = await b.call('GET', '/console/api/me');
    expectError(res, 401, 'not_signed_in');
    // The stale cookies are cleared.
    expect(res.headers.getSetCookie().some((c) => /^session=;.*Max-Age=0/.test(c))).toBe(true);
  });

  it('signs in with the right password only (401 invalid_credentials, the same for an unknown email)', async () => {
    expectError(await newBrowser().call('POST', '/console/api/session', { email: 'owner@platform.localhost', password: 'wrong password here' }), 401, 'invalid_credentials');
    expectError(await newBrowser().call('POST', '/console/api/session', { email: 'nobody@example.com', password: STRONG }), 401, 'invalid_credentials');
    const b = await signIn('OWNER@platform.localhost ');
    expect((await b.call('GET', '/console/api/me')).status).toBe(200);
  });

  it('rotates the session at sign-in: the session the browser held ends, a new one is set', async () => {
    const b = await signIn('owner@platform.localhost');
    const before = b.cookies.get('session')!;
    const stolen = newBrowser();
    stolen.cookies.set('session', before);
    expect((await stolen.call('GET', '/console/api/me')).status).toBe(200);
    const again = await b.call('POST', '/console/api/session', { email: 'owner@platform.localhost', password: STRONG });
    expect(again.status).toBe(200);
    expect(b.cookies.get('session')).not.toBe(before);
    expectError(await stolen.call('GET', '/console/api/me'), 401, 'not_signed_in');
    expect((await b.call('GET', '/console/api/me')).status).toBe(200);
  });

  it('ends after 12 idle hours, but not while used', async () => {
    const b = await signIn('owner@platform.localhost');
    clock.advance(6 * 3600_000);
    expect((await b.call('GET', '/console/api/me')).status).toBe(200);
    clock.advance(11 * 3600_000); // 17 h after sign-in, 11 h idle
    expect((await b.call('GET', '/console/api/me')).status).toBe(200);
    clock.advance(12 * 3600_000 + 1);
    expectError(await b.call('GET', '/console/api/me'), 401, 'not_signed_in');
  });

  it('signs out: the session ends at once and the cookies are cleared', async () => {
    const b = await signIn('owner@platform.localhost');
    const token = b.cookies.get('session')!;
    const out = await b.call('DELETE', '/console/api/session');
    expect(out.status).toBe(204);
    expect(b.cookies.has('session')).toBe(false);
    const replay = newBrowser();
    replay.cookies.set('session', token);
    expectError(await replay.call('GET', '/console/api/me'), 401, 'not_signed_in');
  });

  it('locks an account after 10 failures in 15 minutes: 429 sign_in_limited even with the right password, for 15 minutes', async () => {
    const { email } = await personWith(p.credentials.organization_id, 'viewer');
    for (let i = 0; i < 10; i++) expectError(await newBrowser().call('POST', '/console/api/session', { email, password: `wrong password ${i}` }), 401, 'invalid_credentials');
    const locked = await newBrowser().call('POST', '/console/api/session', { email, password: STRONG });
    expectError(locked, 429, 'sign_in_limited');
    expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(800);
    clock.advance(15 * 60_000 + 1000);
    expect((await newBrowser().call('POST', '/console/api/session', { email, password: STRONG })).status).toBe(200);
  }, 60_000);
});

describe('CSRF', () => {
  it('refuses a change without the double-submit token, with a wrong one, or from another origin (403 csrf_failed)', async () => {
    const b = await signIn('owner@platform.localhost');
    expectError(await b.call('POST', '/console/api/keys', {}, { 'x-csrf-token': '' }), 403, 'csrf_failed');
    expectError(await b.call('POST', '/console/api/keys', {}, { 'x-csrf-token': 'A'.repeat(43) }), 403, 'csrf_failed');
    expectError(await b.call('POST', '/console/api/keys', {}, { origin: 'https://evil.example' }), 403, 'csrf_failed');
    b.origin = null;
    expectError(await b.call('POST', '/console/api/keys', {}), 403, 'csrf_failed');
    // A cross-site form posting to the sign-in: no session needed, the Origin is checked all the same.
    const form = await fetch(`${consoleUrl}/console/api/session`, { method: 'POST', headers: { origin: 'https://evil.example', 'content-type': 'application/json' }, body: JSON.stringify({ email: 'owner@platform.localhost', password: STRONG }) });
    expect(form.status).toBe(403);
    expect(((await form.json()) as any).error.code).toBe('csrf_failed');
    // A csrf cookie forged to match a forged header is not the session's token.
    const forged = await signIn('owner@platform.localhost');
    forged.cookies.set('csrf', 'B'.repeat(43));
    expectError(await forged.call('POST', '/console/api/keys', {}), 403, 'csrf_failed');
  });
});

describe('roles and keys', () => {
  it('a viewer reads keys but may not create one (403 role_forbidden); a developer may not change roles', async () => {
    const { browser: viewer } = await personWith(p.credentials.organization_id, 'viewer');
    expect((await viewer.call('GET', '/console/api/keys')).status).toBe(200);
    expectError(await viewer.call('POST', '/console/api/keys', {}), 403, 'role_forbidden');
    const { browser: dev, person } = await personWith(p.credentials.organization_id, 'developer');
    expectError(await dev.call('PATCH', `/console/api/people/${person.id}`, { role: 'admin' }), 403, 'role_forbidden');
    const { browser: adm, person: admPerson } = await personWith(p.credentials.organization_id, 'admin');
    expectError(await adm.call('PATCH', `/console/api/people/${admPerson.id}`, { role: 'owner' }), 403, 'role_forbidden');
    expectError(await adm.call('POST', '/console/api/invitations', { email: 'boss@example.com', role: 'owner' }), 403, 'role_forbidden');
  });

  it('creates a key shown once, lists it by its last 4 characters, and disables it: the key then answers 403 key_disabled', async () => {
    const { browser: dev } = await personWith(p.credentials.organization_id, 'developer');
    const created = await dev.call('POST', '/console/api/keys', {});
    expect(created.status).toBe(201);
    expect(created.body.secret).toMatch(/^aik_[0-9a-f]{64}$/);
    expect(created.headers.get('cache-control')).toBe('no-store');
    const { secret, key } = created.body;
    const list = await dev.call('GET', '/console/api/keys');
    const row = list.body.data.find((k: any) => k.id === key.id);
    expect(row).toMatchObject({ id: key.id, last4: secret.slice(-4), disabled: false });
    expect(JSON.stringify(list.body)).not.toContain(secret);
    expect((await fetch(`${p.urls.data}/v1/databases`, { headers: bearer(secret) })).status).toBe(200);
    const disabled = await dev.call('POST', `/console/api/keys/${key.id}/disable`);
    expect(disabled.status).toBe(200);
    expect(disabled.body.key).toMatchObject({ id: key.id, disabled: true });
    clock.advance(31_000); // past the credential cache
    const refused = await fetch(`${p.urls.data}/v1/databases`, { headers: bearer(secret) });
    expect(refused.status).toBe(403);
    expect(((await refused.json()) as any).error.code).toBe('key_disabled');
  });

  it("a person of organization A sees none of organization B's keys and cannot disable them", async () => {
    const orgB = adminOk(p.dataDir, 'org', 'create', '--name', 'B').id;
    const keyB = adminOk(p.dataDir, 'key', 'create', '--org', orgB);
    const owner = await signIn('owner@platform.localhost');
    const list = await owner.call('GET', '/console/api/keys');
    expect(list.body.data.map((k: any) => k.id)).not.toContain(keyB.id);
    expect(list.body.data.every((k: any) => k.organization_id === p.credentials.organization_id)).toBe(true);
    expectError(await owner.call('POST', `/console/api/keys/${keyB.id}/disable`), 404, 'key_not_found');
    const personB = await personWith(orgB, 'owner');
    const listB = await personB.browser.call('GET', '/console/api/keys');
    expect(listB.body.data.map((k: any) => k.id)).toEqual([keyB.id]);
  });
});

describe('people', () => {
  it("a removed person's session ends at once; the last owner is never removed", async () => {
    const { browser: dev, person } = await personWith(p.credentials.organization_id, 'developer');
    expect((await dev.call('GET', '/console/api/me')).status).toBe(200);
    const owner = await signIn('owner@platform.localhost');
    expect((await owner.call('DELETE', `/console/api/people/${person.id}`)).status).toBe(204);
    expectError(await dev.call('GET', '/console/api/me'), 401, 'not_signed_in');
    const me = (await owner.call('GET', '/console/api/me')).body.person;
    expectError(await owner.call('DELETE', `/console/api/people/${me.id}`), 409, 'last_owner');
  });

  it("a disabled organization's sessions end within the credential cache's time (403 organization_disabled)", async () => {
    const org = adminOk(p.dataDir, 'org', 'create', '--name', 'Soon disabled').id;
    const { browser } = await personWith(org, 'owner');
    expect((await browser.call('GET', '/console/api/me')).status).toBe(200);
    adminOk(p.dataDir, 'org', 'disable', '--org', org);
    clock.advance(31_000);
    expectError(await browser.call('GET', '/console/api/me'), 403, 'organization_disabled');
    expectError(await browser.call('GET', '/console/api/me'), 401, 'not_signed_in');
  });

  it('an admin invites from the console: the link works once', async () => {
    const { browser: adm } = await personWith(p.credentials.organization_id, 'admin');
    const inv = await adm.call('POST', '/console/api/invitations', { email: 'invited@example.com', role: 'developer', expires_in_hours: 2 });
    expect(inv.status).toBe(201);
    expect(inv.body.invitation_url.startsWith(`${consoleUrl}/invite#`)).toBe(true);
    const listed = await adm.call('GET', '/console/api/invitations');
    expect(listed.body.data.some((i: any) => i.email === 'invited@example.com' && i.role === 'developer' && i.used_at === null)).toBe(true);
    expect(JSON.stringify(listed.body)).not.toContain(tokenOf(inv.body.invitation_url));
    expect((await newBrowser().call('POST', '/console/api/invitation/accept', { token: tokenOf(inv.body.invitation_url), password: STRONG })).status).toBe(200);
  });
});

describe('activity and serving', () => {
  it('records console actions in the activity log with the person as actor', async () => {
    const { browser: owner } = await personWith(p.credentials.organization_id, 'owner');
    const me = (await owner.call('GET', '/console/api/me')).body.person;
    const created = await owner.call('POST', '/console/api/keys', {});
    expect(created.status).toBe(201);
    const res = await fetch(`${p.urls.data}/v1/activity?kind=api.call&limit=500`, { headers: bearer(p.credentials.secret_key) });
    expect(res.status).toBe(200);
    const items = ((await res.json()) as any).items as any[];
    const record = items.find((i) => i.route === '/console/api/keys' && i.method === 'POST' && i.status === 201 && i.actor_id === me.id);
    expect(record).toMatchObject({ actor_kind: 'person', actor_id: me.id, source: 'console', organization_id: p.credentials.organization_id });
    // The invitation's accept (no session yet) is recorded under the person it signed in.
    expect(items.some((i) => i.route === '/console/api/invitation/accept' && i.method === 'POST' && i.actor_id === me.id && i.status === 200)).toBe(true);
  });

  it('serves the pages with the security headers, index.html for unknown page paths', async () => {
    for (const path of ['/', '/keys', '/invite']) {
      const res = await fetch(`${consoleUrl}${path}`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('<div id="app">');
      expect(res.headers.get('content-security-policy')).toContain("default-src 'self'");
      expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('referrer-policy')).toBe('no-referrer');
      expect(res.headers.get('x-content-type-options')).toBe('nosniff');
    }
    expect((await fetch(`${consoleUrl}/assets/missing.js`)).status).toBe(404);
    // An encoded separator decoded into `..` never leaves the built folder.
    const outside = await fetch(`${consoleUrl}/..%2f..%2fpackage.json`);
    expect(outside.status).toBe(404);
    expect(await outside.text()).not.toContain('"dependencies"');
    const api = await fetch(`${consoleUrl}/console/api/me`);
    expect(api.headers.get('x-frame-options')).toBe('DENY');
    expect(api.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  });
});

// Last: it locks the address every request of this file comes from.
describe('per-address sign-in limit', () => {
  it('50 failures from one address in 15 minutes lock it: 429 sign_in_limited, for any account', async () => {
    const { email } = await personWith(p.credentials.organization_id, 'viewer');
    clock.advance(16 * 60_000); // past the windows of the failures counted above
    const fail = (i: number) => newBrowser().call('POST', '/console/api/session', { email: `spray-${i}@example.com`, password: 'a wrong password' });
    for (let batch = 0; batch < 5; batch++) {
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => fail(batch * 10 + i)));
      for (const a of answers) expectError(a, 401, 'invalid_credentials');
    }
    expectError(await newBrowser().call('POST', '/console/api/session', { email, password: STRONG }), 429, 'sign_in_limited');
    clock.advance(15 * 60_000 + 1000);
    expect((await newBrowser().call('POST', '/console/api/session', { email, password: STRONG })).status).toBe(200);
  }, 180_000);
});
