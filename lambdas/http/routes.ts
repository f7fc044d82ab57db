/**
 * The one route table. It drives the CDK stack (one Lambda function per route) and the local router.
 * Adding a route is one line here plus its handler module, which exports `handler`.
 */

export type Api = 'ai' | 'data' | 'events';
export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';
export type Capability = 'ai.chat' | 'ai.embeddings' | 'knowledge' | 'decision';
/** The four credentials of spec section 5. */
export type CredentialKind = 'secret_key' | 'oauth_client' | 'publishable_key' | 'end_user';

/** What a route's function may touch; the stack turns each grant into the narrowest IAM policy. */
export type Grant = 'table:read' | 'table:write' | 'blobs:read' | 'blobs:write' | 'queue:send' | 'connections:post' | 'signing:sign';

export interface RouteDef {
  /** Stable id: `<api>.<resource>.<action>`. Names the function in the stack. */
  id: string;
  api: Api;
  /** `ANY` with path `$default` is the API's fallback: it authenticates, then answers 404. */
  method: HttpMethod | 'ANY';
  /** API Gateway path syntax: `/v1/databases/{database}`. */
  path: string;
  /** Module under `lambdas/` (no extension) exporting `handler`. */
  handler: string;
  /** An application-bound credential needs this capability (spec 4.1). */
  capability?: Capability;
  grants: Grant[];
  /** Largest accepted request body in bytes (API Gateway's own ceiling is 10 MiB). */
  maxBodyBytes?: number;
  /**
   * `none`: no credential is read (CORS preflight, the OAuth token exchange). Otherwise the
   * credentials the route accepts; the default is the API's (see ACCEPTED_BY_DEFAULT).
   */
  credentials?: 'none' | readonly CredentialKind[];
  /** `raw`: the handler reads the body itself (forms, blobs); default `json`. */
  body?: 'json' | 'raw';
}

/** Spec section 5's table: which credentials each API accepts on its routes. */
export const ACCEPTED_BY_DEFAULT: Record<Api, readonly CredentialKind[]> = {
  ai: ['secret_key', 'oauth_client'],
  data: ['secret_key', 'oauth_client', 'publishable_key', 'end_user'],
  events: ['secret_key', 'oauth_client'],
};

export const acceptedCredentials = (route: RouteDef): readonly CredentialKind[] | 'none' =>
  route.credentials ?? ACCEPTED_BY_DEFAULT[route.api];

export const ROUTES: readonly RouteDef[] = [
  { id: 'ai.models.list', api: 'ai', method: 'GET', path: '/v1/models', handler: 'ai/handlers/list-models', grants: ['table:read'] },
  { id: 'ai.oauth.token', api: 'ai', method: 'POST', path: '/v1/oauth/token', handler: 'ai/handlers/oauth-token', grants: ['table:read', 'signing:sign'], credentials: 'none', body: 'raw', maxBodyBytes: 16 * 1024 },
  { id: 'data.oauth.token', api: 'data', method: 'POST', path: '/v1/oauth/token', handler: 'data/handlers/oauth-token', grants: ['table:read', 'signing:sign'], credentials: 'none', body: 'raw', maxBodyBytes: 16 * 1024 },
  { id: 'events.oauth.token', api: 'events', method: 'POST', path: '/v1/oauth/token', handler: 'events/handlers/oauth-token', grants: ['table:read', 'signing:sign'], credentials: 'none', body: 'raw', maxBodyBytes: 16 * 1024 },
  { id: 'data.end_user_tokens.create', api: 'data', method: 'POST', path: '/v1/end-user-tokens', handler: 'data/handlers/create-end-user-token', grants: ['table:read', 'signing:sign'], credentials: ['secret_key', 'oauth_client'], maxBodyBytes: 16 * 1024 },
  { id: 'data.preflight', api: 'data', method: 'OPTIONS', path: '/{proxy+}', handler: 'data/handlers/preflight', grants: ['table:read'], credentials: 'none' },
  { id: 'events.preflight', api: 'events', method: 'OPTIONS', path: '/{proxy+}', handler: 'events/handlers/preflight', grants: ['table:read'], credentials: 'none' },
  { id: 'ai.fallback', api: 'ai', method: 'ANY', path: '$default', handler: 'ai/handlers/not-found', grants: ['table:read'] },
  { id: 'data.fallback', api: 'data', method: 'ANY', path: '$default', handler: 'data/handlers/not-found', grants: ['table:read'] },
  { id: 'events.fallback', api: 'events', method: 'ANY', path: '$default', handler: 'events/handlers/not-found', grants: ['table:read'] },
];

const byId = new Map(ROUTES.map((r) => [r.id, r]));

export function routeById(id: string): RouteDef {
  const route = byId.get(id);
  if (!route) throw new Error(`no route ${id} in the route table`);
  return route;
}

/** Routes of the Events WebSocket API ($connect, $default, $disconnect), one function for all three. */
export interface SocketRouteDef {
  id: string;
  routeKeys: readonly string[];
  handler: string;
  grants: Grant[];
}

export const SOCKET_ROUTES: readonly SocketRouteDef[] = [
  { id: 'events.stream.socket', routeKeys: ['$connect', '$default', '$disconnect'], handler: 'events/handlers/stream-socket', grants: ['table:read', 'table:write', 'connections:post'] },
];
