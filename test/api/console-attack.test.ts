/**
 * An attacker's pass on the console API (issue 37, Acceptance; docs/decisions/console-attack-pass.md),
 * through the local server with real HTTP: session fixation, the cookies' attributes, a stolen cookie
 * sent from another origin to every state-changing route of the table, CSRF (missing or wrong token,
 * cross-site form posts, `Origin: null`), clickjacking headers, invitation reuse, expiry and guessing,
 * brute-force sign-in (per account, per address, and the time an unknown email takes), a role escalating
 * itself, one organization's person reaching another's things by id on every console route taking one,
 * path traversal on the pages' file server, huge and malformed bodies and cookies, prototype-named keys,
 * and a sign-out ending the session on the server. The engine's clock is a ManualClock (windows, locks
 * and expiries end when the test says).
 */
import http from 'node:http';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { Invitations } from '../../lambdas/console/invitations.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { SignInLimits, SIGN_IN_WINDOW_MS } from '../../lambdas/console/sign-in-limits.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { CONSOLE_ORIGIN_HEADER } from '../../lambdas/shared/console-headers.js';
import { checkUpstreamDestination, signInAddress } from '../../lambdas/http/handlers/console/shared.js';
import { RerankProfiles } from '../../lambdas/vector/rerank-profiles.js';
import type { HttpRequest } from '../../lambdas/http/types.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { ConsoleBrowser, expectError, signedInPerson, STRONG_PASSWORD, type ConsoleAnswer } from '../helpers/console-browser.js';

const clock = new ManualClock(Date.now());
let p: TestPlatform;
let consoleUrl: string;
let org: string;
const root = mkdtempSync(join(tmpdir(), 'console-attack-'));
const dist = join(root, 'dist');
/** A file beside dist whose name starts like it: a prefix check without the separator would serve it. */
const SECRET = 'secret-outside-dist';

const console_ = ROUTES.filter((r) => r.api === 'console' && r.path !== '$default');
const STATE_CHANGING = console_.filter((r) => !['GET', 'HEAD', 'OPTIONS', 'ANY'].includes(r.method));
const NO_STACK = /\bat [\w.<>]+ \(|\.ts:\d+|node:internal|Error: /;

beforeAll(async () => {
  mkdirSync(join(dist, 'assets'), { recursive: true });
  writeFileSync(join(dist, 'index.html'), '<!doctype html><title>console</title><div id="app"></div>');
  writeFileSync(join(dist, 'assets', 'app.js'), 'console.log(1)');
  writeFileSync(join(root, 'dist-secret.txt'), SECRET);
  writeFileSync(join(root, 'secret.txt'), SECRET);
  p = await startTestPlatform({ clock, console: true, consoleDist: dist });
  consoleUrl = p.consoleUrl!;
  org = p.credentials.organization_id;
});
afterAll(async () => {
  await p?.close();
  rmSync(root, { recursive: true, force: true });
});

/** A request as written, path and headers untouched by fetch (which resolves `..` and refuses odd bytes). */
function raw(path: string, init: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string }> {
  const url = new URL(consoleUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path, method: init.method ?? 'GET', headers: init.headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(init.body);
  });
}

/** A route's path with every parameter filled from `values` (else `fill`). */
const pathOf = (path: string, values: Record<string, string> = {}, fill = 'x') => path.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(values[name] ?? fill));
const params = (path: string) => [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]);

const signIn = async (email: string, password = STRONG_PASSWORD, browser = new ConsoleBrowser(consoleUrl)) => ({ browser, res: await browser.call('POST', '/console/api/session', { email, password }) });
const setCookie = (res: ConsoleAnswer, name: string) => res.headers.getSetCookie().find((c) => c.startsWith(`${name}=`));
const newToken = () => randomBytes(32).toString('base64url');
/** A new window for the sign-in limits: every count and lock of the tests before has ended. */
const freshLimits = () => clock.advance(SIGN_IN_WINDOW_MS + 60_001);

describe('sessions and their cookies', () => {
  it('session fixation: a session id the browser held before signing in is never the one after, and is ended', async () => {
    const { browser, email } = await signedInPerson(p.engine, consoleUrl, org, 'developer');
    // A token the attacker chose, planted before the sign-in (a well-formed one the server never made).
    const planted = newToken();
    const victim = new ConsoleBrowser(consoleUrl);
    victim.cookies.set('session', planted);
    const { res } = await signIn(email, STRONG_PASSWORD, victim);
    expect(res.status, res.text).toBe(200);
    expect(victim.cookies.get('session')).not.toBe(planted);
    expect(victim.cookies.get('session')).toMatch(/^[A-Za-z0-9_-]{43}$/);
    // The attacker's own live session planted in the victim's browser: signing in ends it, and the victim gets another.
    const attacker = (await signedInPerson(p.engine, consoleUrl, org, 'viewer')).browser;
    const attackerToken = attacker.cookies.get('session')!;
    const second = new ConsoleBrowser(consoleUrl);
    second.cookies.set('session', attackerToken);
    expect((await signIn(email, STRONG_PASSWORD, second)).res.status).toBe(200);
    expect(second.cookies.get('session')).not.toBe(attackerToken);
    expectError(await attacker.call('GET', '/console/api/me'), 401, 'not_signed_in');
    expect((await second.call('GET', '/console/api/me')).body.person.email).toBe(email);
    // The same at an invitation's accept.
    const { token } = await new Invitations(p.engine.kv, () => clock.now()).create({ organizationId: org, email: `fix-${Date.now()}@example.com`, role: 'viewer' });
    const third = new ConsoleBrowser(consoleUrl);
    third.cookies.set('session', planted);
    expect((await third.call('POST', '/console/api/invitation/accept', { token, password: STRONG_PASSWORD })).status).toBe(200);
    expect(third.cookies.get('session')).not.toBe(planted);
    expect(browser.cookies.get('session')).not.toBe(victim.cookies.get('session'));
  });

  it('cookie attributes: session HttpOnly, both SameSite=Strict, Path=/, host-only, at most 7 days; Secure except on loopback http', async () => {
    const { email } = await signedInPerson(p.engine, consoleUrl, org, 'viewer');
    const { res, browser } = await signIn(email);
    const session = setCookie(res, 'session')!;
    const csrf = setCookie(res, 'csrf')!;
    for (const cookie of [session, csrf]) {
      const attrs = cookie.split(/;\s*/).slice(1).map((a) => a.toLowerCase());
      expect(attrs).toContain('samesite=strict');
      expect(attrs).toContain('path=/');
      expect(attrs.some((a) => a.startsWith('domain='))).toBe(false);
      const maxAge = Number(attrs.find((a) => a.startsWith('max-age='))!.slice(8));
      expect(maxAge).toBeGreaterThan(0);
      expect(maxAge).toBeLessThanOrEqual(7 * 24 * 3600);
      expect(attrs).not.toContain('secure'); // plain http on 127.0.0.1: a browser would drop a Secure cookie
    }
    expect(session.toLowerCase()).toContain('; httponly');
    expect(csrf.toLowerCase()).not.toContain('httponly');
    // Sign-out clears both with the same attributes.
    const out = await browser.call('DELETE', '/console/api/session');
    expect(out.status).toBe(204);
    for (const name of ['session', 'csrf']) expect(setCookie(out, name)).toMatch(/^\w+=; Path=\/; Max-Age=0; SameSite=Strict/);
    // A console served over https (CONSOLE_URL): Secure. Over plain http elsewhere than loopback: Secure too
    // (the browser then keeps no session: a console must not be served so).
    for (const url of ['https://console.example.test', 'http://console.example.test']) {
      useSettings({ consoleUrl: url });
      try {
        const b = new ConsoleBrowser(consoleUrl);
        b.origin = url;
        const r = await b.call('POST', '/console/api/session', { email, password: STRONG_PASSWORD });
        expect(r.status, r.text).toBe(200);
        for (const name of ['session', 'csrf']) expect(setCookie(r, name)!.split(/;\s*/)).toContain('Secure');
      } finally {
        useSettings({ consoleUrl: undefined });
      }
    }
  });

  it('sign-out ends the session on the server: the old cookie replayed is 401, with its old CSRF token too', async () => {
    const { browser } = await signedInPerson(p.engine, consoleUrl, org, 'developer');
    const saved = new Map(browser.cookies);
    // A sign-out forged from another site is refused and ends nothing.
    browser.origin = 'https://evil.example';
    expectError(await browser.call('DELETE', '/console/api/session'), 403, 'csrf_failed');
    browser.origin = consoleUrl;
    expect((await browser.call('GET', '/console/api/me')).status).toBe(200);
    expect((await browser.call('DELETE', '/console/api/session')).status).toBe(204);
    const replay = new ConsoleBrowser(consoleUrl);
    for (const [k, v] of saved) replay.cookies.set(k, v);
    expectError(await replay.call('GET', '/console/api/me'), 401, 'not_signed_in');
    for (const [k, v] of saved) replay.cookies.set(k, v);
    expectError(await replay.call('POST', '/console/api/keys', {}), 401, 'not_signed_in');
  });
});

describe('a stolen cookie and CSRF', () => {
  let owner: ConsoleBrowser;
  beforeAll(async () => {
    owner = (await signedInPerson(p.engine, consoleUrl, org, 'owner')).browser;
  });

  it(`every state-changing console route (${STATE_CHANGING.length}) refuses the session cookie from another origin, none, or null: 403 csrf_failed`, async () => {
    expect(STATE_CHANGING.length).toBeGreaterThan(30);
    const refused: string[] = [];
    for (const route of STATE_CHANGING) {
      for (const origin of ['https://evil.example', 'null', null, `${consoleUrl}.evil.example`, consoleUrl.replace(/:\d+$/, ':1')]) {
        const b = new ConsoleBrowser(consoleUrl);
        for (const [k, v] of owner.cookies) b.cookies.set(k, v);
        b.origin = origin;
        const res = await b.call(route.method, pathOf(route.path), {});
        if (res.status === 403 && res.body?.error?.code === 'csrf_failed') refused.push(route.id);
        else expect.fail(`${route.method} ${route.path} from ${origin}: ${res.status} ${res.text}`);
      }
    }
    expect(new Set(refused).size).toBe(STATE_CHANGING.length);
    // The stolen session still works for its owner: nothing was changed by the forged calls.
    expect((await owner.call('GET', '/console/api/me')).status).toBe(200);
  });

  it('with the console origin, a change still needs x-csrf-token equal to this session\'s csrf cookie', async () => {
    const good = owner.csrf!;
    const other = (await signedInPerson(p.engine, consoleUrl, org, 'owner')).browser;
    const cases: Record<string, string>[] = [
      { 'x-csrf-token': '' },
      { 'x-csrf-token': 'A'.repeat(43) },
      { 'x-csrf-token': good + 'x' },
      // Another session's token, with its cookie: double submit alone would pass; bound to the session it does not.
      { 'x-csrf-token': other.csrf!, cookie: `session=${owner.cookies.get('session')}; csrf=${other.csrf}` },
      // A cookie injected beside the header (the attacker controls both): not this session's token.
      { 'x-csrf-token': 'A'.repeat(43), cookie: `session=${owner.cookies.get('session')}; csrf=${'A'.repeat(43)}` },
    ];
    for (const headers of cases) expectError(await owner.call('POST', '/console/api/keys', {}, headers), 403, 'csrf_failed');
    // No header at all.
    const bare = new ConsoleBrowser(consoleUrl);
    bare.cookies.set('session', owner.cookies.get('session')!);
    expectError(await bare.call('POST', '/console/api/keys', {}), 403, 'csrf_failed');
    expect((await owner.call('POST', '/console/api/keys', {})).status).toBe(201);
  });

  it('a cross-site form post (urlencoded, text/plain, multipart) with the cookie, and Origin: null, is 403 csrf_failed; so is a forged sign-in', async () => {
    const cookie = [...owner.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    const forms: [string, string][] = [
      ['application/x-www-form-urlencoded', 'email=attacker%40example.com&role=owner'],
      ['text/plain', '{"email":"attacker@example.com","role":"owner","x":"="}'],
      ['multipart/form-data; boundary=b', '--b\r\ncontent-disposition: form-data; name="role"\r\n\r\nowner\r\n--b--\r\n'],
    ];
    for (const origin of ['https://evil.example', 'null']) {
      for (const [type, body] of forms) {
        const res = await raw('/console/api/invitations', { method: 'POST', headers: { origin, cookie, 'content-type': type }, body });
        expect(res.status, res.text).toBe(403);
        expect(JSON.parse(res.text).error.code).toBe('csrf_failed');
      }
      // Login CSRF: signing the victim into the attacker's account from another site.
      const login = await raw('/console/api/session', { method: 'POST', headers: { origin, 'content-type': 'text/plain' }, body: '{"email":"a@example.com","password":"x"}' });
      expect(JSON.parse(login.text).error.code).toBe('csrf_failed');
      expect(login.headers['set-cookie']).toBeUndefined();
    }
    const invitations = await owner.call('GET', '/console/api/invitations?limit=100');
    expect(JSON.stringify(invitations.body)).not.toContain('attacker@example.com');
  });

  it('answers carry no CORS grant: another origin can never read an answer, the session\'s CSRF token included', async () => {
    for (const method of ['GET', 'OPTIONS']) {
      const b = new ConsoleBrowser(consoleUrl);
      for (const [k, v] of owner.cookies) b.cookies.set(k, v);
      b.origin = 'https://evil.example';
      const res = await b.call(method, '/console/api/me', undefined, { 'access-control-request-method': 'POST' });
      expect(res.headers.get('access-control-allow-origin')).toBeNull();
      expect(res.headers.get('access-control-allow-credentials')).toBeNull();
    }
  });
});

describe('clickjacking', () => {
  it("pages, files and API answers (successes, refusals, the gateway's own 413) say frame-ancestors 'none' and X-Frame-Options: DENY", async () => {
    const owner = (await signedInPerson(p.engine, consoleUrl, org, 'owner')).browser;
    const answers: [string, { status: number; headers: { get(name: string): string | null } }][] = [];
    const get = async (label: string, path: string, init?: RequestInit) => answers.push([label, await fetch(`${consoleUrl}${path}`, init)]);
    await get('page /', '/');
    await get('page /keys', '/keys');
    await get('page /invite', '/invite');
    await get('asset', '/assets/app.js');
    await get('missing file', '/missing.png');
    await get('bad path', '/%zz');
    await get('POST on a page', '/', { method: 'POST' });
    await get('401', '/console/api/me');
    answers.push(['200', await owner.call('GET', '/console/api/me')]);
    answers.push(['400', await owner.call('POST', '/console/api/keys', '{"nope":')]);
    answers.push(['403', await owner.call('POST', '/console/api/keys', {}, { 'x-csrf-token': 'x' })]);
    answers.push(['404', await owner.call('GET', '/console/api/nothing-here')]);
    answers.push(['413 route', await owner.call('POST', '/console/api/session', { email: 'a@b.co', password: 'x'.repeat(8000) })]);
    const huge = await raw('/console/api/session', { method: 'POST', headers: { origin: consoleUrl, 'content-type': 'application/json' }, body: Buffer.alloc(11 * 1024 * 1024, 0x20) });
    answers.push(['413 gateway', { status: huge.status, headers: { get: (n: string) => (huge.headers[n] as string | undefined) ?? null } }]);
    const parser = await raw('/console/api/me', { headers: { cookie: `pad=${'x'.repeat(20_000)}` } });
    answers.push(['431 parser', { status: parser.status, headers: { get: (n: string) => (parser.headers[n] as string | undefined) ?? null } }]);
    for (const [label, res] of answers) {
      expect(res.headers.get('x-frame-options'), label).toBe('DENY');
      expect(res.headers.get('content-security-policy'), label).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-content-type-options'), label).toBe('nosniff');
    }
    expect(answers.map(([label, r]) => `${label}:${r.status}`)).toEqual(expect.arrayContaining(['413 gateway:413', '431 parser:431']));
  });
});

describe('invitations', () => {
  const invitations = () => new Invitations(p.engine.kv, () => clock.now());

  it('the token travels in no path: no console route has one, and the old paths answer nothing about it', async () => {
    expect(console_.filter((r) => /token/i.test(r.path)).map((r) => r.id)).toEqual([]);
    const { token } = await invitations().create({ organizationId: org, email: `path-${Date.now()}@example.com`, role: 'viewer' });
    const b = new ConsoleBrowser(consoleUrl);
    expectError(await b.call('GET', `/console/api/invitations/${token}`), 401, 'not_signed_in');
    expectError(await b.call('POST', `/console/api/invitations/${token}/accept`, { password: STRONG_PASSWORD }), 401, 'not_signed_in');
    expect((await b.call('POST', '/console/api/invitation/lookup', { token })).status).toBe(200);
  });

  it('reuse is 409 invitation_used, expiry 410 invitation_expired (read and accept alike), a withdrawn one 404', async () => {
    const { token } = await invitations().create({ organizationId: org, email: `reuse-${Date.now()}@example.com`, role: 'developer', expiresInMs: 3600_000 });
    expect((await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/invitation/accept', { token, password: STRONG_PASSWORD })).status).toBe(200);
    expectError(await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/invitation/accept', { token, password: 'another strong password 77' }), 409, 'invitation_used');
    expectError(await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/invitation/lookup', { token }), 409, 'invitation_used');
    const late = await invitations().create({ organizationId: org, email: `late-${Date.now()}@example.com`, role: 'viewer', expiresInMs: 60_000 });
    clock.advance(60_000);
    expectError(await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/invitation/lookup', { token: late.token }), 410, 'invitation_expired');
    expectError(await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/invitation/accept', { token: late.token, password: STRONG_PASSWORD }), 410, 'invitation_expired');
    const withdrawn = await invitations().create({ organizationId: org, email: `gone-${Date.now()}@example.com`, role: 'viewer' });
    await invitations().revoke(org, withdrawn.invitation.id);
    expectError(await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/invitation/accept', { token: withdrawn.token, password: STRONG_PASSWORD }), 404, 'invitation_not_found');
  });

  it('guessing: made-up and malformed tokens are 404 or 400, never a 500; the accept body cannot choose a role or an email', async () => {
    const b = new ConsoleBrowser(consoleUrl);
    for (let i = 0; i < 20; i++) expectError(await b.call('POST', '/console/api/invitation/lookup', { token: newToken() }), 404, 'invitation_not_found');
    for (const token of ['', 'short', '%2e%2e', '../../etc/passwd', 'A'.repeat(42), 'A'.repeat(44), 'A'.repeat(43) + '\n', 'x'.repeat(900)]) {
      expectError(await b.call('POST', '/console/api/invitation/lookup', { token }), 404, 'invitation_not_found');
    }
    for (const body of [{}, { token: 1 }, { token: null }, { token: ['A'.repeat(43)] }, { token: { $ne: '' } }]) {
      expectError(await b.call('POST', '/console/api/invitation/lookup', body), 400);
    }
    const { token } = await invitations().create({ organizationId: org, email: `role-${Date.now()}@example.com`, role: 'viewer' });
    for (const extra of [{ role: 'owner' }, { email: 'other@example.com' }, { organization_id: 'org_x' }]) {
      expectError(await b.call('POST', '/console/api/invitation/accept', { token, password: STRONG_PASSWORD, ...extra }), 400, 'unknown_field');
    }
    const raw = await b.call('POST', '/console/api/invitation/accept', `{"token":"${token}","password":"${STRONG_PASSWORD}","__proto__":{"role":"owner"}}`);
    expectError(raw, 400, 'unknown_field');
    const ok = await b.call('POST', '/console/api/invitation/accept', { token, password: STRONG_PASSWORD });
    expect(ok.body.person.role).toBe('viewer');
  });
});

describe('brute-force sign-in', () => {
  it('10 failures lock an account 15 minutes, the right password included; an unknown email locks the same way', async () => {
    freshLimits();
    const { email } = await signedInPerson(p.engine, consoleUrl, org, 'viewer');
    const unknown = `nobody-${Date.now()}@example.com`;
    for (const who of [email, unknown]) {
      for (let i = 0; i < 10; i++) expectError((await signIn(who, `wrong password number ${i}`)).res, 401, 'invalid_credentials');
      const locked = (await signIn(who)).res;
      expectError(locked, 429, 'sign_in_limited');
      expect(Number(locked.headers.get('retry-after'))).toBeGreaterThan(800);
    }
    // The lock is the account's: another person from the same address signs in.
    const { email: bystander } = await signedInPerson(p.engine, consoleUrl, org, 'viewer');
    expect((await signIn(bystander)).res.status).toBe(200);
    clock.advance(15 * 60_000 + 1000);
    expect((await signIn(email)).res.status).toBe(200);
  });

  it('the per-address limit counts the connection\'s address, not a header the caller writes', async () => {
    freshLimits();
    const limits = new SignInLimits(p.engine.kv, () => clock.now());
    for (let i = 0; i < 50; i++) await limits.fail(`seed-${i}@example.com`, '127.0.0.1');
    const { email } = await signedInPerson(p.engine, consoleUrl, org, 'viewer');
    for (const headers of [{}, { 'x-forwarded-for': '203.0.113.7' }, { 'cloudfront-viewer-address': '203.0.113.7:443' }, { 'x-real-ip': '203.0.113.8' }] as Record<string, string>[]) {
      expectError(await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/session', { email, password: STRONG_PASSWORD }, headers), 429, 'sign_in_limited');
    }
    freshLimits();
    expect((await signIn(email)).res.status).toBe(200);
  });

  it("on AWS the address is the viewer's (CloudFront's header), not the edge's that every viewer of it shares", () => {
    const req = (headers: Record<string, string>, sourceIp = '130.176.1.1') => ({ headers, sourceIp }) as unknown as HttpRequest;
    expect(signInAddress(req({ 'cloudfront-viewer-address': '198.51.100.7:50123' }), 'aws')).toBe('198.51.100.7');
    expect(signInAddress(req({ 'cloudfront-viewer-address': '2001:db8::7:50123' }), 'aws')).toBe('2001:db8::7');
    expect(signInAddress(req({}), 'aws')).toBe('130.176.1.1');
    expect(signInAddress(req({ 'cloudfront-viewer-address': 'garbage' }), 'aws')).toBe('130.176.1.1');
    // Locally no CDN stands in front: a header is only the caller's say-so.
    expect(signInAddress(req({ 'cloudfront-viewer-address': '198.51.100.7:50123' }, '127.0.0.1'), 'embedded')).toBe('127.0.0.1');
  });

  it("with CloudFront's origin header value set (AWS), a console API call without it is 403 forbidden before anything is looked up, a forged viewer address included", async () => {
    freshLimits();
    const verify = randomBytes(24).toString('hex');
    const { email, browser } = await signedInPerson(p.engine, consoleUrl, org, 'owner');
    useSettings({ consoleOriginVerify: verify });
    try {
      const forged = { 'cloudfront-viewer-address': '203.0.113.9:443' };
      for (const headers of [forged, { ...forged, [CONSOLE_ORIGIN_HEADER]: verify.slice(1) }, { ...forged, [CONSOLE_ORIGIN_HEADER]: `${verify}x` }, { [CONSOLE_ORIGIN_HEADER.toUpperCase()]: '' }]) {
        expectError(await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/session', { email, password: STRONG_PASSWORD }, headers), 403, 'forbidden');
        // A live session does not help: the check comes before it.
        expectError(await browser.call('GET', '/console/api/me', undefined, headers), 403, 'forbidden');
        expectError(await browser.call('POST', '/console/api/invitation/lookup', { token: newToken() }, headers), 403, 'forbidden');
        expectError(await browser.call('GET', '/console/api/no-such-route', undefined, headers), 403, 'forbidden');
      }
      // Every console route of the table, its own method and path.
      for (const r of console_) expectError(await browser.call(r.method, pathOf(r.path), r.method === 'GET' || r.method === 'DELETE' ? undefined : {}), 403, 'forbidden');
      // Through CloudFront (the header's value): served as before.
      const through = { [CONSOLE_ORIGIN_HEADER]: verify };
      expect((await browser.call('GET', '/console/api/me', undefined, through)).status).toBe(200);
      expect((await new ConsoleBrowser(consoleUrl).call('POST', '/console/api/session', { email, password: STRONG_PASSWORD }, through)).status).toBe(200);
      // The pages' files are no console API call (on AWS they come from S3).
      expect((await raw('/')).status).toBe(200);
    } finally {
      useSettings({ consoleOriginVerify: undefined });
    }
    expect((await browser.call('GET', '/console/api/me')).status).toBe(200);
  });

  it('timing: an unknown email costs a scrypt like a known one with a wrong password', async () => {
    freshLimits();
    const { email } = await signedInPerson(p.engine, consoleUrl, org, 'viewer');
    const time = async (who: string) => {
      const start = performance.now();
      expectError((await signIn(who, 'not the password at all')).res, 401, 'invalid_credentials');
      return performance.now() - start;
    };
    await time(`warm-${Date.now()}@example.com`); // the made-up hash is made once, on first use
    const known: number[] = [];
    const unknown: number[] = [];
    for (let i = 0; i < 4; i++) {
      known.push(await time(email));
      unknown.push(await time(`nobody-${i}-${Date.now()}@example.com`));
    }
    const median = (xs: number[]) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    // One scrypt (N=2^15, r=8, p=3) is tens of milliseconds; a skipped one would be a few.
    expect(median(unknown) / median(known), `known ${known}, unknown ${unknown}`).toBeGreaterThan(0.6);
    expect(median(unknown) / median(known), `known ${known}, unknown ${unknown}`).toBeLessThan(1.7);
    freshLimits();
  });
});

describe('roles: no escalation', () => {
  it('a developer cannot make itself or anyone admin or owner, nor invite; an admin cannot reach owner', async () => {
    const dev = await signedInPerson(p.engine, consoleUrl, org, 'developer');
    const adm = await signedInPerson(p.engine, consoleUrl, org, 'admin');
    const own = await signedInPerson(p.engine, consoleUrl, org, 'owner');
    const viewer = await signedInPerson(p.engine, consoleUrl, org, 'viewer');
    for (const role of ['admin', 'owner', 'developer']) {
      expectError(await dev.browser.call('PATCH', `/console/api/people/${dev.person.id}`, { role }), 403, 'role_forbidden');
      expectError(await dev.browser.call('PATCH', `/console/api/people/${viewer.person.id}`, { role }), 403, 'role_forbidden');
      expectError(await dev.browser.call('POST', '/console/api/invitations', { email: `dev-inv-${role}@example.com`, role }), 403, 'role_forbidden');
    }
    expectError(await dev.browser.call('DELETE', `/console/api/people/${adm.person.id}`), 403, 'role_forbidden');
    expectError(await dev.browser.call('PUT', '/console/api/limits', { rpm: 1 }), 403, 'role_forbidden');
    expectError(await dev.browser.call('PUT', '/console/api/features', { vector: false }), 403, 'role_forbidden');
    expectError(await adm.browser.call('PATCH', `/console/api/people/${adm.person.id}`, { role: 'owner' }), 403, 'role_forbidden');
    expectError(await adm.browser.call('PATCH', `/console/api/people/${own.person.id}`, { role: 'viewer' }), 403, 'role_forbidden');
    expectError(await adm.browser.call('DELETE', `/console/api/people/${own.person.id}`), 403, 'role_forbidden');
    expectError(await adm.browser.call('POST', '/console/api/invitations', { email: `adm-owner-${Date.now()}@example.com`, role: 'owner' }), 403, 'role_forbidden');
    // Extra fields never carry a role or an organization in.
    for (const body of ['{"role":"viewer","organization_id":"org_x"}', '{"role":"viewer","__proto__":{"role":"owner"}}', '{"role":"viewer","constructor":{"prototype":{"role":"owner"}}}']) {
      expectError(await adm.browser.call('PATCH', `/console/api/people/${dev.person.id}`, body), 400, 'unknown_field');
    }
    expectError(await adm.browser.call('POST', '/console/api/invitations', `{"email":"proto-${Date.now()}@example.com","role":"viewer","__proto__":{"role":"owner"}}`), 400, 'unknown_field');
    // Nothing changed: every role as it was.
    const people = (await own.browser.call('GET', '/console/api/people?limit=100')).body.data as { id: string; role: string }[];
    expect(people.find((x) => x.id === dev.person.id)!.role).toBe('developer');
    expect(people.find((x) => x.id === adm.person.id)!.role).toBe('admin');
    expect(people.find((x) => x.id === own.person.id)!.role).toBe('owner');
    // A demotion applies at once: the demoted admin's next change is refused.
    expect((await own.browser.call('PATCH', `/console/api/people/${adm.person.id}`, { role: 'viewer' })).status).toBe(200);
    expectError(await adm.browser.call('POST', '/console/api/invitations', { email: `late-${Date.now()}@example.com`, role: 'viewer' }), 403, 'role_forbidden');
  });
});

describe("the operator's upstream keys", () => {
  it("a developer cannot send an upstream key the operator named (a server's environment variable, a stack's secret) to an address of its choosing", async () => {
    process.env.OPERATOR_UPSTREAM_KEY = 'sk-operator-secret-value-123';
    const seen: string[] = [];
    const attacker = http.createServer((req, res) => {
      seen.push(`${req.headers.authorization ?? ''} ${req.headers['api-key'] ?? ''} ${req.headers['x-api-key'] ?? ''}`);
      req.resume();
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ id: 'x', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
      });
    });
    await new Promise<void>((r) => attacker.listen(0, '127.0.0.1', () => r()));
    const evil = `http://127.0.0.1:${(attacker.address() as { port: number }).port}/v1`;
    try {
      // The operator's route, keyed by the admin CLI's rule.
      await new ModelRoutes(p.engine.kv, () => clock.now()).set(org, { id: 'operator-chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: 'https://upstream.example/v1', upstream_model: 'm', api_key_env: 'OPERATOR_UPSTREAM_KEY' });
      const dev = (await signedInPerson(p.engine, consoleUrl, org, 'developer')).browser;
      const route = { endpoint: '/v1/chat/completions', provider: 'openai-compatible', model: 'm' };
      // A new route naming the operator's key, pointed at the attacker.
      expectError(await dev.call('PUT', '/console/api/routes/exfil', { ...route, base_url: evil, api_key_env: 'OPERATOR_UPSTREAM_KEY' }), 403, 'forbidden', 'api_key_env');
      expectError(await dev.call('PUT', '/console/api/routes/exfil', { ...route, base_url: evil, api_key_env: 'HOME' }), 403, 'forbidden', 'api_key_env');
      // A rerank profile is keyed the same way.
      expectError(await dev.call('PUT', '/console/api/rerank-profiles/exfil', { provider: 'openai-compatible', base_url: evil, model: 'r', api_key_env: 'OPERATOR_UPSTREAM_KEY' }), 403, 'forbidden', 'api_key_env');
      // The operator's route moved to the attacker with its key kept.
      expectError(await dev.call('PUT', '/console/api/routes/operator-chat', { ...route, base_url: evil, api_key_env: 'OPERATOR_UPSTREAM_KEY' }), 403, 'forbidden', 'base_url');
      // Moved without naming the key: it goes without it (the receiver is on loopback: the local development setting lets it be a base_url).
      useSettings({ consoleAllowLoopbackUpstreams: true });
      const moved = await dev.call('PUT', '/console/api/routes/operator-chat', { ...route, base_url: evil });
      expect(moved.status, moved.text).toBe(200);
      expect(moved.body.api_key_env ?? null).toBeNull();
      const tried = await dev.call('POST', '/console/api/routes/operator-chat/try', { input: 'hello' });
      expect(tried.status, tried.text).toBeLessThan(500);
      expect(seen.length).toBeGreaterThan(0);
      expect(seen.join('\n')).not.toContain('sk-operator-secret-value-123');
      // Keeping the key where the operator pointed it stays possible (an edit of the price, say).
      await new ModelRoutes(p.engine.kv, () => clock.now()).set(org, { id: 'operator-chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: 'https://upstream.example/v1', upstream_model: 'm', api_key_env: 'OPERATOR_UPSTREAM_KEY' });
      const kept = await dev.call('PUT', '/console/api/routes/operator-chat', { ...route, base_url: 'https://upstream.example/v1', api_key_env: 'OPERATOR_UPSTREAM_KEY', price_in_per_mtok: 1 });
      expect(kept.status, kept.text).toBe(200);
    } finally {
      useSettings({ consoleAllowLoopbackUpstreams: undefined });
      delete process.env.OPERATOR_UPSTREAM_KEY;
      await new Promise((r) => attacker.close(r));
    }
  });
});

describe('where the console may point an upstream (console-upstream-destinations.md)', () => {
  const BLOCKED = [
    'http://127.0.0.1:11434/v1',
    'http://localhost:11434/v1',
    'http://[::1]:8000/v1',
    'http://169.254.169.254/latest/meta-data',
    'http://[fd00:ec2::254]/latest',
    'http://10.0.0.5/v1',
    'https://192.168.1.1/v1',
    'http://100.64.0.1/v1',
    'http://2130706433/v1',
    'http://0x7f.1/v1',
    'http://[::ffff:127.0.0.1]/v1',
    'http://0.0.0.0:8080/v1',
    'http://metadata.google.internal/computeMetadata',
    'http://ollama:11434/v1',
    'http://vllm.corp/v1',
  ];
  const route = { endpoint: '/v1/chat/completions', provider: 'openai-compatible', model: 'm' };

  it('a developer cannot point a model route or a rerank profile at loopback, private, link-local, metadata or local-use addresses: 400 url_destination_blocked, param base_url', async () => {
    const dev = (await signedInPerson(p.engine, consoleUrl, org, 'developer')).browser;
    for (const base_url of BLOCKED) {
      expectError(await dev.call('PUT', '/console/api/routes/ssrf', { ...route, base_url }), 400, 'url_destination_blocked', 'base_url');
      expectError(await dev.call('PUT', '/console/api/rerank-profiles/ssrf', { provider: 'openai-compatible', base_url, model: 'r' }), 400, 'url_destination_blocked', 'base_url');
    }
    expect((await new ModelRoutes(p.engine.kv, () => clock.now()).list(org)).find((r) => r.id === 'ssrf')).toBeUndefined();
    // A public address is fine.
    expect((await dev.call('PUT', '/console/api/routes/ssrf', { ...route, base_url: 'https://93.184.215.14/v1' })).status).toBe(200);
    // …but not moved inward afterwards.
    expectError(await dev.call('PUT', '/console/api/routes/ssrf', { ...route, base_url: 'http://169.254.169.254/' }), 400, 'url_destination_blocked', 'base_url');
  });

  it("the operator's admin CLI keeps loopback (local models); the console edits such a route where it points, keeping its key, but cannot point one there", async () => {
    const routes = new ModelRoutes(p.engine.kv, () => clock.now());
    // What `route set --base-url http://127.0.0.1:11434/v1 --api-key-env …` writes.
    await routes.set(org, { id: 'ollama', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: 'http://127.0.0.1:11434/v1', upstream_model: 'llama', api_key_env: 'OLLAMA_KEY' });
    const dev = (await signedInPerson(p.engine, consoleUrl, org, 'developer')).browser;
    // The Routes page sends no api_key_env: the key stays while provider and base_url do (a trailing slash is the same URL).
    const edited = await dev.call('PUT', '/console/api/routes/ollama', { ...route, base_url: 'http://127.0.0.1:11434/v1/', model: 'llama3', price_in_per_mtok: 2 });
    expect(edited.status, edited.text).toBe(200);
    expect(edited.body).toMatchObject({ api_key_env: 'OLLAMA_KEY', upstream_model: 'llama3', price_in_per_mtok: 2 });
    expect((await routes.list(org)).find((r) => r.id === 'ollama')?.api_key_env).toBe('OLLAMA_KEY');
    // Sent as null, the key goes.
    const dropped = await dev.call('PUT', '/console/api/routes/ollama', { ...route, base_url: 'http://127.0.0.1:11434/v1', api_key_env: null });
    expect(dropped.status, dropped.text).toBe(200);
    expect(dropped.body.api_key_env ?? null).toBeNull();
    // Another loopback port, or another provider on the same one, is a new destination.
    expectError(await dev.call('PUT', '/console/api/routes/ollama', { ...route, base_url: 'http://127.0.0.1:6379/v1' }), 400, 'url_destination_blocked', 'base_url');
    // The local development setting lets loopback through from the console too.
    useSettings({ consoleAllowLoopbackUpstreams: true });
    try {
      expect((await dev.call('PUT', '/console/api/routes/ollama', { ...route, base_url: 'http://localhost:11434/v1' })).status).toBe(200);
      expectError(await dev.call('PUT', '/console/api/routes/ollama', { ...route, base_url: 'http://10.1.2.3/v1' }), 400, 'url_destination_blocked', 'base_url');
    } finally {
      useSettings({ consoleAllowLoopbackUpstreams: undefined });
    }
  });

  it('a rerank profile edited without api_key_env keeps the key where it stays, and loses it when it moves', async () => {
    const profiles = new RerankProfiles(p.engine.kv, () => clock.now());
    await profiles.set(org, { id: 'keyed', provider: 'openai-compatible', base_url: 'https://rerank.example.com/v1', model: 'r', api_key_env: 'RERANK_KEY' });
    const dev = (await signedInPerson(p.engine, consoleUrl, org, 'developer')).browser;
    const kept = await dev.call('PUT', '/console/api/rerank-profiles/keyed', { provider: 'openai-compatible', base_url: 'https://rerank.example.com/v1', model: 'r2' });
    expect(kept.status, kept.text).toBe(200);
    expect(kept.body).toMatchObject({ api_key_env: 'RERANK_KEY', model: 'r2' });
    const moved = await dev.call('PUT', '/console/api/rerank-profiles/keyed', { provider: 'openai-compatible', base_url: 'https://93.184.215.14/v1', model: 'r2' });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body.api_key_env ?? null).toBeNull();
  });

  it('a name is refused when any address it resolves to is not public; one that does not resolve passes (the call will fail)', async () => {
    const answer = (addresses: string[]) => async () => addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
    const check = (lookup: Parameters<typeof checkUpstreamDestination>[2]) => checkUpstreamDestination(undefined, { base_url: 'https://llm.example.com/v1' }, lookup);
    await expect(check(answer(['93.184.215.14']))).resolves.toBeUndefined();
    for (const inward of [['10.0.0.7'], ['93.184.215.14', '169.254.169.254'], ['::1'], ['fd00::7']]) {
      await expect(check(answer(inward))).rejects.toMatchObject({ code: 'url_destination_blocked', param: 'base_url' });
    }
    await expect(check(async () => Promise.reject(Object.assign(new Error('nope'), { code: 'ENOTFOUND' })))).resolves.toBeUndefined();
    // The base URL the route already has is not looked at again (the operator's, however it resolves).
    await expect(checkUpstreamDestination({ base_url: 'https://llm.example.com/v1' }, { base_url: 'https://llm.example.com/v1/' }, answer(['10.0.0.7']))).resolves.toBeUndefined();
  });
});

describe("one organization's person and another's ids", () => {
  it('every console route taking an id, given the other organization\'s, reveals and changes nothing of it', async () => {
    const tenants = new Tenants(p.engine.kv, () => clock.now());
    const other = await tenants.createOrganization('Bee Marker Org');
    const ws = await tenants.createWorkspace(other.id, 'bee workspace');
    const app = await tenants.createApplication(ws.id, 'bee app', ['ai.chat']);
    const key = await tenants.createSecretKey(other.id, app.id);
    const bee = await signedInPerson(p.engine, consoleUrl, other.id, 'owner');
    const inv = await new Invitations(p.engine.kv, () => clock.now()).create({ organizationId: other.id, email: `bee-invited-${Date.now()}@example.com`, role: 'viewer' });
    const B = bee.browser;
    const ok = (r: ConsoleAnswer, what: string) => expect(r.status, `${what}: ${r.text}`).toBeLessThan(300);
    const client = await B.call('POST', '/console/api/oauth-clients', { application_id: app.id });
    ok(client, 'oauth client');
    const pub = await B.call('POST', '/console/api/publishable-keys', { application_id: app.id, origins: ['https://bee.example'] });
    ok(pub, 'publishable key');
    ok(await B.call('PUT', '/console/api/databases/beedb'), 'database');
    ok(await B.call('PUT', '/console/api/databases/beedb/collections/beecol', { mode: 'free' }), 'collection');
    const record = await B.call('POST', '/console/api/databases/beedb/collections/beecol/records', { secret: 'bee-secret-marker' });
    ok(record, 'record');
    const sub = await B.call('POST', `/console/api/workspaces/${ws.id}/subscriptions`, { types: ['bee.thing'], delivery: { mode: 'pull' } });
    ok(sub, 'subscription');
    const values: Record<string, string> = {
      person_id: bee.person.id,
      invitation_id: inv.invitation.id,
      key_id: key.id,
      application_id: app.id,
      client_id: client.body.client_id ?? client.body.client?.client_id ?? client.body.id,
      workspace_id: ws.id,
      database: 'beedb',
      collection: 'beecol',
      id: record.body.id,
      subscription_id: sub.body.subscription_id ?? sub.body.subscription?.subscription_id,
      route_id: 'bee-route',
      profile_id: 'bee-profile',
      collection_id: 'col_' + '0'.repeat(26),
      job_id: 'job_' + '0'.repeat(26),
      sha256: '0'.repeat(64),
      event_id: 'evt_' + '0'.repeat(26),
      passkey_id: 'pk_' + '0'.repeat(26),
    };
    const pubId = pub.body.key?.key_id ?? pub.body.key?.id ?? pub.body.key_id ?? pub.body.id;
    expect(Object.entries({ ...values, pubId }).filter(([, v]) => typeof v !== 'string' || !v)).toEqual([]);
    const routes = console_.filter((r) => r.path.includes('{'));
    // A route naming a parameter this test does not know must be added here (the test fails until then).
    const unknown = [...new Set(routes.flatMap((r) => params(r.path)))].filter((n) => !(n in values));
    expect(unknown).toEqual([]);
    const A = (await signedInPerson(p.engine, consoleUrl, org, 'owner')).browser;
    const leaks = [other.id, bee.email, 'bee-secret-marker', 'bee.example', 'Bee Marker Org', 'bee workspace', 'bee app'];
    // Names that are the organization's own namespace (a database, a model route): the same name is A's own thing.
    const ownNamespace = new Set(['database', 'collection', 'route_id', 'profile_id']);
    // Valid bodies where a body is checked before the id is looked up (so the refusal is the id's).
    const bodies: Record<string, unknown> = {
      'console.people.update': { role: 'viewer' },
      'console.routes.try': { input: 'hi' },
      'console.keys.routes.update': { routes: null },
      'console.keys.limits.update': { rpm: 1 },
      'console.publishable-keys.origins': { origins: ['https://a.example'] },
      'console.applications.update': { capabilities: ['ai.chat'] },
    };
    for (const route of routes) {
      const names = params(route.path);
      const vals = route.path.includes('publishable-keys') ? { ...values, key_id: pubId } : values;
      const res = await A.call(route.method, pathOf(route.path, vals), bodies[route.id] ?? (route.method === 'GET' || route.method === 'DELETE' ? undefined : {}));
      if (names.some((n) => ['person_id', 'invitation_id', 'key_id', 'client_id', 'application_id'].includes(n))) expect(res.status, `${route.id}: ${res.text}`).toBe(404);
      expect(res.status, `${route.id}: ${res.text}`).toBeLessThan(500);
      for (const leak of leaks) expect(res.text, `${route.id} leaked ${leak}`).not.toContain(leak);
      if (!names.some((n) => ownNamespace.has(n))) expect(res.status, `${route.method} ${route.path}: ${res.text}`).toBeGreaterThanOrEqual(400);
    }
    // Lists filtered by another organization's application or workspace: refused or empty, never its things.
    for (const path of [`/console/api/keys?application_id=${app.id}`, `/console/api/applications?workspace_id=${ws.id}`, `/console/api/oauth-clients?application_id=${app.id}`, `/console/api/publishable-keys?application_id=${app.id}`, `/console/api/collections?application_id=${app.id}`, `/console/api/knowledge-jobs?application_id=${app.id}`, `/console/api/activity?limit=100`]) {
      const res = await A.call('GET', path);
      expect(res.status, `${path}: ${res.text}`).toBeLessThan(500);
      for (const leak of [...leaks, key.id, values.client_id, pubId, bee.person.id]) expect(res.text, `${path} leaked ${leak}`).not.toContain(leak);
    }
    // The other organization's things are as they were.
    expect((await B.call('GET', '/console/api/me')).body.person.role).toBe('owner');
    const keys = (await B.call('GET', '/console/api/keys?limit=100')).body.data as { id: string; disabled?: boolean; disabled_at?: string | null }[];
    const beeKey = keys.find((k) => k.id === key.id)!;
    expect(beeKey.disabled ?? !!beeKey.disabled_at).toBe(false);
    expect(((await B.call('GET', '/console/api/invitations?limit=100')).body.data as { id: string }[]).some((i) => i.id === inv.invitation.id)).toBe(true);
    const records = await B.call('GET', '/console/api/databases/beedb/collections/beecol/records');
    expect(JSON.stringify(records.body)).toContain('bee-secret-marker');
    expect(JSON.stringify((await B.call('GET', `/console/api/workspaces/${ws.id}/subscriptions`)).body)).toContain(values.subscription_id);
    expect(JSON.stringify((await B.call('GET', '/console/api/publishable-keys')).body)).toContain('https://bee.example');
  });
});

describe("the pages' file server: path traversal", () => {
  it('never leaves dist: encoded dots and slashes, backslashes, absolute paths, NUL, overlong UTF-8', async () => {
    const name = basename(dist);
    const paths = [
      '/../secret.txt',
      '/..%2fsecret.txt',
      '/..%2f..%2f..%2f..%2fetc%2fpasswd',
      '/%2e%2e/secret.txt',
      '/%2e%2e%2fsecret.txt',
      '/.%2e/.%2e/secret.txt',
      '/assets/..%2f..%2fsecret.txt',
      `/..%2f${name}-secret.txt`,
      '/..\\secret.txt',
      '/..%5csecret.txt',
      '/%5c..%5c..%5csecret.txt',
      '//etc/passwd',
      '/%2fetc%2fpasswd',
      `/${encodeURIComponent(join(root, 'secret.txt'))}`,
      '/secret.txt%00.js',
      '/%c0%ae%c0%ae/secret.txt',
      '/%252e%252e/secret.txt',
      '/assets/../../secret.txt',
      '/console/api/..%2f..%2fsecret.txt',
    ];
    for (const path of paths) {
      const res = await raw(path);
      expect(res.text, path).not.toContain(SECRET);
      expect(res.text, path).not.toMatch(/root:.*:0:0:/);
      expect(res.status, `${path}: ${res.status}`).not.toBe(500);
      expect(res.headers['x-frame-options'], path).toBe('DENY');
    }
    expect((await raw('/assets/app.js')).text).toBe('console.log(1)');
  });
});

describe('huge and malformed input: never a 500, never a stack trace', () => {
  it('bodies: over the route limit, over the gateway limit, broken JSON, wrong shapes, deep nesting, bad UTF-8', async () => {
    const owner = (await signedInPerson(p.engine, consoleUrl, org, 'owner')).browser;
    const bodies: [string, string, string | Buffer][] = [
      ['POST', '/console/api/session', '{"email":'],
      ['POST', '/console/api/session', '[]'],
      ['POST', '/console/api/session', 'null'],
      ['POST', '/console/api/session', '"x"'],
      ['POST', '/console/api/session', '{"email":"a@b.co","password":"' + 'x'.repeat(5000) + '"}'],
      ['POST', '/console/api/session', '{"email":["a@b.co"],"password":{"$gt":""}}'],
      ['POST', '/console/api/session', '{"email":"a@b.co","password":"p","password":"q"}'],
      ['POST', '/console/api/session', Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d])],
      ['POST', '/console/api/invitation/lookup', '['.repeat(600) + ']'.repeat(600)],
      ['POST', '/console/api/keys', '{"application_id":' + '['.repeat(5000) + ']'.repeat(5000) + '}'],
      ['POST', '/console/api/databases/deep/collections/c/records', '{"v":' + '['.repeat(200_000) + ']'.repeat(200_000) + '}'],
      ['PATCH', '/console/api/people/x', '{"role":' + '"x"'.repeat(1) + '}'],
      ['PUT', '/console/api/limits', '{"rpm":1e309}'],
      ['POST', '/console/api/invitations', '{"email":"a@b.co","role":"viewer","expires_in_hours":1e300}'],
    ];
    expect((await owner.call('PUT', '/console/api/databases/deep')).status).toBeLessThan(300);
    expect((await owner.call('PUT', '/console/api/databases/deep/collections/c', { mode: 'free' })).status).toBeLessThan(300);
    for (const [method, path, body] of bodies) {
      const res = await owner.call(method, path, typeof body === 'string' ? body : undefined, {});
      if (typeof body !== 'string') {
        const r = await raw(path, { method, headers: { origin: consoleUrl, 'content-type': 'application/json', cookie: [...owner.cookies].map(([k, v]) => `${k}=${v}`).join('; '), 'x-csrf-token': owner.csrf! }, body });
        expect(r.status, path).toBeGreaterThanOrEqual(400);
        expect(r.status, path).toBeLessThan(500);
        continue;
      }
      expect(res.status, `${path} ${body.slice(0, 40)}: ${res.text}`).toBeGreaterThanOrEqual(400);
      expect(res.status, `${path} ${body.slice(0, 40)}: ${res.text}`).toBeLessThan(500);
      expect(res.text).not.toMatch(NO_STACK);
      expect(res.body?.error?.code, res.text).toEqual(expect.any(String));
    }
    const huge = await raw('/console/api/keys', { method: 'POST', headers: { origin: consoleUrl, 'content-type': 'application/json' }, body: Buffer.alloc(11 * 1024 * 1024, 0x20) });
    expect(huge.status).toBe(413);
    expect(huge.text).not.toMatch(NO_STACK);
  });

  it('cookies: empty, odd bytes, doubled, quoted, huge, prototype names: 401 or 431, never a 500', async () => {
    const owner = (await signedInPerson(p.engine, consoleUrl, org, 'viewer')).browser;
    const live = owner.cookies.get('session')!;
    const headers = [
      'session=',
      'session',
      '=session',
      'session=%zz',
      'session="' + 'A'.repeat(43) + '"',
      `session=${'A'.repeat(43)}`,
      `session=${'A'.repeat(12_000)}`,
      `session=${live.slice(0, 42)}`,
      `session=${live} `.replace(' ', '\u00e9'),
      `__proto__=x; constructor=y; session=${newToken()}`,
      ';;;;;=;=;',
      'session=' + '\u00ff'.repeat(100),
    ];
    for (const cookie of headers) {
      const res = await raw('/console/api/me', { headers: { cookie } });
      expect(res.status, cookie.slice(0, 40)).toBe(401);
      expect(JSON.parse(res.text).error.code).toBe('not_signed_in');
    }
    // The first of a name sent twice is taken (the most specific): a cookie set beside the real one does not replace it.
    expect((await raw('/console/api/me', { headers: { cookie: `session=${live}; session=${newToken()}` } })).status).toBe(200);
    const big = await raw('/console/api/me', { headers: { cookie: `session=${live}; pad=${'x'.repeat(20_000)}` } });
    expect(big.status).toBe(431);
    expect(big.text).not.toMatch(NO_STACK);
    // Odd Origin values: refused as another site's, never a 500.
    for (const origin of ['http://[::1', 'null', ' ', 'http://127.0.0.1:' + '9'.repeat(50), `${consoleUrl}/`, `${consoleUrl}@evil.example`, consoleUrl.toUpperCase()]) {
      const res = await raw('/console/api/session', { method: 'POST', headers: { origin, 'content-type': 'application/json' }, body: '{}' });
      expect(res.status, origin).toBe(403);
    }
  });

  it('prototype-named keys in bodies and queries are unknown fields or plain data; nothing is polluted', async () => {
    const adm = (await signedInPerson(p.engine, consoleUrl, org, 'owner')).browser;
    const cases: [string, string, string][] = [
      ['POST', '/console/api/session', '{"email":"a@b.co","password":"p","__proto__":{"admin":true}}'],
      ['POST', '/console/api/invitations', '{"email":"proto@b.co","role":"viewer","constructor":{"prototype":{"admin":true}}}'],
      ['PUT', '/console/api/features', '{"__proto__":{"vector":false}}'],
      ['PUT', '/console/api/limits', '{"__proto__":{"rpm":1}}'],
      ['PUT', '/console/api/limits', '{"constructor":{"prototype":{"rpm":1}}}'],
      ['POST', '/console/api/keys', '{"__proto__":{"permissions":["*"]}}'],
      ['POST', '/console/api/invitation/lookup', '{"token":"x","__proto__":{"token":"y"}}'],
    ];
    for (const [method, path, body] of cases) {
      const res = await adm.call(method, path, body);
      expect(res.status, `${path} ${body}: ${res.text}`).toBeGreaterThanOrEqual(400);
      expect(res.status, `${path} ${body}: ${res.text}`).toBeLessThan(500);
    }
    for (const q of ['?__proto__=1', '?constructor=x&limit=__proto__', '?cursor=__proto__', '?limit[__proto__]=1']) {
      const res = await adm.call('GET', `/console/api/people${q}`);
      expect(res.status, `${q}: ${res.text}`).toBeLessThan(500);
    }
    const plain = {} as Record<string, unknown>;
    expect(plain.admin).toBeUndefined();
    expect(plain.rpm).toBeUndefined();
    expect(plain.permissions).toBeUndefined();
    expect((await adm.call('GET', '/console/api/limits')).body.limits.rpm ?? null).toBeNull();
  });
});
