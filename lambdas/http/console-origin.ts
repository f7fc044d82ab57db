/**
 * The console's own origin: what a state-changing console call's `Origin` must be (the CSRF step),
 * the base of invitation links, and whether its cookies are Secure. CONSOLE_URL when set (the
 * deployed console's address); else the local server's own, once it listens (a port the OS picked
 * included), else `http://127.0.0.1:<CONSOLE_PORT>`.
 */
import { settings } from '../shared/settings.js';
import { configuredConsoleUrl } from '../console/invitations.js';

let served: string | undefined;

/** The local server tells where it serves the console, once listening. */
export function serveConsoleAt(url: string | undefined): void {
  served = url;
}

export function consoleUrl(): string {
  return settings().consoleUrl === undefined && served ? served : configuredConsoleUrl();
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

const isLoopbackHttp = (url: URL) => url.protocol === 'http:' && LOOPBACK.has(url.hostname);

/**
 * Whether `origin` (a request's Origin header) is the console's. On a loopback console the other
 * loopback names of the same port count too (`localhost:8084` for `127.0.0.1:8084`): no other site can
 * be reached under them.
 */
export function isConsoleOrigin(origin: string | undefined): boolean {
  if (!origin) return false;
  const own = new URL(consoleUrl());
  if (origin === own.origin) return true;
  let sent: URL;
  try {
    sent = new URL(origin);
  } catch {
    return false;
  }
  return isLoopbackHttp(own) && isLoopbackHttp(sent) && sent.port === own.port && sent.origin === origin;
}

/** Cookies are Secure unless the console is plain http on a loopback address. */
export const secureCookies = (): boolean => !isLoopbackHttp(new URL(consoleUrl()));
