/**
 * A console browser for API tests: one person's cookie jar on the console's origin, sending the CSRF
 * token on every change as the console's pages do, and people made by invitation (the console
 * domain's own Invitations, then the accept route: a real sign-in through the local server); the
 * error checks; for the Chromium tests, a page's heading and its axe-core violations.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';
import { expect } from 'vitest';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { Invitations } from '../../lambdas/console/invitations.js';
import type { Engine } from '../../lambdas/engine/ports.js';

export const STRONG_PASSWORD = 'correct horse battery staple 42';

export interface ConsoleAnswer {
  status: number;
  headers: Headers;
  body: any;
  text: string;
}

export class ConsoleBrowser {
  readonly cookies = new Map<string, string>();
  /** The Origin header sent (null: none). */
  origin: string | null;

  constructor(readonly consoleUrl: string) {
    this.origin = consoleUrl;
  }

  get csrf(): string | undefined {
    return this.cookies.get('csrf');
  }

  async call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<ConsoleAnswer> {
    const h: Record<string, string> = this.origin ? { origin: this.origin } : {};
    if (this.cookies.size) h.cookie = [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
    if (method !== 'GET' && this.csrf) h['x-csrf-token'] = this.csrf;
    if (body !== undefined) h['content-type'] = 'application/json';
    const res = await fetch(`${this.consoleUrl}${path}`, { method, headers: { ...h, ...headers }, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body), redirect: 'manual' });
    for (const cookie of res.headers.getSetCookie()) {
      const [pair] = cookie.split(';');
      const eq = pair.indexOf('=');
      const [name, value] = [pair.slice(0, eq), pair.slice(eq + 1)];
      if (value) this.cookies.set(name, value);
      else this.cookies.delete(name);
    }
    const text = await res.text();
    let parsed: unknown;
    try {
      parsed = text && (res.headers.get('content-type') ?? '').includes('json') ? JSON.parse(text) : undefined;
    } catch {
      parsed = undefined;
    }
    return { status: res.status, headers: res.headers, body: parsed, text };
  }
}

type Role = 'viewer' | 'developer' | 'admin' | 'owner';

/** An invitation as the admin CLI's `org invite` makes it (the same domain function): its token. */
export async function invitationToken(engine: Engine, organizationId: string, email: string, role: Role): Promise<string> {
  const { token } = await new Invitations(engine.kv, () => engine.clock.now()).create({ organizationId, email, role });
  return token;
}

/**
 * Accepts invitation `token` with `password` in a new browser (its Origin `origin`, by default the
 * console's own): the person, signed in.
 */
export async function acceptInvitation(consoleUrl: string, token: string, { origin = consoleUrl, password = STRONG_PASSWORD } = {}) {
  const browser = new ConsoleBrowser(consoleUrl);
  browser.origin = origin;
  const res = await browser.call('POST', '/console/api/invitation/accept', { token, password });
  expect(res.status, res.text).toBe(200);
  return { browser, person: res.body.person as { id: string; email: string; role: string } };
}

/** A new person of `organizationId` with `role`, signed in through their invitation's accept route. */
export async function signedInPerson(engine: Engine, consoleUrl: string, organizationId: string, role: Role) {
  const email = `${role}-${Math.random().toString(36).slice(2)}@example.com`;
  return { ...(await acceptInvitation(consoleUrl, await invitationToken(engine, organizationId, email, role))), email };
}

/**
 * Another organization ("Other") with a workspace ("theirs") and its owner signed in: the stranger every
 * console test's cross-tenant cases use.
 */
export async function strangerOwner(engine: Engine, consoleUrl: string) {
  const tenants = new Tenants(engine.kv, () => engine.clock.now());
  const organization = await tenants.createOrganization('Other');
  const workspace = await tenants.createWorkspace(organization.id, 'theirs');
  return { organizationId: organization.id, workspaceId: workspace.id, browser: (await signedInPerson(engine, consoleUrl, organization.id, 'owner')).browser };
}

/** The platform's one error shape, with `code` and `param` when given. */
export function expectError(res: ConsoleAnswer, status: number, code?: string, param?: string | null) {
  expect(res.status, res.text).toBe(status);
  expect(res.body?.error, res.text).toEqual({ code: expect.any(String), message: expect.any(String), type: expect.any(String), param: res.body?.error?.param ?? null });
  if (code !== undefined) expect(res.body.error.code, res.text).toBe(code);
  if (param !== undefined) expect(res.body.error.param, res.text).toBe(param);
}

/** The platform's one error shape, exactly: `param` null unless named. */
export function expectExactError(res: { status: number; body: any }, status: number, code: string, param: string | null = null) {
  expect(res.status, JSON.stringify(res.body)).toBe(status);
  expect(res.body).toEqual({ error: { code, message: expect.any(String), type: expect.any(String), param } });
}

/** A page's level-1 heading (each console page has one). */
export const heading = (page: Page, name: string) => page.getByRole('heading', { level: 1, name, exact: true });

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * axe-core's serious and critical violations on the page as it is, one line each. The engine is
 * evaluated through the DevTools protocol, which the console's CSP (script-src 'self') does not govern.
 */
export async function axeViolations(page: Page): Promise<string[]> {
  await page.evaluate(AXE_SOURCE);
  return page.evaluate(`axe.run(document).then((r) => r.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => v.impact + ' ' + v.id + ': ' + v.help + ' [' + v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(' | ') + ']'))`);
}
