/**
 * The one route table. It drives the CDK stack (one Lambda function per route) and the local router.
 * Adding a route is one line here plus its handler module, which exports `handler`.
 */

export type Api = 'ai' | 'data' | 'events';
export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
export type Capability = 'ai.chat' | 'ai.embeddings' | 'knowledge' | 'decision';

/** What a route's function may touch; the stack turns each grant into the narrowest IAM policy. */
export type Grant = 'table:read' | 'table:write' | 'blobs:read' | 'blobs:write' | 'queue:send' | 'connections:post';

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
}

export const ROUTES: readonly RouteDef[] = [
  { id: 'ai.models.list', api: 'ai', method: 'GET', path: '/v1/models', handler: 'ai/handlers/list-models', grants: ['table:read'] },
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
