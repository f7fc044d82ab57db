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
  /**
   * `json` (default): parsed by the chain. `raw`: the handler reads the bytes itself (forms).
   * `stream`: the handler streams the body (blobs); the local server does not buffer it.
   */
  body?: 'json' | 'raw' | 'stream';
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
  { id: 'data.databases.list', api: 'data', method: 'GET', path: '/v1/databases', handler: 'data/handlers/list-databases', grants: ['table:read'] },
  { id: 'data.databases.put', api: 'data', method: 'PUT', path: '/v1/databases/{database}', handler: 'data/handlers/put-database', grants: ['table:read', 'table:write'] },
  { id: 'data.collections.put', api: 'data', method: 'PUT', path: '/v1/databases/{database}/collections/{collection}', handler: 'data/handlers/put-collection', grants: ['table:read', 'table:write'] },
  { id: 'data.collections.get', api: 'data', method: 'GET', path: '/v1/databases/{database}/collections/{collection}', handler: 'data/handlers/get-collection', grants: ['table:read'] },
  { id: 'data.records.create', api: 'data', method: 'POST', path: '/v1/databases/{database}/collections/{collection}/records', handler: 'data/handlers/create-record', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write'], maxBodyBytes: 1024 * 1024 },
  { id: 'data.records.list', api: 'data', method: 'GET', path: '/v1/databases/{database}/collections/{collection}/records', handler: 'data/handlers/list-records', grants: ['table:read', 'blobs:read'] },
  { id: 'data.records.get', api: 'data', method: 'GET', path: '/v1/databases/{database}/collections/{collection}/records/{id}', handler: 'data/handlers/get-record', grants: ['table:read', 'blobs:read'] },
  { id: 'data.records.update', api: 'data', method: 'PATCH', path: '/v1/databases/{database}/collections/{collection}/records/{id}', handler: 'data/handlers/update-record', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write'], maxBodyBytes: 1024 * 1024 },
  { id: 'data.records.delete', api: 'data', method: 'DELETE', path: '/v1/databases/{database}/collections/{collection}/records/{id}', handler: 'data/handlers/delete-record', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write'] },
  { id: 'data.batch', api: 'data', method: 'POST', path: '/v1/databases/{database}/batch', handler: 'data/handlers/batch', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write'], maxBodyBytes: 5 * 1024 * 1024 },
  { id: 'data.blobs.put', api: 'data', method: 'PUT', path: '/v1/databases/{database}/blobs/{sha256}', handler: 'data/handlers/put-blob', grants: ['table:read', 'table:write', 'blobs:write'], body: 'stream', maxBodyBytes: 100 * 1024 * 1024 },
  { id: 'data.blobs.get', api: 'data', method: 'GET', path: '/v1/databases/{database}/blobs/{sha256}', handler: 'data/handlers/get-blob', grants: ['table:read', 'table:write', 'blobs:read'] },
  { id: 'data.blobs.head', api: 'data', method: 'HEAD', path: '/v1/databases/{database}/blobs/{sha256}', handler: 'data/handlers/head-blob', grants: ['table:read', 'table:write', 'blobs:read'] },
  { id: 'data.blobs.delete', api: 'data', method: 'DELETE', path: '/v1/databases/{database}/blobs/{sha256}', handler: 'data/handlers/delete-blob', grants: ['table:read', 'table:write', 'blobs:write'] },
  { id: 'data.uploads.create', api: 'data', method: 'POST', path: '/v1/databases/{database}/blobs/{sha256}/uploads', handler: 'data/handlers/create-upload', grants: ['table:read', 'table:write', 'blobs:write'] },
  { id: 'data.uploads.part', api: 'data', method: 'PUT', path: '/v1/databases/{database}/blobs/{sha256}/uploads/{upload_id}/parts/{n}', handler: 'data/handlers/put-upload-part', grants: ['table:read', 'blobs:write'], body: 'stream', maxBodyBytes: 100 * 1024 * 1024 },
  { id: 'data.uploads.complete', api: 'data', method: 'POST', path: '/v1/databases/{database}/blobs/{sha256}/uploads/{upload_id}/complete', handler: 'data/handlers/complete-upload', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write'], maxBodyBytes: 1024 * 1024 },
  { id: 'data.uploads.abort', api: 'data', method: 'DELETE', path: '/v1/databases/{database}/blobs/{sha256}/uploads/{upload_id}', handler: 'data/handlers/abort-upload', grants: ['table:read', 'blobs:write'] },
  { id: 'data.activity.list', api: 'data', method: 'GET', path: '/v1/activity', handler: 'data/handlers/list-activity', grants: ['table:read'] },
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
