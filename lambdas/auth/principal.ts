import type { Permission } from './permissions.js';
import type { LogContext } from '../shared/log.js';

/** What an application may enable (spec 4.1); a route needing one names it in the route table. */
export type Capability = 'ai.chat' | 'ai.embeddings' | 'knowledge' | 'decision';
/**
 * The four credentials of spec section 5, and the console's: a person of the organization signed in
 * with a session cookie (issue 37; only the console API takes it).
 */
export type CredentialKind = 'secret_key' | 'oauth_client' | 'publishable_key' | 'end_user' | 'person';

/** A console principal's person (roles: lambdas/console/roles.ts). */
export interface PrincipalPerson {
  id: string;
  email: string;
  role: 'viewer' | 'developer' | 'admin' | 'owner';
}

/** Who is calling, resolved from the credential alone (spec section 1: the tenant comes only from it). */
export interface Principal {
  kind: CredentialKind;
  /** Id of the credential: key id, OAuth client id, publishable key id, the end-user token's `sub`, or the person's id. */
  credentialId: string;
  organizationId: string;
  /** Set for an application-bound credential (always for OAuth, publishable and end-user credentials). */
  applicationId: string | null;
  /** The bound application's workspace. */
  workspaceId: string | null;
  /** The bound application's capabilities; null for an organization-wide credential. */
  capabilities: Capability[] | null;
  /** End-user tokens: the application's user id (`@auth.id` in collection rules). */
  userId: string | null;
  /** End-user tokens: the application's extra claims. */
  claims: Record<string, unknown> | null;
  /** Publishable keys: the origins the key may be used from. */
  origins: string[] | null;
  /**
   * Events permissions (docs/events/permissions.md). null: all of them (a secret key or OAuth client
   * not narrowed). A narrowed key or client: its stored list. A publishable key: only
   * `events:stream.open`. An end-user token: none (Events refuses it anyway).
   */
  permissions: readonly Permission[] | null;
  /** The console's person (kind `person`): organization-wide, no application. */
  person?: PrincipalPerson;
  /**
   * Set on the copy the chain hands a request's code (never on a cached or stored credential): the
   * request's log ids, so that every activity record made with this principal names its request
   * without an AsyncLocalStorage (docs/decisions/request-logs.md).
   */
  logIds?: Readonly<LogContext>;
}

/** An organization-wide caller of `kind` (no application, workspace, capabilities or narrowing): a console person, the operator. */
export const organizationWidePrincipal = (kind: CredentialKind, credentialId: string, organizationId: string): Principal => ({
  kind,
  credentialId,
  organizationId,
  applicationId: null,
  workspaceId: null,
  capabilities: null,
  userId: null,
  claims: null,
  origins: null,
  permissions: null,
});

/** The principal to keep with what is done later for it (a queued item, a file's arrival): without a request's log ids. */
export function storedPrincipal(principal: Principal): Principal {
  const { logIds: _ids, ...stored } = principal;
  return stored;
}

/**
 * Secret keys and OAuth client tokens are server credentials: they may change schemas and never come
 * from a browser. A console person acts organization-wide like a secret key on the domain services,
 * limited only by their role in the console's chain (the `role` step; docs/console.md).
 */
export const isServerCredential = (p: Principal) => p.kind === 'secret_key' || p.kind === 'oauth_client' || p.kind === 'person';
