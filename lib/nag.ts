import { DefaultTokenResolver, Names, Reference, Stack, Tokenization, Validations, type IPostProcessor, type IResolvable, type IResolveContext } from 'aws-cdk-lib';
import type { IConstruct } from 'constructs';
import { Asset } from 'aws-cdk-lib/aws-s3-assets';
// cdk-nag's own rendering of CloudFormation references in finding ids, so ours always match its findings.
import { flattenCfnReference } from 'cdk-nag/lib/utils/flatten-cfn-reference.js';
import type { Grant } from '../lambdas/http/routes.js';
import { bedrockArns, upstreamKeyArn } from './upstream-grants.js';

/**
 * Every cdk-nag acknowledgement of the stack lives here, each with the reason it is acceptable.
 * cdk-nag 3 matches a granular finding only by its exact id (`AwsSolutions-IAM5[Resource::...]`), so
 * wildcard acknowledgements name the very resource they accept and nothing broader.
 */

const ack = (scope: IConstruct, id: string, reason: string) => Validations.of(scope).acknowledge({ id, reason });

/**
 * Resolves a token as the template of `consumer` will hold it. A nested stack sees a resource of its
 * parent through a parameter CDK adds when it prepares the app (after every construct, so after the
 * acknowledgements are made), named `reference-to-<the target's unique id><attribute>` without its
 * dashes; the finding names that parameter, so the acknowledgement has to as well.
 */
class AsSeenBy extends DefaultTokenResolver {
  constructor(private readonly consumer: Stack) {
    // Strings with tokens inside become joins, as in a template; flattenCfnReference reads them in order.
    super({ join: (left: any, right: any) => (left === undefined ? right : right === undefined ? left : { 'Fn::Join': ['', [left, right]] }) });
  }

  override resolveToken(t: IResolvable, context: IResolveContext, postProcessor: IPostProcessor): any {
    if (t instanceof Reference && !t.displayName.startsWith('AWS::') && Stack.of(t.target) !== this.consumer) {
      return { Ref: `reference-to-${Names.nodeUniqueId(t.target.node)}${t.displayName}`.replace(/[^A-Za-z0-9]/g, '') };
    }
    return super.resolveToken(t, context, postProcessor);
  }
}

/** `<LogicalId.Arn>`-style text of a token, as cdk-nag prints it for the template `scope` is in. */
const flat = (scope: IConstruct, token: string) => flattenCfnReference(Tokenization.resolve(token, { scope, resolver: new AsSeenBy(Stack.of(scope)) }));

export function acknowledgeNoGatewayAuth(api: IConstruct): void {
  ack(
    api,
    'AwsSolutions-APIG4',
    'No gateway authorizer on purpose: credentials are checked inside every function before routing, because spec section 5 rule 1 needs our own 401 shape, also for unknown paths (the $default route).',
  );
}

export function acknowledgeAccessLogBucket(bucket: IConstruct): void {
  ack(
    bucket,
    'AwsSolutions-S1',
    'This bucket is the server access log destination of the blob bucket; logging it into itself would loop and logging it to yet another bucket only moves the finding.',
  );
}

export function acknowledgeAccountLoggingRole(role: IConstruct): void {
  ack(
    role,
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs]',
    'The API Gateway account-level CloudWatch role: AWS documents this managed policy for it, and API Gateway names the log groups it writes itself, so no narrower resource list exists.',
  );
}

/** The WebSocket stage when the account's API Gateway CloudWatch role is not opted into (lib/socket-api.ts). */
export function acknowledgeSocketStageWithoutAccessLogs(stage: IConstruct): void {
  ack(
    stage,
    'AwsSolutions-APIG1',
    "WebSocket access logs need the region's account-wide API Gateway CloudWatch role, which this stack sets only when asked (-c apiGatewayCloudWatchRole=create, or =existing where the account has one): setting it silently replaces the account's own. The stage's connects, messages and errors still show in its CloudWatch metrics (the events-socket-errors alarm), and its functions write their own logs.",
  );
}

export function acknowledgeUnrotatedSecret(secret: IConstruct): void {
  ack(
    secret,
    'AwsSolutions-SMG4',
    'The server secret seals list cursors and webhook signing secrets at rest; a new value voids both (paging clients restart, subscriptions need new signing secrets), so it is rotated by hand with a re-seal, never on a schedule that would break them at random.',
  );
}

export function acknowledgeEphemeralTable(table: IConstruct): void {
  ack(
    table,
    'AwsSolutions-DDB3',
    'The WebSocket connection table holds only what open connections serve; a restore could bring back only connections API Gateway has long closed, so point-in-time recovery would keep nothing of use.',
  );
}

/** Why an API distribution does without what cdk-nag asks of a content distribution: per API, the WAF and access-log reasons. */
export interface DistributionReasons {
  api: string;
  /** AwsSolutions-CFR2: no WAF web ACL. */
  noWaf: string;
  /** AwsSolutions-CFR3: no CloudFront access logs. */
  noAccessLogs: string;
}

export const EVENTS_DISTRIBUTION_REASONS: DistributionReasons = {
  api: 'Events',
  noWaf: 'every request is authenticated and rate limited per credential inside the functions (600 calls a minute on Events, counted in the table)',
  noAccessLogs: 'the Events HTTP stage behind it writes access logs of every request (lib/access-log.ts), and so does the WebSocket stage where the account opts into its API Gateway CloudWatch role (lib/socket-api.ts)',
};

/**
 * The AI distribution's function URL also has no IAM authorization: Origin Access Control signs for a
 * function URL, but Lambda then wants the body's SHA-256 from the client in x-amz-content-sha256 on
 * POST, which OpenAI clients never send (docs/decisions/ai-streaming-aws.md).
 */
export const AI_DISTRIBUTION_REASONS: DistributionReasons = {
  api: 'AI',
  noWaf: "every request is authenticated inside the functions and held to the organization's AI limits and budget (lambdas/ai/limits.ts)",
  noAccessLogs: 'the AI HTTP API stage writes access logs, every AI call is recorded in the activity log with its usage',
};

export const DATA_DISTRIBUTION_REASONS: DistributionReasons = {
  api: 'Data',
  noWaf: 'every request is authenticated and rate limited per credential inside the functions (counted in the table)',
  noAccessLogs: 'the Data HTTP API stage behind it writes access logs of every request (lib/access-log.ts), and every file call is recorded in the activity log',
};

/** A Lambda@Edge function (lib/data-edge.ts): what its role and runtime can and cannot be. */
export function acknowledgeEdgeFunction(fn: IConstruct): void {
  ack(
    fn,
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    'Lambda@Edge writes its logs in every region it runs in, to log groups it names itself (/aws/lambda/us-east-1.<function>); no narrower resource list exists. The function has no other permission: it only calls the Data API over HTTPS.',
  );
  ack(fn, 'AwsSolutions-L1', 'Lambda@Edge offers fewer Node.js runtimes than Lambda; 22.x is the newest it takes, and the bundle targets node22 as every function of the stack does.');
}

/** An API distribution (lib/edge.ts): what cdk-nag asks of a content distribution, and why an API front does without. */
export function acknowledgeApiDistribution(distribution: IConstruct, reasons: DistributionReasons): void {
  ack(distribution, 'AwsSolutions-CFR1', `No geo restriction: the ${reasons.api} API serves customers wherever they are; access is decided by credentials in every function.`);
  ack(distribution, 'AwsSolutions-CFR2', `No WAF web ACL: ${reasons.noWaf}; a WAF is an operator choice per deployment, not a default of the product.`);
  ack(
    distribution,
    'AwsSolutions-CFR3',
    `No CloudFront access logs: ${reasons.noAccessLogs}, and standard CloudFront logging would need an ACL-enabled bucket, which every bucket here disables.`,
  );
  ack(
    distribution,
    'AwsSolutions-CFR4',
    'The default CloudFront certificate allows TLS 1.0 viewers; pinning TLS 1.2 needs a custom domain and its ACM certificate, which a deployment adds with its own domain. Origins are reached over TLS 1.2 only.',
  );
}

/** What a route function's wildcards point at (its GrantTargets, lib/route-function.ts). */
export interface WildcardTargets {
  readonly table: { readonly tableArn: string };
  readonly bucket: { readonly bucketArn: string };
  readonly connections?: { readonly manageArns: readonly string[] };
  readonly vectors?: { readonly indexArns: string };
}

/** The wildcards CDK's grant methods put into a route function's policy, acknowledged per grant. */
export function acknowledgeGrantWildcards(fn: IConstruct, grants: ReadonlySet<Grant>, t: WildcardTargets, blobPrefixes?: readonly string[]): void {
  const iam5 = (finding: string, reason: string) => ack(fn, `AwsSolutions-IAM5[${finding}]`, reason);

  if (grants.has('table:read') || grants.has('table:write')) acknowledgeTableIndexes(fn, t.table.tableArn);

  if (grants.has('blobs:read') || grants.has('blobs:write')) {
    const bucket = flat(fn, t.bucket.bucketArn);
    if (blobPrefixes) {
      for (const p of blobPrefixes) iam5(`Resource::${bucket}/${p}*`, `Blob keys are chosen at run time; the wildcard covers objects under ${p} of the one blob bucket only (the API's own prefix).`);
    } else iam5(`Resource::${bucket}/*`, 'Blob keys are chosen at run time; the wildcard covers objects of the one blob bucket only.');
    const read = 'Read/stream/head of blobs: CDK grantRead action groups (object versions and attributes), on the blob bucket only.';
    for (const action of ['s3:GetObject*', 's3:GetBucket*', 's3:List*']) iam5(`Action::${action}`, read);
  }
  if (grants.has('blobs:write')) {
    iam5('Action::s3:DeleteObject*', 'Blob delete (object and its versions): CDK grantReadWrite action group, on the blob bucket only.');
    iam5('Action::s3:Abort*', 'The blob port aborts multipart uploads (AbortMultipartUpload), on the blob bucket only.');
  }

  if (grants.has('connections:post') && t.connections) acknowledgeConnectionArns(fn, t.connections.manageArns);

  if ((grants.has('vectors:read') || grants.has('vectors:write')) && t.vectors) acknowledgeVectorIndexes(fn, t.vectors.indexArns);

  if (grants.has('rerankers:call')) {
    iam5('Resource::*', "Bedrock's Rerank action has no resource of its own in IAM (it is authorized on `*`); the model a rerank runs is authorized separately by bedrock:InvokeModel on foundation models (upstream-keys:read). Rerank only.");
  }
  if (grants.has('upstream-keys:read')) {
    iam5(
      `Resource::${flat(fn, upstreamKeyArn(fn))}`,
      "Model routes' upstream API keys: the secret a route names is chosen by the operator at run time (route set --api-key-env); the wildcard covers only secrets under this stack's ai-upstream/ prefix (and Secrets Manager's random ARN suffix), read-only (GetSecretValue).",
    );
    const [models, profiles] = bedrockArns(fn);
    iam5(
      `Resource::${flat(fn, models)}`,
      "Bedrock model routes name their model at run time (route set --model); invoke only (InvokeModel, InvokeModelWithResponseStream: Converse and ConverseStream), on AWS's foundation models only; any region, because a cross-region inference profile runs the model in another region and is authorized there on the model's ARN.",
    );
    iam5(
      `Resource::${flat(fn, profiles)}`,
      "Bedrock model routes may name an inference profile (cross-region inference) at run time; invoke only, on this account's profiles in the stack's region.",
    );
  }
}

/** Queries on the platform table's indexes: a role whose policy names `<table>/index/*`. */
export function acknowledgeTableIndexes(scope: IConstruct, tableArn: string): void {
  ack(
    scope,
    `AwsSolutions-IAM5[Resource::${flat(scope, tableArn)}/index/*]`,
    "Queries on the platform table's GSIs (gsi1, gsi2) need the index ARNs; the wildcard covers only this one table's indexes.",
  );
}

/** The vector bucket's indexes (lib/vector-bucket.ts): a role whose policy names `<vector bucket>/index/*`. */
export function acknowledgeVectorIndexes(scope: IConstruct, indexArns: string): void {
  ack(
    scope,
    `AwsSolutions-IAM5[Resource::${flat(scope, indexArns)}]`,
    "Each vector database has its own S3 Vectors index, named at run time (`vector-db create`); the wildcard covers only the indexes of this stack's one vector bucket, with the grant's own actions.",
  );
}

/** The webhook delivery function's PutEvents on any event bus (lib/webhook-delivery.ts). */
export function acknowledgeEventBusGrant(role: IConstruct, arn: string): void {
  ack(
    role,
    `AwsSolutions-IAM5[Resource::${flat(role, arn)}]`,
    "eventbridge subscriptions deliver to buses each organization registers at run time (admin CLI `org eventbridge-allow`); the delivery checks that allow-list in the table before every PutEvents, so the wildcard is bounded by it. PutEvents only, nothing else of EventBridge; a bus of another account also has to allow this role in its resource policy.",
  );
}

/** The uploads sweep's object grants (lib/uploads-sweep.ts): one action each, on one key prefix of the blob bucket. */
export function acknowledgeUploadsSweepObjects(role: IConstruct, arns: readonly string[]): void {
  for (const arn of arns) {
    ack(
      role,
      `AwsSolutions-IAM5[Resource::${flat(role, arn)}]`,
      "Expired uploads' keys are known only at run time; the wildcard covers one prefix of the blob bucket (ai-uploads/ for DeleteObject, .staging/ for AbortMultipartUpload), one action each.",
    );
  }
}

/** The upload checks' object grants (lib/upload-checks.ts): named actions on one key prefix of the blob bucket each. */
export function acknowledgeUploadChecksObjects(role: IConstruct, arns: readonly string[]): void {
  for (const arn of arns) {
    ack(
      role,
      `AwsSolutions-IAM5[Resource::${flat(role, arn)}]`,
      "An upload's joined object and its kept bytes are named at run time (staging id; organization, workspace, SHA-256, generation); the wildcard covers one prefix of the blob bucket (.staging/ or ai-uploads/) with the actions named in its statement only.",
    );
  }
}

/** Knowledge's object grants (lib/knowledge-items.ts): named actions on one key prefix of the blob bucket each. */
export function acknowledgeBlobPrefixes(role: IConstruct, arns: readonly string[]): void {
  for (const arn of arns) {
    ack(
      role,
      `AwsSolutions-IAM5[Resource::${flat(role, arn)}]`,
      "Knowledge's files, packages and inline texts are named at run time (organization, workspace, collection, item, package); the wildcard covers one prefix of the blob bucket (ai-uploads/ or knowledge/) with the actions named in its statement only.",
    );
  }
}

/** PostToConnection/DeleteConnection patterns: the connection id is known only at run time. */
export function acknowledgeConnectionArns(fn: IConstruct, arns: readonly string[]): void {
  for (const arn of arns) {
    ack(
      fn,
      `AwsSolutions-IAM5[Resource::${flat(fn, arn)}]`,
      'PostToConnection/DeleteConnection on the Events WebSocket stage only; the connection id in the ARN is known only at run time.',
    );
  }
}

/**
 * CDK's own function that writes a bucket's notification configuration at deploy time (a singleton of
 * the stack, made by Bucket.addEventNotification; lib/blob-arrivals.ts): its role and runtime are CDK's.
 */
export function acknowledgeBucketNotificationsHandler(handler: IConstruct): void {
  ack(
    handler,
    'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    "CDK's bucket-notifications custom resource runs only at deploy time with CDK's own role (logs only, by this managed policy); CDK offers no way to narrow it.",
  );
  ack(
    handler,
    'AwsSolutions-IAM5[Resource::*]',
    "CDK's bucket-notifications custom resource: s3:PutBucketNotification as CDK writes it, at deploy time only; it configures the blob bucket's ObjectCreated notification.",
  );
}


/** The console's distribution (lib/console.ts): its files and the console API on one origin. */
/** The console API origin's verify value (lib/console.ts). */
export function acknowledgeConsoleOriginSecret(secret: IConstruct): void {
  ack(
    secret,
    'AwsSolutions-SMG4',
    "The console API origin's verify value is read by CloudFront's origin header and the console functions' environment when the stack deploys (dynamic references); a rotation Lambda would change the secret without updating either and lock the console out. It is replaced by a deployment instead (docs/decisions/console-aws.md).",
  );
}

export function acknowledgeConsoleDistribution(distribution: IConstruct): void {
  ack(distribution, 'AwsSolutions-CFR1', "No geo restriction: an organization's people sign in from wherever they are; access is decided by the session checks of every console API function.");
  ack(
    distribution,
    'AwsSolutions-CFR2',
    'No WAF web ACL: every console API call is checked inside its function (session, CSRF token and Origin, role), sign-in failures are limited per account and per address (lambdas/console), and the files are public by nature (the built front-end); a WAF is an operator choice per deployment, not a default of the product.',
  );
  ack(
    distribution,
    'AwsSolutions-CFR3',
    "No CloudFront access logs: the console API's stage writes access logs of every call (lib/access-log.ts) and every console action is in the activity log with its person; the files bucket writes S3 server access logs; standard CloudFront logging would need an ACL-enabled bucket, which every bucket here disables.",
  );
  ack(
    distribution,
    'AwsSolutions-CFR4',
    'The default CloudFront certificate allows TLS 1.0 viewers; pinning TLS 1.2 needs a custom domain and its ACM certificate, which a deployment adds with its own domain. Origins are reached over TLS 1.2 only.',
  );
}

/**
 * CDK's BucketDeployment of the console's files (lib/console.ts): its handler runs at deploy time only,
 * with our own role and log group (no managed policy), and copies the built files from the CDK asset
 * into the files bucket; the grants are CDK's, on those two buckets only.
 */
export function acknowledgeConsoleFilesDeployment(deployment: IConstruct, role: IConstruct, files: { arnForObjects(keys: string): string }): void {
  const asset = deployment.node.findAll().find((c): c is Asset => c instanceof Asset);
  if (!asset) throw new Error(`${deployment.node.path}: no CDK asset to acknowledge its read of`);
  const iam5 = (finding: string, reason: string) => ack(role, `AwsSolutions-IAM5[${finding}]`, reason);
  iam5(`Resource::${flat(role, asset.bucket.arnForObjects('*'))}`, "The built console's files are one CDK asset in the CDK bootstrap bucket, whose key is known at synthesis only to CDK; read only (CDK's grantRead), at deploy time.");
  iam5(`Resource::${flat(role, files.arnForObjects('*'))}`, "A deployment writes every built file and removes the previous deployment's (prune): every object of the console's files bucket, and only that bucket.");
  for (const action of ['s3:GetObject*', 's3:GetBucket*', 's3:List*']) iam5(`Action::${action}`, "CDK's grantRead action groups: reading the asset and listing the files bucket to prune it, on those two buckets only.");
  iam5('Action::s3:DeleteObject*', "Pruning the previous deployment's files: CDK's grantReadWrite action group, on the console's files bucket only.");
  iam5('Action::s3:Abort*', "CDK's grantReadWrite action group (a large file's multipart upload aborted), on the console's files bucket only.");
  // CDK makes the handler once per stack, beside the deployment: find it by CDK's id.
  const handler = Stack.of(deployment).node.children.find((c) => c.node.id.startsWith('Custom::CDKBucketDeployment'));
  if (!handler) throw new Error(`${deployment.node.path}: CDK's bucket deployment handler not found`);
  ack(handler, 'AwsSolutions-L1', "CDK's bucket deployment handler: its Python runtime is the one CDK ships it with (it runs the AWS CLI layer CDK bundles), not ours to choose; it runs at deploy time only.");
}
