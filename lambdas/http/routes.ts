/**
 * The one route table. It drives the CDK stack (one Lambda function per route) and the local router.
 * Adding a route is one line here plus its handler module, which exports `handler`.
 */

import type { Permission } from '../auth/permissions.js';
import type { Capability, CredentialKind } from '../auth/principal.js';
import type { RouteApi } from '../shared/api.js';
import type { Role } from '../console/roles.js';
import type { Feature } from '../ai/org-settings.js';

export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'PATCH' | 'DELETE' | 'OPTIONS';

/** What a route's function may touch; the stack turns each grant into the narrowest IAM policy. */
/**
 * What a route's function may touch. `connections:post` posts to and closes WebSocket connections;
 * `connections:table` reads and writes the connection table (what each connection serves);
 * `upstream-keys:read` reads model routes' upstream API keys.
 */
export type Grant =
  | 'table:read'
  | 'table:write'
  | 'blobs:read'
  | 'blobs:write'
  | 'queue:send'
  | 'connections:post'
  | 'connections:table'
  | 'signing:sign'
  | 'secret:read'
  /** Model routes' upstream API keys (Secrets Manager secrets under UPSTREAM_KEY_PREFIX, lib/upstream-grants.ts). */
  | 'upstream-keys:read'
  /** The vector bucket's indexes (S3 Vectors, lib/vector-bucket.ts): query them; write them, and make and remove them. */
  | 'vectors:read'
  | 'vectors:write'
  /** Bedrock's Rerank API, for rerank profiles of provider `bedrock` (openai-compatible ones need only `upstream-keys:read`). */
  | 'rerankers:call'
  /** Runs ffprobe and ffmpeg (FFMPEG_PATH): on AWS the function gets the ffmpeg layer (lib/ffmpeg-layer.ts). */
  | 'ffmpeg:run';

export interface RouteDef {
  /** Stable id: `<api>.<resource>.<action>`. Names the function in the stack. */
  id: string;
  api: RouteApi;
  /** `ANY` with path `$default` is the API's fallback: it authenticates, then answers 404. */
  method: HttpMethod | 'ANY';
  /** API Gateway path syntax: `/v1/databases/{database}`. */
  path: string;
  /** Module under `lambdas/` (no extension) exporting `handler`. */
  handler: string;
  /**
   * Module under `lambdas/` exporting the route's response-streaming `handler`, for a route whose
   * answers may be streamed: in AWS a second function of the route, behind a function URL
   * (lib/ai-edge.ts); locally the route's own handler streams.
   */
  streamedHandler?: string;
  /** An application-bound credential needs this capability (spec 4.1). */
  capability?: Capability;
  /** Events: the permission the credential must hold (lambdas/auth/permissions.ts). */
  permission?: Permission;
  grants: Grant[];
  /** Largest accepted request body in bytes (API Gateway's own ceiling is 10 MiB). */
  maxBodyBytes?: number;
  /** Deepest JSON body nesting (default MAX_JSON_DEPTH, 64); Events publish: Infinity, each event's depth is checked on its own. */
  maxJsonDepth?: number;
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
  /**
   * A large body here is parsed and stored on the platform, not sent to an upstream and waited for:
   * where one process serves every organization (the local server), it waits its organization's turn
   * (docs/decisions/serving-fairness.md). A route that waits on an upstream would hold the turn for it.
   */
  storesBody?: true;
  /**
   * Console routes read with a session: the least role that may call it (viewer < developer < admin <
   * owner); below it `403 role_forbidden` (the chain's `role` step). Every such route names one.
   */
  role?: Role;
  /**
   * `optional`: the route takes no X-Operation-Id (the OpenAI compatibility routes: the official SDK
   * sends none); an Idempotency-Key, when sent, is the operation id, whatever the organization's setting.
   */
  operationIds?: 'optional';
  /** A feature the organization can switch off (`org features --disable`): its routes then answer that feature's 403 (middleware/feature-switch.ts). */
  feature?: Feature;
}

/** Spec section 5's table: which credentials each API accepts on its routes; the console takes only a person's session. */
export const ACCEPTED_BY_DEFAULT: Record<RouteApi, readonly CredentialKind[]> = {
  ai: ['secret_key', 'oauth_client'],
  data: ['secret_key', 'oauth_client', 'publishable_key', 'end_user'],
  events: ['secret_key', 'oauth_client'],
  console: ['person'],
};

export const acceptedCredentials = (route: RouteDef): readonly CredentialKind[] | 'none' =>
  route.credentials ?? ACCEPTED_BY_DEFAULT[route.api];

/**
 * Whether a route's calls count against its credential's calls a minute (spec 8): Data and Events
 * routes that read a credential. The chain counts them in the key-value store; the stack lets their
 * functions write the rate windows.
 */
export const countsCalls = (route: RouteDef): boolean => (route.api === 'data' || route.api === 'events') && acceptedCredentials(route) !== 'none';

export const ROUTES: readonly RouteDef[] = [
  { id: 'ai.models.list', api: 'ai', method: 'GET', path: '/v1/models', handler: 'http/handlers/ai/list-models', grants: ['table:read'] },
  { id: 'ai.chat.completions', api: 'ai', method: 'POST', path: '/v1/chat/completions', handler: 'http/handlers/ai/chat-completions', streamedHandler: 'http/handlers/ai/chat-completions-stream', capability: 'ai.chat', grants: ['table:read', 'table:write', 'secret:read', 'upstream-keys:read'], maxBodyBytes: 5 * 1024 * 1024 },
  { id: 'ai.embeddings', api: 'ai', method: 'POST', path: '/v1/embeddings', handler: 'http/handlers/ai/embeddings', capability: 'ai.embeddings', grants: ['table:read', 'table:write', 'secret:read', 'upstream-keys:read'], maxBodyBytes: 5 * 1024 * 1024 },
  { id: 'ai.run', api: 'ai', method: 'POST', path: '/v1/run', handler: 'http/handlers/ai/run', grants: ['table:read', 'table:write', 'upstream-keys:read'], maxBodyBytes: 5 * 1024 * 1024 },
  // The vector database (spec 4.6, 4.7; docs/ai/vector.md): upstream keys for its embedding route.
  { id: 'ai.vector.ingest', api: 'ai', method: 'POST', path: '/v1/vector/ingest', handler: 'http/handlers/ai/vector-ingest', capability: 'knowledge', grants: ['table:read', 'table:write', 'upstream-keys:read', 'vectors:read', 'vectors:write'], maxBodyBytes: 5 * 1024 * 1024 },
  { id: 'ai.vector.query', api: 'ai', method: 'POST', path: '/v1/vector/query', handler: 'http/handlers/ai/vector-query', capability: 'knowledge', grants: ['table:read', 'table:write', 'upstream-keys:read', 'vectors:read', 'rerankers:call'], maxBodyBytes: 64 * 1024 },
  { id: 'ai.vector.documents.list', api: 'ai', method: 'GET', path: '/v1/vector/documents', handler: 'http/handlers/ai/vector-documents-list', capability: 'knowledge', grants: ['table:read', 'secret:read'] },
  { id: 'ai.vector.documents.delete', api: 'ai', method: 'DELETE', path: '/v1/vector/documents/{document_id}', handler: 'http/handlers/ai/vector-documents-delete', capability: 'knowledge', grants: ['table:read', 'table:write', 'vectors:read', 'vectors:write'] },
  // Uploads (docs/ai/uploads.md): the bytes go through the blob store's multipart uploads. On AWS the parts go to presigned
  // URLs, which work only with the signer's own PutObject: so the routes that hand them out (create, get) hold blobs:write.
  { id: 'ai.uploads.create', api: 'ai', method: 'POST', path: '/v1/uploads', handler: 'http/handlers/ai/uploads-create', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:write'], maxBodyBytes: 16 * 1024 },
  { id: 'ai.uploads.get', api: 'ai', method: 'GET', path: '/v1/uploads/{id}', handler: 'http/handlers/ai/uploads-get', capability: 'knowledge', grants: ['table:read', 'blobs:write'] },
  { id: 'ai.uploads.part', api: 'ai', method: 'PUT', path: '/v1/uploads/{id}/parts/{n}', handler: 'http/handlers/ai/uploads-part', capability: 'knowledge', grants: ['table:read', 'blobs:write'], body: 'stream', maxBodyBytes: 100 * 1024 * 1024 },
  { id: 'ai.uploads.complete', api: 'ai', method: 'POST', path: '/v1/uploads/{id}/complete', handler: 'http/handlers/ai/uploads-complete', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:write', 'queue:send'], maxBodyBytes: 1024 },
  // Knowledge collections (spec 4.9; docs/ai/collections.md). Create and delete sweep or remove a collection's data: table writes for now.
  // Knowledge jobs (spec 4.8; docs/ai/knowledge-jobs.md): a recording becomes a cited collection, step by step on the knowledge-jobs queue.
  { id: 'ai.knowledge.jobs.create', api: 'ai', method: 'POST', path: '/v1/knowledge/jobs', handler: 'http/handlers/ai/knowledge-jobs-create', capability: 'knowledge', feature: 'knowledge', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send', 'ffmpeg:run'], maxBodyBytes: 10 * 1024 * 1024 },
  { id: 'ai.knowledge.jobs.list', api: 'ai', method: 'GET', path: '/v1/knowledge/jobs', handler: 'http/handlers/ai/knowledge-jobs-list', capability: 'knowledge', feature: 'knowledge', grants: ['table:read', 'secret:read'] },
  { id: 'ai.knowledge.jobs.get', api: 'ai', method: 'GET', path: '/v1/knowledge/jobs/{job_id}', handler: 'http/handlers/ai/knowledge-jobs-get', capability: 'knowledge', feature: 'knowledge', grants: ['table:read'] },
  { id: 'ai.knowledge.jobs.cancel', api: 'ai', method: 'DELETE', path: '/v1/knowledge/jobs/{job_id}', handler: 'http/handlers/ai/knowledge-jobs-cancel', capability: 'knowledge', feature: 'knowledge', grants: ['table:read', 'table:write', 'blobs:write'] },
  { id: 'ai.collections.create', api: 'ai', method: 'POST', path: '/v1/collections', handler: 'http/handlers/ai/collections-create', capability: 'knowledge', grants: ['table:read', 'table:write'], maxBodyBytes: 16 * 1024 },
  { id: 'ai.collections.list', api: 'ai', method: 'GET', path: '/v1/collections', handler: 'http/handlers/ai/collections-list', capability: 'knowledge', grants: ['table:read', 'secret:read'] },
  { id: 'ai.collections.get', api: 'ai', method: 'GET', path: '/v1/collections/{id}', handler: 'http/handlers/ai/collections-get', capability: 'knowledge', grants: ['table:read'] },
  { id: 'ai.collections.delete', api: 'ai', method: 'DELETE', path: '/v1/collections/{id}', handler: 'http/handlers/ai/collections-delete', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'vectors:write'] },
  // Collection items (docs/ai/collections.md, "Items"): processed by the knowledge queue's consumer; packages in the blob store, vectors in the index.
  { id: 'ai.collections.items.create', api: 'ai', method: 'POST', path: '/v1/collections/{id}/items', handler: 'http/handlers/ai/collection-items-create', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:write', 'queue:send'], maxBodyBytes: 4 * 1024 * 1024, storesBody: true },
  { id: 'ai.collections.items.list', api: 'ai', method: 'GET', path: '/v1/collections/{id}/items', handler: 'http/handlers/ai/collection-items-list', capability: 'knowledge', grants: ['table:read', 'secret:read'] },
  { id: 'ai.collections.items.get', api: 'ai', method: 'GET', path: '/v1/collections/{id}/items/{item_id}', handler: 'http/handlers/ai/collection-items-get', capability: 'knowledge', grants: ['table:read'] },
  { id: 'ai.collections.items.delete', api: 'ai', method: 'DELETE', path: '/v1/collections/{id}/items/{item_id}', handler: 'http/handlers/ai/collection-items-delete', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'vectors:write'] },
  { id: 'ai.collections.items.reprocess', api: 'ai', method: 'POST', path: '/v1/collections/{id}/items/{item_id}/reprocess', handler: 'http/handlers/ai/collection-items-reprocess', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'vectors:write', 'queue:send'], maxBodyBytes: 1024 },
  { id: 'ai.collections.items.chunks', api: 'ai', method: 'GET', path: '/v1/collections/{id}/items/{item_id}/chunks', handler: 'http/handlers/ai/collection-items-chunks', capability: 'knowledge', grants: ['table:read', 'blobs:read', 'secret:read'] },
  { id: 'ai.collections.items.package', api: 'ai', method: 'GET', path: '/v1/collections/{id}/items/{item_id}/package', handler: 'http/handlers/ai/collection-items-package', capability: 'knowledge', grants: ['table:read', 'blobs:read'] },
  { id: 'ai.collections.items.vectors', api: 'ai', method: 'PUT', path: '/v1/collections/{id}/items/{item_id}/vectors', handler: 'http/handlers/ai/collection-items-vectors', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:read', 'vectors:write'], maxBodyBytes: 5 * 1024 * 1024 },
  { id: 'ai.collections.query', api: 'ai', method: 'POST', path: '/v1/collections/{id}/query', handler: 'http/handlers/ai/collection-query', capability: 'knowledge', grants: ['table:read', 'table:write', 'upstream-keys:read', 'vectors:read'], maxBodyBytes: 256 * 1024 },
  { id: 'ai.collections.chat', api: 'ai', method: 'POST', path: '/v1/collections/{id}/chat', handler: 'http/handlers/ai/collection-chat', streamedHandler: 'http/handlers/ai/collection-chat-stream', capability: 'knowledge', grants: ['table:read', 'table:write', 'secret:read', 'upstream-keys:read', 'vectors:read'], maxBodyBytes: 5 * 1024 * 1024 },
  // OpenAI compatibility (issue 38; docs/ai/openai-compatibility.md): OpenAI's Files, Vector stores and Responses over uploads,
  // `cloud` collections and chat routes, so the official SDK works unchanged. No X-Operation-Id (the SDK sends none): an
  // Idempotency-Key, when sent, is the operation id. Each part's rows stay between its markers.
  // OpenAI compatibility: Files.
  // POST streams its form to a spool (512 MiB file locally; on AWS Lambda's inline body), then stores it as an upload.
  { id: 'ai.files.create', api: 'ai', method: 'POST', path: '/v1/files', handler: 'http/handlers/ai/openai-files-create', capability: 'knowledge', operationIds: 'optional', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send'], body: 'stream', maxBodyBytes: 513 * 1024 * 1024 },
  { id: 'ai.files.list', api: 'ai', method: 'GET', path: '/v1/files', handler: 'http/handlers/ai/openai-files-list', capability: 'knowledge', operationIds: 'optional', grants: ['table:read'] },
  { id: 'ai.files.get', api: 'ai', method: 'GET', path: '/v1/files/{file_id}', handler: 'http/handlers/ai/openai-files-get', capability: 'knowledge', operationIds: 'optional', grants: ['table:read'] },
  { id: 'ai.files.content', api: 'ai', method: 'GET', path: '/v1/files/{file_id}/content', handler: 'http/handlers/ai/openai-files-content', capability: 'knowledge', operationIds: 'optional', grants: ['table:read', 'blobs:read'] },
  { id: 'ai.files.delete', api: 'ai', method: 'DELETE', path: '/v1/files/{file_id}', handler: 'http/handlers/ai/openai-files-delete', capability: 'knowledge', operationIds: 'optional', grants: ['table:read', 'table:write'] },
  // OpenAI compatibility: end of Files.
  // OpenAI compatibility: Vector stores, their files and file batches.
  // Attaching a file writes table items and sends to the knowledge queue (no blob written); deletes and cancels remove items' packages and vectors, as items.delete.
  { id: 'ai.vector_stores.create', api: 'ai', method: 'POST', path: '/v1/vector_stores', handler: 'http/handlers/ai/openai-vs-create', capability: 'knowledge', grants: ['table:read', 'table:write', 'queue:send'], operationIds: 'optional', maxBodyBytes: 256 * 1024 },
  { id: 'ai.vector_stores.list', api: 'ai', method: 'GET', path: '/v1/vector_stores', handler: 'http/handlers/ai/openai-vs-list', capability: 'knowledge', grants: ['table:read'], operationIds: 'optional' },
  { id: 'ai.vector_stores.get', api: 'ai', method: 'GET', path: '/v1/vector_stores/{vector_store_id}', handler: 'http/handlers/ai/openai-vs-get', capability: 'knowledge', grants: ['table:read'], operationIds: 'optional' },
  { id: 'ai.vector_stores.update', api: 'ai', method: 'POST', path: '/v1/vector_stores/{vector_store_id}', handler: 'http/handlers/ai/openai-vs-update', capability: 'knowledge', grants: ['table:read', 'table:write'], operationIds: 'optional', maxBodyBytes: 64 * 1024 },
  { id: 'ai.vector_stores.delete', api: 'ai', method: 'DELETE', path: '/v1/vector_stores/{vector_store_id}', handler: 'http/handlers/ai/openai-vs-delete', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'vectors:write'], operationIds: 'optional' },
  { id: 'ai.vector_stores.files.create', api: 'ai', method: 'POST', path: '/v1/vector_stores/{vector_store_id}/files', handler: 'http/handlers/ai/openai-vsf-create', capability: 'knowledge', grants: ['table:read', 'table:write', 'queue:send'], operationIds: 'optional', maxBodyBytes: 64 * 1024 },
  { id: 'ai.vector_stores.files.list', api: 'ai', method: 'GET', path: '/v1/vector_stores/{vector_store_id}/files', handler: 'http/handlers/ai/openai-vsf-list', capability: 'knowledge', grants: ['table:read'], operationIds: 'optional' },
  { id: 'ai.vector_stores.files.get', api: 'ai', method: 'GET', path: '/v1/vector_stores/{vector_store_id}/files/{file_id}', handler: 'http/handlers/ai/openai-vsf-get', capability: 'knowledge', grants: ['table:read'], operationIds: 'optional' },
  { id: 'ai.vector_stores.files.update', api: 'ai', method: 'POST', path: '/v1/vector_stores/{vector_store_id}/files/{file_id}', handler: 'http/handlers/ai/openai-vsf-update', capability: 'knowledge', grants: ['table:read', 'table:write'], operationIds: 'optional', maxBodyBytes: 64 * 1024 },
  { id: 'ai.vector_stores.files.delete', api: 'ai', method: 'DELETE', path: '/v1/vector_stores/{vector_store_id}/files/{file_id}', handler: 'http/handlers/ai/openai-vsf-delete', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'vectors:write'], operationIds: 'optional' },
  { id: 'ai.vector_stores.files.content', api: 'ai', method: 'GET', path: '/v1/vector_stores/{vector_store_id}/files/{file_id}/content', handler: 'http/handlers/ai/openai-vsf-content', capability: 'knowledge', grants: ['table:read', 'blobs:read'], operationIds: 'optional' },
  { id: 'ai.vector_stores.file_batches.create', api: 'ai', method: 'POST', path: '/v1/vector_stores/{vector_store_id}/file_batches', handler: 'http/handlers/ai/openai-vsfb-create', capability: 'knowledge', grants: ['table:read', 'table:write', 'queue:send'], operationIds: 'optional', maxBodyBytes: 1024 * 1024 },
  { id: 'ai.vector_stores.file_batches.get', api: 'ai', method: 'GET', path: '/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}', handler: 'http/handlers/ai/openai-vsfb-get', capability: 'knowledge', grants: ['table:read', 'table:write', 'queue:send'], operationIds: 'optional' },
  { id: 'ai.vector_stores.file_batches.cancel', api: 'ai', method: 'POST', path: '/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel', handler: 'http/handlers/ai/openai-vsfb-cancel', capability: 'knowledge', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'vectors:write'], operationIds: 'optional', maxBodyBytes: 1024 },
  { id: 'ai.vector_stores.file_batches.files', api: 'ai', method: 'GET', path: '/v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/files', handler: 'http/handlers/ai/openai-vsfb-files', capability: 'knowledge', grants: ['table:read'], operationIds: 'optional' },
  // OpenAI compatibility: end of Vector stores.
  // OpenAI compatibility: Search.
  { id: 'ai.vector_stores.search', api: 'ai', method: 'POST', path: '/v1/vector_stores/{vector_store_id}/search', handler: 'http/handlers/ai/openai-vs-search', capability: 'knowledge', grants: ['table:read', 'table:write', 'upstream-keys:read', 'vectors:read'], maxBodyBytes: 256 * 1024, operationIds: 'optional' },
  // OpenAI compatibility: end of Search.
  // OpenAI compatibility: Responses.
  // Over a chat route (ai.chat); with the file_search tool the handler also asks for `knowledge` and searches as grounded chat does.
  { id: 'ai.responses.create', api: 'ai', method: 'POST', path: '/v1/responses', handler: 'http/handlers/ai/openai-responses-create', streamedHandler: 'http/handlers/ai/openai-responses-create-stream', capability: 'ai.chat', grants: ['table:read', 'table:write', 'secret:read', 'upstream-keys:read', 'vectors:read'], maxBodyBytes: 5 * 1024 * 1024, operationIds: 'optional' },
  { id: 'ai.responses.get', api: 'ai', method: 'GET', path: '/v1/responses/{response_id}', handler: 'http/handlers/ai/openai-responses-get', capability: 'ai.chat', grants: ['table:read'], operationIds: 'optional' },
  { id: 'ai.responses.delete', api: 'ai', method: 'DELETE', path: '/v1/responses/{response_id}', handler: 'http/handlers/ai/openai-responses-delete', capability: 'ai.chat', grants: ['table:read', 'table:write'], operationIds: 'optional' },
  // OpenAI compatibility: end of Responses.
  { id: 'ai.oauth.token', api: 'ai', method: 'POST', path: '/v1/oauth/token', handler: 'http/handlers/ai/oauth-token', grants: ['table:read', 'signing:sign'], credentials: 'none', body: 'raw', maxBodyBytes: 16 * 1024 },
  { id: 'data.oauth.token', api: 'data', method: 'POST', path: '/v1/oauth/token', handler: 'http/handlers/data/oauth-token', grants: ['table:read', 'signing:sign'], credentials: 'none', body: 'raw', maxBodyBytes: 16 * 1024 },
  { id: 'events.oauth.token', api: 'events', method: 'POST', path: '/v1/oauth/token', handler: 'http/handlers/events/oauth-token', grants: ['table:read', 'signing:sign'], credentials: 'none', body: 'raw', maxBodyBytes: 16 * 1024 },
  { id: 'events.events.publish', api: 'events', method: 'POST', path: '/v1/workspaces/{workspace_id}/events', handler: 'http/handlers/events/publish', permission: 'events:event.publish', grants: ['table:write', 'queue:send'], maxBodyBytes: 5 * 1024 * 1024, maxJsonDepth: Infinity, storesBody: true },
  { id: 'events.subscriptions.list', api: 'events', method: 'GET', path: '/v1/workspaces/{workspace_id}/subscriptions', handler: 'http/handlers/events/list-subscriptions', permission: 'events:subscription.read', grants: ['table:read'] },
  { id: 'events.subscriptions.create', api: 'events', method: 'POST', path: '/v1/workspaces/{workspace_id}/subscriptions', handler: 'http/handlers/events/create-subscription', permission: 'events:subscription.write', grants: ['table:write', 'secret:read'] },
  { id: 'events.subscriptions.delete', api: 'events', method: 'DELETE', path: '/v1/workspaces/{workspace_id}/subscriptions/{subscription_id}', handler: 'http/handlers/events/delete-subscription', permission: 'events:subscription.write', grants: ['table:write'] },
  { id: 'events.subscriptions.rotate-secret', api: 'events', method: 'POST', path: '/v1/workspaces/{workspace_id}/subscriptions/{subscription_id}/rotate-secret', handler: 'http/handlers/events/rotate-secret', permission: 'events:subscription.write', grants: ['table:write', 'secret:read'] },
  { id: 'events.subscriptions.pull', api: 'events', method: 'POST', path: '/v1/workspaces/{workspace_id}/subscriptions/{subscription_id}/pull', handler: 'http/handlers/events/pull', permission: 'events:message.pull', grants: ['table:write'] },
  { id: 'events.subscriptions.ack', api: 'events', method: 'POST', path: '/v1/workspaces/{workspace_id}/subscriptions/{subscription_id}/ack', handler: 'http/handlers/events/ack', permission: 'events:message.pull', grants: ['table:write'] },
  { id: 'events.subscriptions.stream', api: 'events', method: 'GET', path: '/v1/workspaces/{workspace_id}/subscriptions/{subscription_id}/stream', handler: 'http/handlers/events/stream', permission: 'events:stream.open', grants: ['table:write', 'connections:post'], credentials: ['secret_key', 'oauth_client', 'publishable_key'] },
  { id: 'events.dead.list', api: 'events', method: 'GET', path: '/v1/workspaces/{workspace_id}/dead', handler: 'http/handlers/events/list-dead', permission: 'events:dead.read', grants: ['table:read'] },
  { id: 'events.dead.replay', api: 'events', method: 'POST', path: '/v1/workspaces/{workspace_id}/dead/{event_id}/replay', handler: 'http/handlers/events/replay-dead', permission: 'events:dead.replay', grants: ['table:write', 'queue:send'] },
  { id: 'events.stats.get', api: 'events', method: 'GET', path: '/v1/workspaces/{workspace_id}/stats', handler: 'http/handlers/events/stats', permission: 'events:stats.read', grants: ['table:read'] },
  { id: 'data.end_user_tokens.create', api: 'data', method: 'POST', path: '/v1/end-user-tokens', handler: 'http/handlers/data/create-end-user-token', grants: ['table:read', 'signing:sign'], credentials: ['secret_key', 'oauth_client'], maxBodyBytes: 16 * 1024 },
  { id: 'data.databases.list', api: 'data', method: 'GET', path: '/v1/databases', handler: 'http/handlers/data/list-databases', grants: ['table:read'] },
  { id: 'data.databases.put', api: 'data', method: 'PUT', path: '/v1/databases/{database}', handler: 'http/handlers/data/put-database', grants: ['table:read', 'table:write'] },
  { id: 'data.collections.put', api: 'data', method: 'PUT', path: '/v1/databases/{database}/collections/{collection}', handler: 'http/handlers/data/put-collection', grants: ['table:read', 'table:write'] },
  { id: 'data.collections.get', api: 'data', method: 'GET', path: '/v1/databases/{database}/collections/{collection}', handler: 'http/handlers/data/get-collection', grants: ['table:read'] },
  { id: 'data.records.create', api: 'data', method: 'POST', path: '/v1/databases/{database}/collections/{collection}/records', handler: 'http/handlers/data/create-record', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send'], maxBodyBytes: 1024 * 1024, storesBody: true },
  { id: 'data.records.list', api: 'data', method: 'GET', path: '/v1/databases/{database}/collections/{collection}/records', handler: 'http/handlers/data/list-records', grants: ['table:read', 'blobs:read', 'secret:read'] },
  { id: 'data.records.get', api: 'data', method: 'GET', path: '/v1/databases/{database}/collections/{collection}/records/{id}', handler: 'http/handlers/data/get-record', grants: ['table:read', 'blobs:read'] },
  { id: 'data.records.update', api: 'data', method: 'PATCH', path: '/v1/databases/{database}/collections/{collection}/records/{id}', handler: 'http/handlers/data/update-record', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send'], maxBodyBytes: 1024 * 1024, storesBody: true },
  { id: 'data.records.delete', api: 'data', method: 'DELETE', path: '/v1/databases/{database}/collections/{collection}/records/{id}', handler: 'http/handlers/data/delete-record', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send'] },
  { id: 'data.batch', api: 'data', method: 'POST', path: '/v1/databases/{database}/batch', handler: 'http/handlers/data/batch', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send'], maxBodyBytes: 5 * 1024 * 1024, storesBody: true },
  { id: 'data.blobs.put', api: 'data', method: 'PUT', path: '/v1/databases/{database}/blobs/{sha256}', handler: 'http/handlers/data/put-blob', grants: ['table:read', 'table:write', 'blobs:write', 'queue:send'], body: 'stream', maxBodyBytes: 100 * 1024 * 1024 },
  // A GET or HEAD that misses a file settles its arrivals (data/blobs.ts): it may copy and delete bytes, record the file and publish blob.created.
  { id: 'data.blobs.get', api: 'data', method: 'GET', path: '/v1/databases/{database}/blobs/{sha256}', handler: 'http/handlers/data/get-blob', grants: ['table:read', 'table:write', 'blobs:write', 'queue:send'] },
  { id: 'data.blobs.head', api: 'data', method: 'HEAD', path: '/v1/databases/{database}/blobs/{sha256}', handler: 'http/handlers/data/head-blob', grants: ['table:read', 'table:write', 'blobs:write', 'queue:send'] },
  { id: 'data.blobs.delete', api: 'data', method: 'DELETE', path: '/v1/databases/{database}/blobs/{sha256}', handler: 'http/handlers/data/delete-blob', grants: ['table:read', 'table:write', 'blobs:write', 'queue:send'] },
  { id: 'data.uploads.create', api: 'data', method: 'POST', path: '/v1/databases/{database}/blobs/{sha256}/uploads', handler: 'http/handlers/data/create-upload', grants: ['table:read', 'table:write', 'blobs:write'] },
  { id: 'data.uploads.part', api: 'data', method: 'PUT', path: '/v1/databases/{database}/blobs/{sha256}/uploads/{upload_id}/parts/{n}', handler: 'http/handlers/data/put-upload-part', grants: ['table:read', 'blobs:write'], body: 'stream', maxBodyBytes: 100 * 1024 * 1024 },
  { id: 'data.uploads.complete', api: 'data', method: 'POST', path: '/v1/databases/{database}/blobs/{sha256}/uploads/{upload_id}/complete', handler: 'http/handlers/data/complete-upload', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send'], maxBodyBytes: 1024 * 1024 },
  { id: 'data.uploads.abort', api: 'data', method: 'DELETE', path: '/v1/databases/{database}/blobs/{sha256}/uploads/{upload_id}', handler: 'http/handlers/data/abort-upload', grants: ['table:read', 'blobs:write'] },
  { id: 'data.activity.list', api: 'data', method: 'GET', path: '/v1/activity', handler: 'http/handlers/data/list-activity', grants: ['table:read', 'secret:read'] },
  { id: 'data.preflight', api: 'data', method: 'OPTIONS', path: '/{proxy+}', handler: 'http/handlers/data/preflight', grants: ['table:read'], credentials: 'none' },
  { id: 'events.preflight', api: 'events', method: 'OPTIONS', path: '/{proxy+}', handler: 'http/handlers/events/preflight', grants: ['table:read'], credentials: 'none' },
  { id: 'ai.fallback', api: 'ai', method: 'ANY', path: '$default', handler: 'http/handlers/ai/not-found', grants: ['table:read'] },
  { id: 'data.fallback', api: 'data', method: 'ANY', path: '$default', handler: 'http/handlers/data/not-found', grants: ['table:read'] },
  { id: 'events.fallback', api: 'events', method: 'ANY', path: '$default', handler: 'http/handlers/events/not-found', grants: ['table:read'] },
  // The console API (issue 37; docs/console.md): called by the console's pages on the console's origin, with a
  // person's session cookie. Without a session: reading and accepting an invitation, signing in. The invitation's token
  // travels in the body, never the path: API Gateway's and CloudFront's access logs record paths.
  { id: 'console.invitation.lookup', api: 'console', method: 'POST', path: '/console/api/invitation/lookup', handler: 'http/handlers/console/invitation-read', grants: ['table:read'], credentials: 'none', maxBodyBytes: 1024 },
  { id: 'console.invitation.accept', api: 'console', method: 'POST', path: '/console/api/invitation/accept', handler: 'http/handlers/console/invitation-accept', grants: ['table:read', 'table:write'], credentials: 'none', maxBodyBytes: 4 * 1024 },
  { id: 'console.session.create', api: 'console', method: 'POST', path: '/console/api/session', handler: 'http/handlers/console/session-create', grants: ['table:read', 'table:write'], credentials: 'none', maxBodyBytes: 4 * 1024 },
  { id: 'console.session.delete', api: 'console', method: 'DELETE', path: '/console/api/session', handler: 'http/handlers/console/session-delete', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.me.get', api: 'console', method: 'GET', path: '/console/api/me', handler: 'http/handlers/console/me', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.people.list', api: 'console', method: 'GET', path: '/console/api/people', handler: 'http/handlers/console/people-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.people.update', api: 'console', method: 'PATCH', path: '/console/api/people/{person_id}', handler: 'http/handlers/console/people-update', role: 'admin', grants: ['table:read', 'table:write'] },
  { id: 'console.people.delete', api: 'console', method: 'DELETE', path: '/console/api/people/{person_id}', handler: 'http/handlers/console/people-delete', role: 'admin', grants: ['table:read', 'table:write'] },
  { id: 'console.invitations.list', api: 'console', method: 'GET', path: '/console/api/invitations', handler: 'http/handlers/console/invitations-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.invitations.create', api: 'console', method: 'POST', path: '/console/api/invitations', handler: 'http/handlers/console/invitations-create', role: 'admin', grants: ['table:read', 'table:write'] },
  { id: 'console.invitations.delete', api: 'console', method: 'DELETE', path: '/console/api/invitations/{invitation_id}', handler: 'http/handlers/console/invitations-delete', role: 'admin', grants: ['table:read', 'table:write'] },
  { id: 'console.keys.list', api: 'console', method: 'GET', path: '/console/api/keys', handler: 'http/handlers/console/keys-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.keys.create', api: 'console', method: 'POST', path: '/console/api/keys', handler: 'http/handlers/console/keys-create', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.keys.disable', api: 'console', method: 'POST', path: '/console/api/keys/{key_id}/disable', handler: 'http/handlers/console/keys-disable', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.workspaces.list', api: 'console', method: 'GET', path: '/console/api/workspaces', handler: 'http/handlers/console/workspaces-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.workspaces.create', api: 'console', method: 'POST', path: '/console/api/workspaces', handler: 'http/handlers/console/workspaces-create', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.applications.list', api: 'console', method: 'GET', path: '/console/api/applications', handler: 'http/handlers/console/applications-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.applications.create', api: 'console', method: 'POST', path: '/console/api/applications', handler: 'http/handlers/console/applications-create', role: 'developer', grants: ['table:read', 'table:write'] },
  // Console: passkeys (helper E). WebAuthn (docs/decisions/console-passkeys.md): a signed-in person adds, lists and removes their
  // passkeys; signing in with one needs no session and makes one as the password's sign-in does.
  { id: 'console.passkeys.options', api: 'console', method: 'POST', path: '/console/api/passkeys/options', handler: 'http/handlers/console/passkeys-options', role: 'viewer', grants: ['table:read', 'table:write'], maxBodyBytes: 1024 },
  { id: 'console.passkeys.create', api: 'console', method: 'POST', path: '/console/api/passkeys', handler: 'http/handlers/console/passkeys-create', role: 'viewer', grants: ['table:read', 'table:write'], maxBodyBytes: 16 * 1024 },
  { id: 'console.passkeys.list', api: 'console', method: 'GET', path: '/console/api/passkeys', handler: 'http/handlers/console/passkeys-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.passkeys.delete', api: 'console', method: 'DELETE', path: '/console/api/passkeys/{passkey_id}', handler: 'http/handlers/console/passkeys-delete', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.session.passkey.options', api: 'console', method: 'POST', path: '/console/api/session/passkey/options', handler: 'http/handlers/console/session-passkey-options', grants: ['table:read', 'table:write'], credentials: 'none', maxBodyBytes: 1024 },
  { id: 'console.session.passkey.create', api: 'console', method: 'POST', path: '/console/api/session/passkey', handler: 'http/handlers/console/session-passkey-create', grants: ['table:read', 'table:write'], credentials: 'none', maxBodyBytes: 16 * 1024 },
  // Console: end of helper E's rows.
  // Console: resources (helper D). The pages' AI, Data, Events, activity and organization routes over the same domain services as
  // the public APIs and the admin CLI (docs/decisions/console-resources.md); every console route also writes (its session's touch).
  { id: 'console.overview.get', api: 'console', method: 'GET', path: '/console/api/overview', handler: 'http/handlers/console/overview', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.limits.get', api: 'console', method: 'GET', path: '/console/api/limits', handler: 'http/handlers/console/org-limits-get', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.limits.update', api: 'console', method: 'PUT', path: '/console/api/limits', handler: 'http/handlers/console/org-limits-update', role: 'admin', grants: ['table:read', 'table:write'], maxBodyBytes: 4 * 1024 },
  { id: 'console.features.update', api: 'console', method: 'PUT', path: '/console/api/features', handler: 'http/handlers/console/org-features-update', role: 'admin', grants: ['table:read', 'table:write'], maxBodyBytes: 4 * 1024 },
  { id: 'console.keys.ai.get', api: 'console', method: 'GET', path: '/console/api/keys/{key_id}/ai', handler: 'http/handlers/console/keys-ai-get', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.keys.limits.update', api: 'console', method: 'PUT', path: '/console/api/keys/{key_id}/limits', handler: 'http/handlers/console/keys-limits-update', role: 'admin', grants: ['table:read', 'table:write'], maxBodyBytes: 4 * 1024 },
  { id: 'console.keys.routes.update', api: 'console', method: 'PUT', path: '/console/api/keys/{key_id}/routes', handler: 'http/handlers/console/keys-routes-update', role: 'developer', grants: ['table:read', 'table:write'], maxBodyBytes: 256 * 1024 },
  { id: 'console.oauth-clients.list', api: 'console', method: 'GET', path: '/console/api/oauth-clients', handler: 'http/handlers/console/oauth-clients-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.oauth-clients.create', api: 'console', method: 'POST', path: '/console/api/oauth-clients', handler: 'http/handlers/console/oauth-clients-create', role: 'developer', grants: ['table:read', 'table:write'], maxBodyBytes: 16 * 1024 },
  { id: 'console.oauth-clients.revoke', api: 'console', method: 'POST', path: '/console/api/oauth-clients/{client_id}/revoke', handler: 'http/handlers/console/oauth-clients-revoke', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.publishable-keys.list', api: 'console', method: 'GET', path: '/console/api/publishable-keys', handler: 'http/handlers/console/publishable-keys-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.publishable-keys.create', api: 'console', method: 'POST', path: '/console/api/publishable-keys', handler: 'http/handlers/console/publishable-keys-create', role: 'developer', grants: ['table:read', 'table:write'], maxBodyBytes: 256 * 1024 },
  { id: 'console.publishable-keys.origins', api: 'console', method: 'PUT', path: '/console/api/publishable-keys/{key_id}/origins', handler: 'http/handlers/console/publishable-keys-origins', role: 'developer', grants: ['table:read', 'table:write'], maxBodyBytes: 256 * 1024 },
  { id: 'console.publishable-keys.disable', api: 'console', method: 'POST', path: '/console/api/publishable-keys/{key_id}/disable', handler: 'http/handlers/console/publishable-keys-disable', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.routes.list', api: 'console', method: 'GET', path: '/console/api/routes', handler: 'http/handlers/console/routes-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.routes.put', api: 'console', method: 'PUT', path: '/console/api/routes/{route_id}', handler: 'http/handlers/console/routes-put', role: 'developer', grants: ['table:read', 'table:write'], maxBodyBytes: 64 * 1024 },
  { id: 'console.routes.default', api: 'console', method: 'POST', path: '/console/api/routes/{route_id}/default', handler: 'http/handlers/console/routes-default', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.routes.try', api: 'console', method: 'POST', path: '/console/api/routes/{route_id}/try', handler: 'http/handlers/console/routes-try', role: 'developer', grants: ['table:read', 'table:write', 'secret:read', 'upstream-keys:read'], maxBodyBytes: 64 * 1024 },
  { id: 'console.rerank-profiles.list', api: 'console', method: 'GET', path: '/console/api/rerank-profiles', handler: 'http/handlers/console/routes-rerank-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.rerank-profiles.put', api: 'console', method: 'PUT', path: '/console/api/rerank-profiles/{profile_id}', handler: 'http/handlers/console/routes-rerank-put', role: 'developer', grants: ['table:read', 'table:write'], maxBodyBytes: 16 * 1024 },
  { id: 'console.rerank-profiles.delete', api: 'console', method: 'DELETE', path: '/console/api/rerank-profiles/{profile_id}', handler: 'http/handlers/console/routes-rerank-delete', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.vector-database.get', api: 'console', method: 'GET', path: '/console/api/workspaces/{workspace_id}/vector-database', handler: 'http/handlers/console/routes-vector-db-get', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.vector-database.create', api: 'console', method: 'POST', path: '/console/api/workspaces/{workspace_id}/vector-database', handler: 'http/handlers/console/routes-vector-db-create', role: 'developer', grants: ['table:read', 'table:write', 'secret:read', 'upstream-keys:read', 'vectors:write'], maxBodyBytes: 4 * 1024 },
  { id: 'console.vector-database.delete', api: 'console', method: 'DELETE', path: '/console/api/workspaces/{workspace_id}/vector-database', handler: 'http/handlers/console/routes-vector-db-delete', role: 'developer', grants: ['table:read', 'table:write', 'queue:send'] },
  { id: 'console.collections.list', api: 'console', method: 'GET', path: '/console/api/collections', handler: 'http/handlers/console/knowledge-collections-list', role: 'viewer', grants: ['table:read', 'table:write', 'secret:read'] },
  { id: 'console.collections.get', api: 'console', method: 'GET', path: '/console/api/collections/{collection_id}', handler: 'http/handlers/console/knowledge-collections-get', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.collections.items.list', api: 'console', method: 'GET', path: '/console/api/collections/{collection_id}/items', handler: 'http/handlers/console/knowledge-items-list', role: 'viewer', grants: ['table:read', 'table:write', 'secret:read'] },
  { id: 'console.knowledge-jobs.list', api: 'console', method: 'GET', path: '/console/api/knowledge-jobs', handler: 'http/handlers/console/knowledge-jobs-list', role: 'viewer', grants: ['table:read', 'table:write', 'secret:read'], feature: 'knowledge' },
  { id: 'console.knowledge-jobs.get', api: 'console', method: 'GET', path: '/console/api/knowledge-jobs/{job_id}', handler: 'http/handlers/console/knowledge-jobs-get', role: 'viewer', grants: ['table:read', 'table:write'], feature: 'knowledge' },
  { id: 'console.knowledge-jobs.cancel', api: 'console', method: 'POST', path: '/console/api/knowledge-jobs/{job_id}/cancel', handler: 'http/handlers/console/knowledge-jobs-cancel', role: 'developer', grants: ['table:read', 'table:write', 'blobs:write'], feature: 'knowledge' },
  { id: 'console.databases.list', api: 'console', method: 'GET', path: '/console/api/databases', handler: 'http/handlers/console/data-databases-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.databases.put', api: 'console', method: 'PUT', path: '/console/api/databases/{database}', handler: 'http/handlers/console/data-databases-put', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.collections.data.list', api: 'console', method: 'GET', path: '/console/api/databases/{database}/collections', handler: 'http/handlers/console/data-collections-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.collections.data.get', api: 'console', method: 'GET', path: '/console/api/databases/{database}/collections/{collection}', handler: 'http/handlers/console/data-collections-get', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.collections.data.put', api: 'console', method: 'PUT', path: '/console/api/databases/{database}/collections/{collection}', handler: 'http/handlers/console/data-collections-put', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.records.list', api: 'console', method: 'GET', path: '/console/api/databases/{database}/collections/{collection}/records', handler: 'http/handlers/console/data-records-list', role: 'viewer', grants: ['table:read', 'table:write', 'blobs:read', 'secret:read'] },
  { id: 'console.records.create', api: 'console', method: 'POST', path: '/console/api/databases/{database}/collections/{collection}/records', handler: 'http/handlers/console/data-records-create', role: 'developer', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send'], maxBodyBytes: 1024 * 1024, storesBody: true },
  { id: 'console.records.delete', api: 'console', method: 'DELETE', path: '/console/api/databases/{database}/collections/{collection}/records/{id}', handler: 'http/handlers/console/data-records-delete', role: 'developer', grants: ['table:read', 'table:write', 'blobs:read', 'blobs:write', 'queue:send'] },
  { id: 'console.files.list', api: 'console', method: 'GET', path: '/console/api/databases/{database}/blobs', handler: 'http/handlers/console/data-files-list', role: 'viewer', grants: ['table:read', 'table:write', 'secret:read'] },
  { id: 'console.files.download', api: 'console', method: 'GET', path: '/console/api/databases/{database}/blobs/{sha256}', handler: 'http/handlers/console/data-files-download', role: 'viewer', grants: ['table:read', 'table:write', 'blobs:write', 'queue:send'] },
  { id: 'console.subscriptions.list', api: 'console', method: 'GET', path: '/console/api/workspaces/{workspace_id}/subscriptions', handler: 'http/handlers/console/events-subscriptions-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.subscriptions.create', api: 'console', method: 'POST', path: '/console/api/workspaces/{workspace_id}/subscriptions', handler: 'http/handlers/console/events-subscriptions-create', role: 'developer', grants: ['table:read', 'table:write', 'secret:read'] },
  { id: 'console.subscriptions.delete', api: 'console', method: 'DELETE', path: '/console/api/workspaces/{workspace_id}/subscriptions/{subscription_id}', handler: 'http/handlers/console/events-subscriptions-delete', role: 'developer', grants: ['table:read', 'table:write'] },
  { id: 'console.subscriptions.rotate-secret', api: 'console', method: 'POST', path: '/console/api/workspaces/{workspace_id}/subscriptions/{subscription_id}/rotate-secret', handler: 'http/handlers/console/events-subscriptions-rotate', role: 'developer', grants: ['table:read', 'table:write', 'secret:read'] },
  { id: 'console.deliveries.list', api: 'console', method: 'GET', path: '/console/api/workspaces/{workspace_id}/deliveries', handler: 'http/handlers/console/events-deliveries-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.dead.list', api: 'console', method: 'GET', path: '/console/api/workspaces/{workspace_id}/dead', handler: 'http/handlers/console/events-dead-list', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.dead.replay', api: 'console', method: 'POST', path: '/console/api/workspaces/{workspace_id}/dead/{event_id}/replay', handler: 'http/handlers/console/events-dead-replay', role: 'developer', grants: ['table:read', 'table:write', 'queue:send'] },
  { id: 'console.stats.get', api: 'console', method: 'GET', path: '/console/api/workspaces/{workspace_id}/stats', handler: 'http/handlers/console/events-stats', role: 'viewer', grants: ['table:read', 'table:write'] },
  { id: 'console.activity.list', api: 'console', method: 'GET', path: '/console/api/activity', handler: 'http/handlers/console/activity-list', role: 'viewer', grants: ['table:read', 'table:write', 'secret:read'] },
  { id: 'console.applications.update', api: 'console', method: 'PATCH', path: '/console/api/applications/{application_id}', handler: 'http/handlers/console/applications-update', role: 'developer', grants: ['table:read', 'table:write'], maxBodyBytes: 4 * 1024 },
  // Console: end of helper D's rows.
  // Console: live tail (helper J). The Events page watches a workspace's published events by reading the stored ones after
  // the last it showed: no lease, no ack, no subscription (docs/decisions/console-live-tail.md).
  { id: 'console.events.tail', api: 'console', method: 'GET', path: '/console/api/workspaces/{workspace_id}/events/tail', handler: 'http/handlers/console/events-tail', role: 'viewer', grants: ['table:read', 'table:write'] },
  // Console: end of helper J's rows.
  { id: 'console.fallback', api: 'console', method: 'ANY', path: '$default', handler: 'http/handlers/console/not-found', role: 'viewer', grants: ['table:read', 'table:write'] },
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

/**
 * API Gateway takes a WebSocket handshake only at its stage's path: the handshake's own path (the
 * stream route's) reaches $connect in this header, set by the distribution in front of the Events API
 * (lib/events-edge-function.ts).
 */
export const STREAM_PATH_HEADER = 'x-stream-path';

export const SOCKET_ROUTES: readonly SocketRouteDef[] = [
  { id: 'events.stream.socket', routeKeys: ['$connect', '$default', '$disconnect'], handler: 'http/handlers/events/stream-socket', grants: ['table:read', 'table:write', 'connections:post', 'connections:table', 'queue:send', 'secret:read'] },
];
