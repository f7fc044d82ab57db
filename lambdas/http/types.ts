import type { Readable } from 'node:stream';
import type { APIGatewayProxyStructuredResultV2, Context } from 'aws-lambda';
import type { Engine } from '../engine/ports.js';
import type { Principal } from '../auth/principal.js';
import type { Workspace } from '../auth/tenants.js';
import type { CallInfo } from '../shared/api.js';
import type { LogContext } from '../shared/log.js';
import type { RouteDef } from './routes.js';
import type { StreamGrant } from '../events/stream.js';

/** A request as handlers see it, built from the API Gateway HTTP API (payload v2) event. */
export interface HttpRequest {
  method: string;
  /** Raw path, still percent-encoded. */
  path: string;
  /** Path parameters, decoded. */
  params: Record<string, string>;
  query: Record<string, string>;
  /** Lower-case header names. */
  headers: Record<string, string>;
  /** The whole body; always empty on `body: 'stream'` routes served by a piping runtime (read `stream()`). */
  body: Buffer;
  /** The caller's address as the gateway saw it (API Gateway's `sourceIp`): the console's per-address sign-in limit. */
  sourceIp?: string;
  /** The parsed JSON body, when the route takes JSON and one was sent. */
  json?: unknown;
  /**
   * The body as a stream; may be called once. On `body: 'stream'` routes a piping runtime hands the
   * socket's stream (never buffered) and the chain counts its bytes against the route's
   * `maxBodyBytes`; in Lambda (and on other routes) it streams the bytes of `body`.
   */
  stream(): Readable;
}

export interface HttpResponse {
  status: number;
  /**
   * A Buffer or string is sent as is; a Readable is streamed in `piped` mode and read whole in
   * `buffered` mode (at most LAMBDA_MAX_BODY_BYTES, else 413: see docs/data/blobs.md);
   * anything else as JSON.
   */
  body?: unknown;
  headers?: Record<string, string>;
  /** Set-Cookie values, one a cookie (API Gateway's `cookies`: a header map holds one value a name). */
  cookies?: string[];
}

/** What the middleware chain hands the handler beside the request; services take its plain fields. */
export interface RequestScope {
  route: RouteDef;
  engine: Engine;
  principal: Principal;
  /**
   * Routes whose path names `{workspace_id}` (the Events API): the workspace, checked against the
   * credential by the chain's `workspace` step. Handlers of such routes get it typed through
   * `workspaceHandler()` (handler.ts) as WorkspaceScope.
   */
  workspace?: Workspace;
  /**
   * Console routes with a session: the session the chain resolved from the `session` cookie (its hash,
   * to end it, and its CSRF token, which the `csrf` step compares).
   */
  session?: { hash: string; csrfToken: string };
  /** The call as plain fields, for the activity log and the after-commit hooks. */
  call: CallInfo;
  /**
   * On an API with operation ids (API_POLICIES): the X-Operation-Id, or one made up where none is
   * required. Handlers of idempotent routes get it required through `idempotentHandler()` (idempotent.ts).
   */
  operationId?: string;
  requestId: string;
  /**
   * The request's log ids (`request_id`, `operation_id` once known): what its activity records and the
   * chain's log lines carry, passed explicitly (docs/decisions/request-logs.md).
   */
  logIds: LogContext;
  /**
   * The largest request or answer body the runtime carries in one call: set in `buffered` mode
   * (Lambda behind API Gateway, LAMBDA_MAX_BODY_BYTES); unset where bodies are streamed (the local
   * server). The blob routes send bigger bodies through the blob store's URLs (docs/data/blobs.md).
   */
  inlineBodyBytes?: number;
  /** The runtime's offer to upgrade this request to a WebSocket (Transport.upgrade), when it made one. */
  upgrade?: UpgradeOffer;
  /** Transport.onClientGone, when the runtime can tell. */
  onClientGone?: ClientGone;
  /** Transport.shareLargeBody, when the runtime serves many organizations in one process. */
  shareLargeBody?: ShareLargeBody;
}

/**
 * Resolves once `organizationId` may have its large body parsed and handled here; the runtime frees
 * the turn when the request ends.
 */
export type ShareLargeBody = (organizationId: string) => Promise<void>;

/** Calls `listener` if the client leaves before its answer is written; returns the way to stop listening. */
export type ClientGone = (listener: () => void) => () => void;

export type RouteHandler = (req: HttpRequest, scope: RequestScope) => Promise<HttpResponse>;

/** What a handler of a `{workspace_id}` route receives: the scope with the checked workspace. */
export type WorkspaceScope = RequestScope & { workspace: Workspace };
export type WorkspaceRouteHandler = (req: HttpRequest, scope: WorkspaceScope) => Promise<HttpResponse>;

/**
 * How a runtime takes a route's answer:
 * - `buffered` (Lambda behind API Gateway, the default): the body travels in the result, a Readable
 *   body is read whole (6 MB payload);
 * - `piped` (the local server; later Lambda response streaming for chat): a Readable body is handed
 *   over as `stream` and written as it comes, and the request body may arrive as a stream too.
 */
export type ResponseMode = 'buffered' | 'piped';

/** What a piping runtime passes beside the event (in the Lambda context, which is ours to extend). */
export interface Transport {
  mode: ResponseMode;
  /**
   * The runtime serves many requests at once in this process (the local server): a request's log ids
   * travel explicitly (RequestScope.logIds), never as the process's (Lambda's one invocation at a time).
   */
  concurrent?: boolean;
  /** `body: 'stream'` routes: the request body, unread. */
  bodyStream?: Readable;
  /**
   * The request body as the runtime read it. The event carries the same bytes (base64, as API Gateway
   * sends a binary body); a runtime that has them already saves the round trip.
   */
  body?: Buffer;
  /**
   * A runtime whose one process serves every organization (the local server) takes large JSON bodies
   * an organization at a time in turn (docs/decisions/serving-fairness.md). Lambda needs none: each
   * invocation has its environment to itself.
   */
  shareLargeBody?: ShareLargeBody;
  /**
   * A runtime that can upgrade this request to a WebSocket (the local server, on a valid handshake):
   * the stream route, once every check passed, accepts here and answers 101; without an offer it
   * answers 426 upgrade_required (docs/events/stream.md).
   */
  upgrade?: UpgradeOffer;
  /**
   * A runtime that notices a client leaving before the answer (the local server) offers it here: a
   * route waiting on an upstream (a stream's first chunk) aborts it instead of paying for an answer
   * nobody reads. The Lambda runtimes offer nothing of the kind: there the wait runs to the first
   * chunk, an error or the route's timeout.
   */
  onClientGone?: ClientGone;
}

export interface UpgradeOffer {
  /** The id the runtime will know the socket by (API Gateway's connection id in AWS). */
  connectionId: string;
  accept(grant: StreamGrant): void;
}

/** A route's answer: API Gateway's result, plus in `piped` mode the body as a stream. */
export type RouteResult = APIGatewayProxyStructuredResultV2 & { stream?: Readable };

/** The Lambda context, carrying the chain's state between middlewares. */
export interface PlatformContext extends Context {
  transport?: Transport;
  /** `startedAt`: performance.now() when the chain began, for the activity record's latency. */
  platform: Partial<RequestScope> & { route: RouteDef; req: HttpRequest; call: CallInfo; startedAt?: number };
}

/** A middleware of the chain: event and response types vary along it, the context is ours. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type Middleware = import('@middy/core').MiddlewareObj<any, any, Error, PlatformContext>;
