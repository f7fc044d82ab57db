/**
 * The middleware chain as data: what each API adds (API_POLICIES) and, step by step, which routes a
 * step applies to and with which options (CHAIN_STEPS). httpHandler() assembles a route's chain from
 * these once, at cold start; a step that does not apply costs the route nothing.
 */
import type { RouteApi } from '../shared/api.js';
import { tooLargeCode } from '../shared/errors.js';
import { settings } from '../shared/settings.js';
import { acceptedCredentials, countsCalls, type RouteDef } from './routes.js';
import type { Middleware } from './types.js';
import { activity } from './middleware/activity.js';
import { credentials } from './middleware/credentials.js';
import { csrf, personSession, role, throughConsoleOrigin } from './middleware/console-session.js';
import { permission, workspace } from './middleware/events-access.js';
import { DEFAULT_MAX_BODY_BYTES, jsonBody } from './middleware/json-body.js';
import { featureSwitch } from './middleware/feature-switch.js';
import { operationIdRequired } from './middleware/operation-id.js';
import { rateLimit } from './middleware/rate-limit.js';
import { respond } from './middleware/respond.js';
import { streamBody } from './middleware/stream-body.js';

export interface ApiPolicy {
  /** Browsers may call (Data, Events): CORS headers on answers, the browser credential rules. */
  browsers: boolean;
  /** AI: every answer carries `x-operation-id`, writes require one (spec 4.1). */
  operationIds: boolean;
  /** Calls a minute per credential, read from the settings at cold start; 0 is no limit. */
  rateLimitPerMinute: () => number;
  /** Events: a publishable key is told it may only open a stream. */
  publishableKeyOnlyStreams: boolean;
  /** Data: the path's database, collection and record go into the activity record. */
  activityRelatedFromPath: boolean;
  /**
   * The console: answers carry the console's security headers (CSP, frame-ancestors), its routes are
   * read with a session cookie, and state-changing ones pass the CSRF step.
   */
  console: boolean;
}

export const API_POLICIES: Record<RouteApi, ApiPolicy> = {
  // The AI API's limits belong to its routes and quotas, not to a per-credential call rate.
  ai: { browsers: false, operationIds: true, rateLimitPerMinute: () => 0, publishableKeyOnlyStreams: false, activityRelatedFromPath: false, console: false },
  data: { browsers: true, operationIds: false, rateLimitPerMinute: () => settings().dataRateLimitPerMinute, publishableKeyOnlyStreams: false, activityRelatedFromPath: true, console: false },
  events: { browsers: true, operationIds: false, rateLimitPerMinute: () => settings().eventsRateLimitPerMinute, publishableKeyOnlyStreams: true, activityRelatedFromPath: false, console: false },
  // Same-origin pages only: no CORS; sign-in has limits of its own (console/sign-in-limits.ts).
  console: { browsers: false, operationIds: false, rateLimitPerMinute: () => 0, publishableKeyOnlyStreams: false, activityRelatedFromPath: false, console: true },
};

export interface ChainStep {
  name: string;
  /** The step's middleware for a route, or undefined where it does not apply. */
  build(route: RouteDef, policy: ApiPolicy): Middleware | undefined;
}

const credentialed = (route: RouteDef) => acceptedCredentials(route) !== 'none';
/** Methods that change nothing; a console route of any other method passes the CSRF step (but the fallback, which answers 404 to all). */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The path parameter naming a workspace (every Events route but the token exchange and the fallbacks). */
export const WORKSPACE_PARAM = 'workspace_id';
/** Whether a route's path names a workspace: the chain then checks it and hands it to the handler. */
export const scopedToWorkspace = (route: RouteDef): boolean => route.path.includes(`{${WORKSPACE_PARAM}}`);
const bodyLimit = (route: RouteDef) => ({ maxBytes: route.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES, tooLargeCode: tooLargeCode(route.api), maxDepth: route.maxJsonDepth });

/**
 * In order. activity() comes first so that its after/onError run last and see the final answer;
 * respond() next, so its onError sees every later step's error (middy runs every onError).
 */
export const CHAIN_STEPS: readonly ChainStep[] = [
  // A console call without a session (sign-in, an invitation's accept) is recorded too once its handler
  // names the person it signed in; a refused one names nobody and is not.
  {
    name: 'activity',
    build: (route, policy) =>
      activity({ credentialed: credentialed(route) || policy.console, relatedFromPath: policy.activityRelatedFromPath, resolveAgain: !policy.console }),
  },
  { name: 'respond', build: (route, policy) => respond({ cors: policy.browsers, console: policy.console, openAiRetries: route.operationIds === 'optional' }) },
  // First of the console's checks: a call that did not come through the console's distribution (AWS) is refused before anything is looked up.
  { name: 'consoleOrigin', build: (_route, policy) => (policy.console ? throughConsoleOrigin() : undefined) },
  {
    name: 'credentials',
    build: (route, policy) => {
      const accepted = acceptedCredentials(route);
      if (accepted === 'none') return undefined;
      if (accepted.includes('person')) {
        if (accepted.length !== 1 || !policy.console) throw new Error(`route ${route.id}: a person's session is the console API's only credential`);
        return personSession();
      }
      return credentials({
        accepted,
        capability: route.capability,
        browsers: policy.browsers,
        publishableKeyOnlyStreams: policy.publishableKeyOnlyStreams,
        tenantHeaders: !policy.browsers,
      });
    },
  },
  // After the session (401 first), before the role (a forged call learns nothing about roles): every
  // state-changing console call comes from the console's origin, and with a session carries its token.
  { name: 'csrf', build: (route, policy) => (policy.console && route.method !== 'ANY' && !SAFE_METHODS.has(route.method) ? csrf({ session: credentialed(route) }) : undefined) },
  {
    name: 'role',
    build: (route) => {
      if (route.api !== 'console' || !credentialed(route)) return undefined;
      if (!route.role) throw new Error(`route ${route.id}: a console route read with a session needs a role`);
      return role({ role: route.role });
    },
  },
  {
    name: 'rateLimit',
    build: (route, policy) => {
      const perMinute = policy.rateLimitPerMinute();
      return perMinute > 0 && countsCalls(route) ? rateLimit({ perMinute, scope: route.api }) : undefined;
    },
  },
  // The fallback has no operation to name, and the token exchange is plain OAuth: clients send no id.
  // After credentials (401 first) and the rate limit (so probing workspaces costs calls), before any
  // body is read: neither 403 depends on the body. Every Events workspace route must name its
  // permission; one that does not stops at cold start rather than serving without the check.
  {
    name: 'permission',
    build: (route) => {
      if (!credentialed(route)) return undefined;
      if (route.permission) return permission({ permission: route.permission });
      if (route.api === 'events' && scopedToWorkspace(route)) throw new Error(`route ${route.id}: an Events workspace route needs a permission`);
      return undefined;
    },
  },
  { name: 'workspace', build: (route) => (credentialed(route) && scopedToWorkspace(route) ? workspace({ param: WORKSPACE_PARAM }) : undefined) },
  // A switched-off feature's routes: after the credential, before the operation id and the body.
  { name: 'featureSwitch', build: (route) => (route.feature && credentialed(route) ? featureSwitch({ feature: route.feature }) : undefined) },
  { name: 'operationId', build: (route, policy) => (policy.operationIds && route.method !== 'ANY' && credentialed(route) ? operationIdRequired({ optional: route.operationIds === 'optional' }) : undefined) },
  { name: 'jsonBody', build: (route) => ((route.body ?? 'json') === 'json' ? jsonBody(bodyLimit(route)) : undefined) },
  { name: 'streamBody', build: (route) => (route.body === 'stream' ? streamBody(bodyLimit(route)) : undefined) },
];

/** A route's middlewares, in chain order, with the names of the steps that apply (for tests and docs). */
export function chainFor(route: RouteDef): { names: string[]; middlewares: Middleware[] } {
  const policy = API_POLICIES[route.api];
  const names: string[] = [];
  const middlewares: Middleware[] = [];
  for (const step of CHAIN_STEPS) {
    const middleware = step.build(route, policy);
    if (!middleware) continue;
    names.push(step.name);
    middlewares.push(middleware);
  }
  return { names, middlewares };
}
