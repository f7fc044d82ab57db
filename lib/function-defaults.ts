import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement, Role, ServicePrincipal } from 'aws-cdk-lib/aws-iam';
import { Architecture, Runtime } from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat, type NodejsFunctionProps } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Duration, Size, Tags } from 'aws-cdk-lib';
import { Rule, Schedule } from 'aws-cdk-lib/aws-events';
import { LambdaFunction } from 'aws-cdk-lib/aws-events-targets';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import { CfnQueue, type IQueue } from 'aws-cdk-lib/aws-sqs';
import { ENV } from '../lambdas/shared/settings.js';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';
import { platformStackName } from './stack-name.js';
import { existsSync } from 'node:fs';
import type { BuildOptions } from 'esbuild';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * What every function of the stack shares, route functions and queue consumers alike: the runtime,
 * the bundling, and an own log group with a role that may write only there.
 */

/** Repository root, from this file's location, so synthesis works from any working directory. */
export const PROJECT_ROOT = fileURLToPath(new URL('..', import.meta.url));

/** `lambdas/<module>.ts`, checked to exist (a typo fails synthesis, not the first invocation). */
export function lambdaEntry(module: string, what: string): string {
  const entry = join(PROJECT_ROOT, 'lambdas', `${module}.ts`);
  if (!existsSync(entry)) throw new Error(`${what}: handler module ${entry} does not exist`);
  return entry;
}

/** Defined as "lambda" in every function's bundle: the engine is then the AWS one (lambdas/engine/adapter-kit/bundle-defines.ts). */
export const BUNDLE_DEFINE = 'globalThis.PLATFORM_BUNDLE';

/**
 * The AWS engine's ports a function may be built without (lambdas/engine/aws/index.ts), each with the
 * setting that tells the function has it: a function whose environment lacks the setting (its grants
 * give none) gets `globalThis.PLATFORM_PORT_<PORT>` defined as "absent" (lambdas/engine/adapter-kit/bundle-defines.ts),
 * and its bundle leaves that port's client out. Upstream keys have no setting: only functions holding `upstream-keys:read` get them.
 */
export const OPTIONAL_PORTS = {
  BLOBS: ENV.bucketName,
  QUEUE: ENV.queueUrls,
  CONNECTIONS: ENV.connectionsEndpoint,
  SECRET: ENV.serverSecretArn,
  VECTORS: ENV.vectorBucketName,
  UPSTREAM_KEYS: undefined,
} as const;

/** The bundle settings that follow from a function's environment (and whether it reads upstream keys). */
export function bundleDefines(environment: Record<string, string>, opts: { upstreamKeys?: boolean } = {}): Record<string, string> {
  const defines: Record<string, string> = { [BUNDLE_DEFINE]: JSON.stringify('lambda') };
  for (const [port, setting] of Object.entries(OPTIONAL_PORTS)) {
    const has = setting === undefined ? opts.upstreamKeys === true : setting in environment;
    if (!has) defines[`globalThis.PLATFORM_PORT_${port}`] = JSON.stringify('absent');
  }
  return defines;
}

/** The runtime and esbuild settings of every function; each adds its entry, timeout, role, environment. */
export function bundledFunctionProps(entry: string, define: Record<string, string> = bundleDefines({})): NodejsFunctionProps & { entry: string } {
  return {
    entry,
    handler: 'handler',
    // The latest Node.js Lambda runtime (nag L1); the bundle targets node22, so it also runs there.
    runtime: Runtime.NODEJS_24_X,
    architecture: Architecture.ARM_64,
    memorySize: 512,
    projectRoot: PROJECT_ROOT,
    depsLockFilePath: join(PROJECT_ROOT, 'package-lock.json'),
    bundling: {
      format: OutputFormat.ESM,
      // Prefer the ESM builds of dependencies (tree-shaking of the AWS SDK).
      mainFields: ['module', 'main'],
      // CommonJS dependencies call require(); an ESM bundle has none unless we define it.
      banner: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);",
      target: 'node22',
      minify: true,
      // Stack traces in the logs name our files and lines (SOURCE_MAP_ENVIRONMENT turns maps on). The
      // maps leave out the sources' text, which a trace never reads: each is a fifth of its former
      // size (docs/decisions/stack-layout.md).
      sourceMap: true,
      sourcesContent: false,
      // The embedded engine's branch of lambdas/engine/index.ts becomes dead code, and esbuild leaves it
      // out with the native better-sqlite3 and ws it imports; so are the ports the function lacks
      // (bundleDefines; docs/decisions/lambda-bundles.md).
      define,
      // Never imported by what a bundle reaches; external, so that a slip shows as an import the
      // load test (test/infra/lambda-bundles.test.ts) refuses instead of a native module inlined.
      // Everything else, the AWS SDK included, is bundled: the versions pinned in package.json run.
      externalModules: ['better-sqlite3', 'ws'],
      forceDockerBundling: false,
    },
  };
}

/**
 * Node reads a bundle's source map only when told to: then an error's stack names `lambdas/...ts`
 * and its line instead of a column of the minified bundle. Node parses the map once, when the first
 * stack trace is formatted.
 */
export const SOURCE_MAP_ENVIRONMENT = { NODE_OPTIONS: '--enable-source-maps' } as const;

/**
 * The esbuild options NodejsFunction derives from bundledFunctionProps (and a function's defines): for
 * what is bundled outside NodejsFunction (Lambda@Edge code, lib/data-edge.ts) and for tests that build
 * each function alone, so every bundle is built the one way.
 */
export function esbuildOptions(define?: Record<string, string>): BuildOptions {
  const { bundling } = bundledFunctionProps(join(PROJECT_ROOT, 'lambdas/engine/index.ts'), define);
  return {
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: bundling!.target,
    mainFields: bundling!.mainFields,
    banner: { js: bundling!.banner! },
    define: bundling!.define,
    minify: bundling!.minify,
    sourcemap: bundling!.sourceMap,
    sourcesContent: bundling!.sourcesContent,
    external: bundling!.externalModules,
    logLevel: 'silent',
  };
}

/** Construct metadata naming a function's entry module (relative to the project), for tests that build each function alone. */
export const ENTRY_METADATA = 'platform:entry';

/** What ENTRY_METADATA holds: the entry module (relative to the project) and the bundle's defines. */
export interface EntryMetadata {
  entry: string;
  define: Record<string, string>;
}

/**
 * `scope/Function`: a function of the stack, bundled with the shared settings and the defines its
 * environment calls for (bundleDefines), remembering both for tests that build it alone.
 */
export function platformFunction(
  scope: Construct,
  entry: string,
  props: Omit<NodejsFunctionProps, 'entry'> & { environment: Record<string, string> },
  opts: { upstreamKeys?: boolean } = {},
): NodejsFunction {
  const define = bundleDefines(props.environment, opts);
  const fn = new NodejsFunction(scope, 'Function', { ...bundledFunctionProps(entry, define), ...props, environment: { ...SOURCE_MAP_ENVIRONMENT, ...props.environment } });
  fn.node.addMetadata(ENTRY_METADATA, { entry: relative(PROJECT_ROOT, entry), define } satisfies EntryMetadata);
  return fn;
}

/**
 * An explicit log group with retention (no log-retention custom resource), and an own role that may
 * write only there: this replaces the AWSLambdaBasicExecutionRole managed policy (logs:* on *).
 */
export function functionRoleAndLogs(scope: Construct): { role: Role; logGroup: LogGroup } {
  const logGroup = new LogGroup(scope, 'Logs', { retention: RetentionDays.THREE_MONTHS });
  const role = new Role(scope, 'Role', { assumedBy: new ServicePrincipal('lambda.amazonaws.com') });
  logGroup.grantWrite(role);
  return { role, logGroup };
}

/** Item-level access: `actions` on the table only for items whose partition key matches `leadingKeys`. */
export function grantItems(role: Role, table: ITable, actions: string[], leadingKeys: string[]): void {
  role.addToPrincipalPolicy(
    new PolicyStatement({ actions, resources: [table.tableArn], conditions: { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': leadingKeys } } }),
  );
}

/** Tag on every queue consumer and scheduled function (as ROUTE_TAG on route functions): names the consumer. */
export const CONSUMER_TAG = 'platform:consumer';

export interface ConsumerFunctionProps {
  /** The handler module under lambdas/ (no extension). */
  readonly module: string;
  /** The function's name after the stack's (`<stack>-<name>`) and its CONSUMER_TAG value. */
  readonly name: string;
  readonly tag: string;
  readonly description: string;
  readonly timeoutSeconds: number;
  /** Beside ENGINE=aws: exactly the variables its work needs. */
  readonly environment: Record<string, string>;
  /** Scheduled functions: 0, the next run takes what a failed one left. */
  readonly retryAttempts?: number;
  /** Beside the shared 512 MB, for work that holds whole files. */
  readonly memorySize?: number;
  /** /tmp beyond Lambda's 512 MiB, for work that writes whole files there (ffmpeg's input). */
  readonly ephemeralStorageMiB?: number;
  /** It calls model routes' upstreams (grantUpstreams): its bundle keeps the upstream keys' port. */
  readonly upstreamKeys?: boolean;
}

/** A queue consumer or scheduled function (`scope/Function`), with its own role and log group. */
export function consumerFunction(scope: Construct, props: ConsumerFunctionProps): { fn: NodejsFunction; role: Role } {
  const { role, logGroup } = functionRoleAndLogs(scope);
  const fn = platformFunction(scope, lambdaEntry(props.module, props.description), {
    functionName: `${platformStackName(scope)}-${props.name}`,
    description: props.description,
    timeout: Duration.seconds(props.timeoutSeconds),
    retryAttempts: props.retryAttempts,
    ...(props.memorySize ? { memorySize: props.memorySize } : {}),
    ...(props.ephemeralStorageMiB ? { ephemeralStorageSize: Size.mebibytes(props.ephemeralStorageMiB) } : {}),
    role,
    logGroup,
    environment: { [ENV.engine]: 'aws', ...props.environment },
  }, { upstreamKeys: props.upstreamKeys });
  Tags.of(fn).add(CONSUMER_TAG, props.tag);
  return { fn, role };
}

/**
 * AWS's rule for a Lambda event source: the queue's visibility timeout at least six times the
 * function's timeout, so a batch Lambda retries after a throttle is not received a second time while
 * the first run still works on it (Lambda Developer Guide, "Using Lambda with Amazon SQS").
 */
export const VISIBILITY_PER_FUNCTION_TIMEOUT = 6;

/**
 * An SQS event source with partial batch responses (the consumer reports the messages it failed), for
 * a function of `sizing.timeoutSeconds` on a queue of QUEUES: refused when the queue's visibility
 * timeout is under VISIBILITY_PER_FUNCTION_TIMEOUT times that.
 */
export function sqsSource(queue: IQueue, sizing: { batchSize: number; maxBatchingWindowSeconds: number; maxConcurrency: number; timeoutSeconds: number }): SqsEventSource {
  const visibility = queueVisibilitySeconds(queue);
  if (visibility !== undefined && visibility < VISIBILITY_PER_FUNCTION_TIMEOUT * sizing.timeoutSeconds) {
    throw new Error(
      `queue ${queue.node.path}: its visibility timeout (${visibility} s) must be at least ${VISIBILITY_PER_FUNCTION_TIMEOUT} times its consumer's timeout (${sizing.timeoutSeconds} s): raise visibilitySeconds in lambdas/engine/queues.ts`,
    );
  }
  return new SqsEventSource(queue, {
    batchSize: sizing.batchSize,
    maxBatchingWindow: Duration.seconds(sizing.maxBatchingWindowSeconds),
    reportBatchItemFailures: true,
    maxConcurrency: sizing.maxConcurrency,
  });
}

/** A queue of this stack's visibility timeout in seconds, as its template will hold it (undefined for an imported queue). */
function queueVisibilitySeconds(queue: IQueue): number | undefined {
  const cfn = queue.node.defaultChild;
  return cfn instanceof CfnQueue && typeof cfn.visibilityTimeout === 'number' ? cfn.visibilityTimeout : undefined;
}

/** Runs `fn` every `minutes`, with no retry of a failed run (`scope/Schedule`). */
export function schedule(scope: Construct, fn: NodejsFunction, minutes: number, description: string): Rule {
  return new Rule(scope, 'Schedule', { description, schedule: Schedule.rate(Duration.minutes(minutes)), targets: [new LambdaFunction(fn, { retryAttempts: 0 })] });
}
