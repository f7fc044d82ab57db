/**
 * The console API's chain steps (docs/decisions/console-sessions.md):
 * - personSession(): the `session` cookie to a principal of kind `person` (organization-wide, the
 *   person's id as credential id), else `401 not_signed_in`; a disabled organization's session ends
 *   with `403 organization_disabled`;
 * - csrf(): a state-changing call must come from the console's origin (`Origin`), and with a session
 *   carry the session's token in `x-csrf-token` and the `csrf` cookie alike (double submit, bound to the
 *   session); else `403 csrf_failed`;
 * - role(): the person's role reaches the route's, else `403 role_forbidden`;
 * - throughConsoleOrigin(): on AWS, the request came through the console's CloudFront distribution
 *   (its origin header, CONSOLE_ORIGIN_VERIFY), else `403 forbidden`.
 */
import { timingSafeEqual } from 'node:crypto';
import { requireRole, type Role } from '../../console/roles.js';
import { Sessions } from '../../console/sessions.js';
import { personPrincipal } from '../../console/people.js';
import { PlatformError } from '../../shared/errors.js';
import { CONSOLE_ORIGIN_HEADER } from '../../shared/console-headers.js';
import { settings } from '../../shared/settings.js';
import { isConsoleOrigin } from '../console-origin.js';
import { CSRF_COOKIE, readCookies, SESSION_COOKIE } from '../cookies.js';
import type { Middleware } from '../types.js';

export const notSignedIn = (message = 'Sign in to the console first.') => new PlatformError('not_signed_in', message);
const csrfFailed = (message: string) => new PlatformError('csrf_failed', message);

export function personSession(): Middleware {
  return {
    before: async ({ context }) => {
      const { req, engine } = context.platform;
      const token = readCookies(req.headers.cookie)[SESSION_COOKIE];
      if (!token) throw notSignedIn();
      const resolved = await new Sessions(engine!.kv, () => engine!.clock.now(), settings().credentialCacheMs).resolve(token);
      if (resolved === 'organization_disabled') throw new PlatformError('organization_disabled', 'The organization is disabled; its sessions have ended.');
      if (!resolved) throw notSignedIn('Your session has ended; sign in again.');
      // A copy naming the request (Principal.logIds), as the other credentials' step makes.
      context.platform.principal = { ...personPrincipal(resolved.person), logIds: context.platform.logIds };
      context.platform.session = { hash: resolved.hash, csrfToken: resolved.csrfToken };
    },
  };
}

const same = (a: string, b: string) => {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
};

/**
 * A console API request must carry the header CloudFront adds at the console API's origin, when the
 * setting is there (the stack sets it; the local server, with no CDN in front, does not): a caller going
 * straight to the execute-api URL could otherwise write `cloudfront-viewer-address` and dodge the
 * per-address sign-in limit. Refused as the one `403 forbidden`, before the session is looked up, so a
 * direct caller learns nothing about sessions or routes. Read per request (cheap): tests may change it.
 */
export function throughConsoleOrigin(): Middleware {
  return {
    before: ({ context }) => {
      const expected = settings().consoleOriginVerify;
      if (expected === undefined) return;
      const given = context.platform.req.headers[CONSOLE_ORIGIN_HEADER];
      if (given === undefined || !same(given, expected)) throw new PlatformError('forbidden', "The console API is served through the console's own address only.");
    },
  };
}

export function csrf(options: { session: boolean }): Middleware {
  return {
    before: ({ context }) => {
      const { req, session } = context.platform;
      if (!isConsoleOrigin(req.headers.origin)) throw csrfFailed("A change must come from the console's own pages (the Origin header is missing or another site's).");
      if (!options.session) return;
      const header = req.headers['x-csrf-token'];
      const cookie = readCookies(req.headers.cookie)[CSRF_COOKIE];
      if (!header || !cookie || !session || !same(header, cookie) || !same(header, session.csrfToken)) {
        throw csrfFailed('The x-csrf-token header must equal the csrf cookie of this session.');
      }
    },
  };
}

export function role(options: { role: Role }): Middleware {
  return {
    before: ({ context }) => {
      const person = context.platform.principal?.person;
      if (!person) throw notSignedIn();
      requireRole(person.role, options.role);
    },
  };
}
