/**
 * What the console API's handlers share (no handler here): the caller as the console domain's actor,
 * the session cookies, the body and page parsing, and the tenants' errors as the console's answers.
 */
import { isIP } from 'node:net';
import * as z from 'zod/mini';
import type { Engine } from '../../../engine/ports.js';
import { LIST_MAX, TenantError, type ListOptions } from '../../../auth/tenants.js';
import { personPrincipal, type Actor, type Person } from '../../../console/people.js';
import type { NewSession } from '../../../console/sessions.js';
import { PlatformError, type ErrorCode } from '../../../shared/errors.js';
import { parseBody } from '../../../shared/validate.js';
import { checkPublicHost, LOOPBACK_HOSTS, resolveDestination, type LookupFn } from '../../../events/webhook-url.js';
import { settings } from '../../../shared/settings.js';
import { secureCookies } from '../../console-origin.js';
import { CSRF_COOKIE, readCookies, SESSION_COOKIE, sessionCookies } from '../../cookies.js';
import type { HttpRequest, HttpResponse, RequestScope } from '../../types.js';

/** The signed-in person as the domain's actor (the chain's role step ran: a person is there). */
export function actorOf(scope: RequestScope): Actor {
  const person = scope.principal.person!;
  return { id: person.id, organizationId: scope.principal.organizationId, role: person.role };
}

/**
 * The caller's address for the per-address sign-in limit. On AWS the console API sits behind CloudFront:
 * API Gateway's sourceIp is then an edge's address, shared by every viewer of that edge, and 50 failures
 * there would lock everyone's sign-in; CloudFront passes the viewer's in `cloudfront-viewer-address`
 * (`ip:port`). A caller going straight to the execute-api URL could write that header, but the chain's
 * consoleOrigin step refuses any request without CloudFront's origin header (CONSOLE_ORIGIN_VERIFY), so
 * the header reaching here is CloudFront's. Locally no CDN stands in front, and a header is the caller's
 * say-so: the connection's address.
 */
export function signInAddress(req: HttpRequest, engineName: string): string | undefined {
  const viewer = engineName === 'aws' ? req.headers['cloudfront-viewer-address'] : undefined;
  const ip = viewer?.slice(0, Math.max(0, viewer.lastIndexOf(':')));
  return ip && isIP(ip) ? ip : req.sourceIp;
}

/** A base URL as compared: without its trailing slashes. */
const sameUrl = (a: string | null | undefined, b: string | null | undefined) => (a ?? '').replace(/\/+$/, '') === (b ?? '').replace(/\/+$/, '');

/** How long the console waits for a base URL's name to resolve before taking it as one that does not. */
export const BASE_URL_LOOKUP_MS = 3000;

/**
 * Where a person may point a model route or a rerank profile from the console
 * (docs/decisions/console-upstream-destinations.md): "Try it" and the AI API then call that address from
 * inside the platform's network, so a developer must not be able to aim it at loopback, a private
 * network, link-local (the cloud's metadata service) or a local-use name. The webhooks' host rules
 * (events/webhook-url.ts) apply to a `base_url` the console sets or changes; every address its name
 * resolves to now must be public too. A `base_url` the route already has (the operator's, from the
 * admin CLI, which stays free: local models on loopback) is kept as it is. A name that does not resolve
 * (yet) passes: the call will fail. CONSOLE_ALLOW_LOOPBACK_UPSTREAMS (local development) lets
 * 127.0.0.1, [::1] and localhost through. `400 url_destination_blocked` / `invalid_url`, param `base_url`.
 */
export async function checkUpstreamDestination(current: { base_url: string | null } | undefined, wanted: { base_url?: string | null }, lookup?: LookupFn): Promise<void> {
  const raw = wanted.base_url;
  if (typeof raw !== 'string' || sameUrl(raw, current?.base_url)) return;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return; // not a URL: the route's own rules answer invalid_body base_url
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return; // likewise
  const allowLoopback = settings().consoleAllowLoopbackUpstreams === true;
  if (allowLoopback && LOOPBACK_HOSTS.has(url.hostname)) return;
  checkPublicHost(url, { what: 'base_url', param: 'base_url' });
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), BASE_URL_LOOKUP_MS);
  });
  try {
    await Promise.race([resolveDestination(url, { allowLoopback: false, lookup }), late]);
  } catch (error) {
    if (error instanceof PlatformError) throw new PlatformError('url_destination_blocked', "base_url's host resolves to a private, local or reserved address.", 'base_url');
    // Does not resolve: nothing to reach there now.
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The upstream key a route or profile keeps when the console writes it: the one it has when
 * `api_key_env` is left out and the provider and base URL stay (a page that edits a price need not know
 * the key's name; checkUpstreamKey for one that is sent); none when it is sent as null or the route
 * moves.
 */
export function keptUpstreamKey(
  current: { provider: string; base_url: string | null; api_key_env: string | null } | undefined,
  wanted: { provider: string; base_url?: string | null; api_key_env?: string | null },
): string | undefined {
  checkUpstreamKey(current, wanted);
  if (wanted.api_key_env !== undefined) return wanted.api_key_env ?? undefined;
  if (!current?.api_key_env || wanted.provider !== current.provider || !sameUrl(wanted.base_url, current.base_url)) return undefined;
  return current.api_key_env;
}

/**
 * An upstream key (`api_key_env` of a model route or a rerank profile) is named by the platform's operator
 * with the admin CLI: it is an environment variable of the server or a secret of the stack, which a person
 * of an organization must never be able to send to an address of their choosing. From the console a
 * route or profile keeps the key it has only where the operator pointed it (same provider and base URL);
 * naming another key is refused (`403 forbidden`). Leaving `api_key_env` out keeps the key where the
 * route stays (keptUpstreamKey); null drops it.
 */
export function checkUpstreamKey(
  current: { provider: string; base_url: string | null; api_key_env: string | null } | undefined,
  wanted: { provider: string; base_url?: string | null; api_key_env?: string | null },
): void {
  if (wanted.api_key_env === undefined || wanted.api_key_env === null) return;
  if (wanted.api_key_env !== current?.api_key_env) {
    throw new PlatformError('forbidden', "Upstream keys are named by the platform's operator with the admin CLI (`--api-key-env`), not from the console.", 'api_key_env');
  }
  if (wanted.provider !== current.provider || !sameUrl(wanted.base_url, current.base_url)) {
    throw new PlatformError('forbidden', "Something that sends an upstream key keeps its provider and base URL; the platform's operator moves it with the admin CLI.", 'base_url');
  }
}

export const sessionToken = (req: HttpRequest): string | undefined => readCookies(req.headers.cookie)[SESSION_COOKIE];
export const csrfCookie = (req: HttpRequest): string | undefined => readCookies(req.headers.cookie)[CSRF_COOKIE];

/**
 * The answer of a sign-in or an accept: the person, the new session's cookies, and the CSRF token the
 * page sends back. The call is recorded in the activity log under the person it signed in.
 */
export function signedIn(scope: RequestScope, engine: Engine, person: Person, session: NewSession): HttpResponse {
  scope.principal = { ...personPrincipal(person), logIds: scope.logIds };
  const seconds = (session.absoluteMs - engine.clock.now()) / 1000;
  return {
    status: 200,
    body: { person: personView(person), csrf_token: session.csrfToken },
    cookies: sessionCookies(session.token, session.csrfToken, seconds, secureCookies()),
  };
}

export const personView = (p: Person) => ({ id: p.id, email: p.email, role: p.role, created_at: p.created_at });

/** A JSON body by a zod schema (400 unknown_field / invalid_body); a missing body is `{}`. */
export const body = <T extends z.core.$ZodType>(schema: T, req: HttpRequest): z.output<T> => parseBody(schema, req.json ?? {}, { unknownField: 'unknown_field' });

/** `?limit=&cursor=` of a list (1 to 100). */
export function pageOf(req: HttpRequest): ListOptions {
  const { limit, cursor } = req.query;
  if (limit !== undefined && !(/^\d{1,3}$/.test(limit) && Number(limit) >= 1 && Number(limit) <= LIST_MAX)) {
    throw new PlatformError('invalid_query', `limit must be a whole number from 1 to ${LIST_MAX}.`, 'limit');
  }
  return { limit: limit === undefined ? undefined : Number(limit), cursor };
}

/** A tenant rule's refusal as the console's answer: `code` for a missing thing, a bad cursor or limit as 400 invalid_query. */
export async function tenantCall<T>(call: Promise<T>, code: ErrorCode = 'not_found'): Promise<T> {
  try {
    return await call;
  } catch (error) {
    if (!(error instanceof TenantError)) throw error;
    if (/^(cursor|limit)\b/.test(error.message)) throw new PlatformError('invalid_query', error.message, error.message.split(':')[0]);
    if (/^unknown (capabilities|permissions)|permission list/.test(error.message)) throw new PlatformError('invalid_body', error.message, error.message.includes('capabilit') ? 'capabilities' : 'permissions');
    throw new PlatformError(code, error.message.replace(/^no /, 'No ') + '.');
  }
}

export const page = <T>(p: { data: T[]; next_cursor: string | null }) => ({ data: p.data, next_cursor: p.next_cursor });
