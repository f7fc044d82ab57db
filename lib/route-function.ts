import { Duration, Stack, Tags } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement, type Role } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Bucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import { ACTIVITY_KEY_PREFIX } from '../lambdas/activity/segments.js';
import { RATE_WINDOW_KEY_PREFIX } from '../lambdas/shared/counters.js';
import type { Grant } from '../lambdas/http/routes.js';
import type { RouteApi } from '../lambdas/shared/api.js';
import type { Queues } from './queues.js';
import type { SigningKey } from './signing.js';
import type { ServerSecret } from './server-secret.js';
import type { VectorBucket } from './vector-bucket.js';
import type { FfmpegLayer } from './ffmpeg-layer.js';
import { acknowledgeGrantWildcards } from './nag.js';
import { grantRerankers, grantUpstreams } from './upstream-grants.js';
import { platformStackName } from './stack-name.js';
import { KNOWLEDGE_BLOB_PREFIXES } from './knowledge-items.js';
import { functionRoleAndLogs, lambdaEntry, platformFunction } from './function-defaults.js';

/** Tag on every route function: tells ours apart from helper functions CDK may add, and names the route. */
export const ROUTE_TAG = 'platform:route';

/** What a WebSocket API exposes to functions holding `connections:post`. */
export interface ConnectionsTarget {
  /** https endpoint of the stage, for the API Gateway Management API client. */
  readonly endpoint: string;
  /** ARN patterns of PostToConnection and DeleteConnection on that stage only. */
  readonly manageArns: readonly string[];
  /** The PostToConnection pattern alone (for functions that never close a connection). */
  readonly postArn: string;
  /** The connection table (lambdas/engine/aws/connections.ts). */
  readonly table: Table;
}

/** The resources a grant can point at. */
export interface GrantTargets {
  readonly table: Table;
  readonly bucket: Bucket;
  readonly queues: Queues;
  /** The token signing key: every function may verify with it, `signing:sign` functions may sign. */
  readonly signing: SigningKey;
  /** The server secret: read by `secret:read` functions (routes that give out list cursors). */
  readonly secret: ServerSecret;
  /** The vector bucket: `vectors:read` queries its indexes, `vectors:write` writes, makes and removes them. */
  readonly vectors: VectorBucket;
  readonly connections?: ConnectionsTarget;
  /** ffmpeg and ffprobe for `ffmpeg:run` functions (the layer and FFMPEG_PATH). */
  readonly ffmpeg?: FfmpegLayer;
}

export interface RouteFunctionProps {
  readonly route: { readonly id: string; readonly api?: RouteApi; readonly handler: string; readonly streamedHandler?: string; readonly grants: readonly Grant[] };
  /** The chain counts this route's calls per credential (countsCalls in lambdas/http/routes.ts). */
  readonly countsCalls?: boolean;
  readonly description: string;
  readonly targets: GrantTargets;
  /** Settings beside the grants' (the console API's CONSOLE_URL, lib/console.ts): what its API, not a grant, needs. */
  readonly environment?: Readonly<Record<string, string>>;
  /**
   * The route's second, response-streaming function, with its grants, from the route's
   * `streamedHandler` (behind a function URL, lib/ai-edge.ts). Its name gets `-<suffix>`, its tag key
   * is `tag` instead of ROUTE_TAG (so one function per route keeps ROUTE_TAG). Every function is built
   * from a module the route table names.
   */
  readonly streamed?: { readonly suffix: string; readonly tag: string; readonly timeout: Duration };
}

/**
 * The blob keys an API's routes use, where that is not the whole bucket: the AI API's uploads
 * (`ai-uploads/`, and `.staging/`, where the AWS blob store keeps a multipart upload until it is
 * complete: lambdas/engine/aws/blobs.ts), knowledge's packages and inline texts (`knowledge/`) and
 * knowledge jobs' given transcripts, notes and step results (`knowledge-jobs/`). Its
 * `blobs:read` / `blobs:write` are granted on these prefixes only, so an AI function cannot read or
 * change the Data API's files (docs/decisions/knowledge-items-aws.md).
 */
export const API_BLOB_PREFIXES: Partial<Record<RouteApi, readonly string[]>> = {
  ai: [KNOWLEDGE_BLOB_PREFIXES.uploads, '.staging/', KNOWLEDGE_BLOB_PREFIXES.collections, KNOWLEDGE_BLOB_PREFIXES.jobs],
};

/** `ai.models.list` -> `AiModelsList`: construct ids derive from the route id. */
export const constructId = (routeId: string) =>
  routeId.split(/[.\-_]/).filter(Boolean).map((w) => w[0].toUpperCase() + w.slice(1)).join('');

/**
 * One Lambda function for one route: the shared bundling and runtime settings, its own log group and
 * role, and IAM plus environment derived from the route's grants only.
 */
export class RouteFunction extends Construct {
  readonly fn: NodejsFunction;

  constructor(scope: Construct, id: string, { route, description, targets, countsCalls = false, streamed, environment: apiEnvironment }: RouteFunctionProps) {
    super(scope, id);
    if (streamed && !route.streamedHandler) throw new Error(`route ${route.id} has no streamedHandler in the route table`);
    const entry = lambdaEntry((streamed ? route.streamedHandler : route.handler)!, `route ${route.id}`);
    const functionName = `${platformStackName(this)}-${route.id.replace(/[^A-Za-z0-9-_]/g, '-')}${streamed ? `-${streamed.suffix}` : ''}`;
    if (functionName.length > 64) throw new Error(`route ${route.id}: function name ${functionName} exceeds 64 characters`);

    const grants = new Set(route.grants);
    const environment = { ...grantEnvironment(route.id, grants, targets), ...apiEnvironment };

    const { role, logGroup } = functionRoleAndLogs(this);
    this.fn = platformFunction(
      this,
      entry,
      {
        functionName,
        description,
        // HTTP APIs give up after 30 s; running longer would only burn money.
        timeout: streamed?.timeout ?? Duration.seconds(29),
        role,
        logGroup,
        environment,
      },
      { upstreamKeys: grants.has('upstream-keys:read') },
    );
    Tags.of(this.fn).add(streamed?.tag ?? ROUTE_TAG, route.id);
    if (grants.has('ffmpeg:run')) ffmpeg(route.id, targets).use(this.fn);

    const blobPrefixes = route.api ? API_BLOB_PREFIXES[route.api] : undefined;
    grantAccess(route.id, grants, targets, role, blobPrefixes);
    if (countsCalls && grants.has('table:read') && !grants.has('table:write')) grantRateWindowWrite(targets, role);
    acknowledgeGrantWildcards(this, grants, targets, blobPrefixes);
  }
}

/**
 * ENGINE=aws, the signing key ids (every function verifies tokens), plus exactly the names the
 * granted resources need (ENV in lambdas/shared/settings.ts).
 */
function grantEnvironment(routeId: string, grants: Set<Grant>, t: GrantTargets): Record<string, string> {
  const env: Record<string, string> = { [ENV.engine]: 'aws', [ENV.signingKeyIds]: t.signing.keyIdsJson() };
  if (grants.has('table:read') || grants.has('table:write')) env[ENV.tableName] = t.table.tableName;
  if (grants.has('blobs:read') || grants.has('blobs:write')) env[ENV.bucketName] = t.bucket.bucketName;
  if (grants.has('queue:send')) env[ENV.queueUrls] = Stack.of(t.table).toJsonString(t.queues.urls());
  if (grants.has('connections:post')) env[ENV.connectionsEndpoint] = connections(routeId, t).endpoint;
  if (grants.has('connections:table')) env[ENV.connectionsTable] = connections(routeId, t).table.tableName;
  if (grants.has('secret:read')) env[ENV.serverSecretArn] = t.secret.secret.secretArn;
  if (grants.has('vectors:read') || grants.has('vectors:write')) env[ENV.vectorBucketName] = t.vectors.bucketName;
  return env;
}

/** The narrowest IAM each grant needs, plus reading the signing public key (to verify tokens); nothing else. */
function grantAccess(routeId: string, grants: Set<Grant>, t: GrantTargets, role: Role, blobPrefixes?: readonly string[]): void {
  t.signing.grantVerify(role);
  if (grants.has('signing:sign')) t.signing.grantSign(role);
  if (grants.has('table:write')) t.table.grantReadWriteData(role);
  else if (grants.has('table:read')) {
    t.table.grantReadData(role);
    grantActivityWrite(t, role);
  }
  if (grants.has('secret:read')) t.secret.grantRead(role);
  // Objects under the API's prefixes (API_BLOB_PREFIXES), else the whole bucket; bucket-level actions (List*, GetBucket*) on the bucket.
  for (const pattern of blobPrefixes?.map((p) => `${p}*`) ?? ['*']) {
    if (grants.has('blobs:write')) t.bucket.grantReadWrite(role, pattern);
    else if (grants.has('blobs:read')) t.bucket.grantRead(role, pattern);
  }
  // Sending goes to the work queues only; SQS itself moves messages to the dead-letter queues.
  if (grants.has('queue:send')) for (const { queue } of Object.values(t.queues.byName)) queue.grantSendMessages(role);
  if (grants.has('connections:post')) {
    role.addToPrincipalPolicy(
      new PolicyStatement({ actions: ['execute-api:ManageConnections'], resources: [...connections(routeId, t).manageArns] }),
    );
  }
  // The gateway's three calls on the connection table, no scans or queries.
  if (grants.has('connections:table')) connections(routeId, t).table.grant(role, ...CONNECTION_TABLE_ACTIONS);
  if (grants.has('upstream-keys:read')) grantUpstreams(role);
  if (grants.has('rerankers:call')) grantRerankers(role);
  t.vectors.grant(role, { read: grants.has('vectors:read'), write: grants.has('vectors:write') });
}

/** What the connection gateway does with a connection record: remember, recall, forget. */
export const CONNECTION_TABLE_ACTIONS = ['dynamodb:PutItem', 'dynamodb:GetItem', 'dynamodb:DeleteItem'];

/** Partition keys of activity items (lambdas/activity/segments.ts): `act#<org>#<day>`. */
export const ACTIVITY_LEADING_KEYS = [`${ACTIVITY_KEY_PREFIX}*`];

/**
 * The implicit grant of every function that reads the table (every HTTP route does, to resolve
 * credentials): the chain records each call in the activity log, so it may put items, but only items
 * whose partition key is an activity partition. TransactWriteItems is authorized per action, as PutItem.
 * Functions holding table:write already write everything.
 */
function grantActivityWrite(t: GrantTargets, role: Role): void {
  role.addToPrincipalPolicy(
    new PolicyStatement({
      actions: ['dynamodb:PutItem', 'dynamodb:BatchWriteItem'],
      resources: [t.table.tableArn],
      conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ACTIVITY_LEADING_KEYS } },
    }),
  );
}

/** Partition keys of rate windows (lambdas/shared/counters.ts): `rate#<credential>`. */
export const RATE_WINDOW_LEADING_KEYS = [`${RATE_WINDOW_KEY_PREFIX}*`];

/**
 * The implicit grant of a function whose calls count against a rate limit (Data and Events routes
 * that read a credential): one atomic UpdateItem a call, only on rate-window items.
 */
function grantRateWindowWrite(t: GrantTargets, role: Role): void {
  role.addToPrincipalPolicy(
    new PolicyStatement({
      actions: ['dynamodb:UpdateItem'],
      resources: [t.table.tableArn],
      conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': RATE_WINDOW_LEADING_KEYS } },
    }),
  );
}

function ffmpeg(routeId: string, t: GrantTargets): FfmpegLayer {
  if (!t.ffmpeg) throw new Error(`route ${routeId} has ffmpeg:run but no ffmpeg layer is wired in`);
  return t.ffmpeg;
}

function connections(routeId: string, t: GrantTargets): ConnectionsTarget {
  if (!t.connections) throw new Error(`route ${routeId} has connections:post but no WebSocket API is wired in`);
  return t.connections;
}
