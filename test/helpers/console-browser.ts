/**
 * A console browser for API tests: one person's cookie jar on the console's origin, sending the CSRF
 * token on every change as the console's pages do, and people made by invitation (the console
 * domain's own Invitations, then the accept route: a real sign-in through the local server).
 */
import { expect } from 'vitest';
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

/** A new person of `organizationId` with `role`, signed in through their invitation's accept route. */
export async function signedInPerson(engine: Engine, consoleUrl: string, organizationId: string, role: 'viewer' | 'developer' | 'admin' | 'owner') {
  const email = `${role}-${Math.random().toString(36).slice(2)}@example.com`;
  const { token } = await new Invitations(engine.kv, () => engine.clock.now()).create({ organizationId, email, role });
  const browser = new ConsoleBrowser(consoleUrl);
  const res = await browser.call('POST', '/console/api/invitation/accept', { token, password: STRONG_PASSWORD });
  expect(res.status, res.text).toBe(200);
  return { browser, person: res.body.person as { id: string; email: string; role: string }, email };
}

/** The platform's one error shape, with `code` and `param` when given. */
export function expectError(res: ConsoleAnswer, status: number, code?: string, param?: string | null) {
  expect(res.status, res.text).toBe(status);
  expect(res.body?.error, res.text).toEqual({ code: expect.any(String), message: expect.any(String), type: expect.any(String), param: res.body?.error?.param ?? null });
  if (code !== undefined) expect(res.body.error.code, res.text).toBe(code);
  if (param !== undefined) expect(res.body.error.param, res.text).toBe(param);
}
