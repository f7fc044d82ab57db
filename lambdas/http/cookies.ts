/**
 * The console's cookies (docs/decisions/console-sessions.md): `session` (HttpOnly) holds the session
 * token, `csrf` (readable by the page) the double-submit token the page echoes in `x-csrf-token`.
 * Both SameSite=Strict, Path=/, host-only (no Domain), Secure unless the console is served over plain
 * http on a loopback address (the local server), where a browser would drop a Secure cookie.
 */
export const SESSION_COOKIE = 'session';
export const CSRF_COOKIE = 'csrf';

/** The cookies of a Cookie header; of a name sent twice, the first (the most specific, RFC 6265 5.4). */
export function readCookies(header: string | undefined): Record<string, string> {
  const cookies: Record<string, string> = Object.create(null);
  if (!header) return cookies;
  for (const part of header.split(/;\s*/)) {
    const eq = part.indexOf('=');
    if (eq <= 0) continue;
    const name = part.slice(0, eq).trim();
    if (!Object.hasOwn(cookies, name)) cookies[name] = part.slice(eq + 1).trim();
  }
  return cookies;
}

const attributes = (secure: boolean, maxAgeSeconds: number, httpOnly: boolean) =>
  [`Path=/`, `Max-Age=${maxAgeSeconds}`, 'SameSite=Strict', ...(httpOnly ? ['HttpOnly'] : []), ...(secure ? ['Secure'] : [])].join('; ');

/** The Set-Cookie values of a new session, living until its absolute end. */
export function sessionCookies(token: string, csrfToken: string, maxAgeSeconds: number, secure: boolean): string[] {
  const age = Math.max(1, Math.floor(maxAgeSeconds));
  return [`${SESSION_COOKIE}=${token}; ${attributes(secure, age, true)}`, `${CSRF_COOKIE}=${csrfToken}; ${attributes(secure, age, false)}`];
}

/** The Set-Cookie values that clear both (sign-out, an ended session). */
export function clearedCookies(secure: boolean): string[] {
  return [`${SESSION_COOKIE}=; ${attributes(secure, 0, true)}`, `${CSRF_COOKIE}=; ${attributes(secure, 0, false)}`];
}
