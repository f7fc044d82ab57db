import { AssetHashType, DockerImage, Duration, Stack, Tags } from 'aws-cdk-lib';
import { Distribution, LambdaEdgeEventType, experimental } from 'aws-cdk-lib/aws-cloudfront';
import { Architecture, Code, Runtime } from 'aws-cdk-lib/aws-lambda';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { buildSync } from 'esbuild';
import { join } from 'node:path';
import { ROUTES } from '../lambdas/http/routes.js';
import { acknowledgeApiDistribution, acknowledgeEdgeFunction, DATA_DISTRIBUTION_REASONS } from './nag.js';
import { API_DISTRIBUTION, apiGatewayOrigin, PASS_THROUGH } from './edge.js';
import { bundledFunctionProps, ENTRY_METADATA, esbuildOptions, lambdaEntry, PROJECT_ROOT, type EntryMetadata } from './function-defaults.js';

/** Tag on Lambda@Edge functions (as ROUTE_TAG on route functions), valued with the function's name. */
export const EDGE_TAG = 'platform:edge';
/** The distribution's origin id. */
export const DATA_ORIGIN_ID = 'data-http';
/**
 * The paths of the routes that take a file's bytes (`body: 'stream'`: the single PUT and the part PUT),
 * as one CloudFront path pattern: the upload relay runs there only.
 */
export const FILE_PATH_PATTERN = '/v1/databases/*/blobs/*';

/**
 * One base URL for the Data API (data_url) that takes files of every size the spec allows
 * (docs/data/blobs.md, "Large files on AWS"): a CloudFront distribution in front of the Data HTTP API
 * whose file paths run the upload relay (lambdas/edge/upload-relay.ts) as a Lambda@Edge
 * origin-request function. API Gateway reads a body whole before any function runs and refuses one
 * over 10 MB; for a PUT over the Lambda payload the relay asks the route with the headers only
 * (`Upload-Length`) and answers its 307 to S3, so unchanged clients never send the body through API
 * Gateway. Everything else passes through untouched, as on the Events and AI distributions.
 *
 * Lambda@Edge runs in us-east-1 with no environment variables, on x86_64: CDK's EdgeFunction puts it
 * there (a stack of its own in us-east-1 when the platform's region is another, which is why the app
 * names a region: bin/app.ts).
 */
export class DataEdge extends Construct {
  readonly distribution: Distribution;
  readonly relay: experimental.EdgeFunction;
  /** The relay's replicas' log group in us-east-1, with retention. */
  readonly replicaLogs: LogGroup;
  readonly url: string;

  constructor(scope: Construct, id: string, props: { httpApiId: string }) {
    super(scope, id);
    const stack = Stack.of(this);
    if (!ROUTES.some((r) => r.api === 'data' && r.body === 'stream' && matches(FILE_PATH_PATTERN, r.path))) {
      throw new Error(`no Data route that takes a file's bytes matches ${FILE_PATH_PATTERN}`);
    }
    // Both names are global to the account (the function and its stack live in us-east-1 whatever the
    // platform's region): the region in them lets one account run the platform in several regions.
    const relayName = edgeFunctionName(stack, 'data-upload-relay');
    this.relay = new experimental.EdgeFunction(this, 'UploadRelay', {
      functionName: relayName,
      // Where the platform's region is not us-east-1, CDK makes a stack there for the function: named after ours.
      stackId: edgeStackName(stack),
      description: 'data API: a PUT over the Lambda payload asked of the route with its headers only (Upload-Length), its 307 answered',
      runtime: Runtime.NODEJS_22_X,
      architecture: Architecture.X86_64,
      handler: 'index.handler',
      code: edgeCode(RELAY_MODULE),
      memorySize: 128,
      // Origin-request functions may run 30 s; the relay gives the route 25 s.
      timeout: Duration.seconds(30),
    });
    // Tests build and load every function of the stack alone from its ENTRY_METADATA (the function
    // itself sits in this stack when the stack is in us-east-1, in the edge stack otherwise).
    Tags.of(this.relay).add(EDGE_TAG, 'data-upload-relay');
    // Replicas log in each region they run in, to `/aws/lambda/us-east-1.<function>`, a group Lambda@Edge
    // makes without retention where none exists. This stack can make it in us-east-1 only (its own region
    // or the edge stack's); docs/deploying.md gives the command that makes the others.
    this.replicaLogs = new LogGroup(this.relay.lambda, 'ReplicaLogs', { logGroupName: edgeReplicaLogGroupName(relayName), retention: EDGE_LOG_RETENTION });
    this.relay.lambda.node.addMetadata(ENTRY_METADATA, { entry: `lambdas/${RELAY_MODULE}.ts`, define: bundledFunctionProps(lambdaEntry(RELAY_MODULE, 'edge function')).bundling!.define! } satisfies EntryMetadata);

    const origin = apiGatewayOrigin(this, props.httpApiId, DATA_ORIGIN_ID);
    this.distribution = new Distribution(this, 'Distribution', {
      comment: `${stack.stackName}: the Data API (files of every size)`,
      ...API_DISTRIBUTION,
      defaultBehavior: { origin, ...PASS_THROUGH },
      additionalBehaviors: {
        [FILE_PATH_PATTERN]: { origin, ...PASS_THROUGH, edgeLambdas: [{ functionVersion: this.relay.currentVersion, eventType: LambdaEdgeEventType.ORIGIN_REQUEST }] },
      },
    });
    this.url = `https://${this.distribution.distributionDomainName}`;
    acknowledgeApiDistribution(this.distribution, DATA_DISTRIBUTION_REASONS);
    acknowledgeEdgeFunction(this.relay.lambda);
  }
}

const RELAY_MODULE = 'edge/upload-relay';

/** The stack CDK makes in us-east-1 for the Lambda@Edge functions of a platform in another region: `<stack>-edge-<region>`. */
export const edgeStackName = (stack: Stack) => `${stack.stackName}-edge-${stack.region}`;
/** A Lambda@Edge function's name: `<stack>-<region>-<name>` (function names are per account in us-east-1). */
export const edgeFunctionName = (stack: Stack, name: string) => `${stack.stackName}-${stack.region}-${name}`;
/** Where a Lambda@Edge function's replicas log, in every region they run in. */
export const edgeReplicaLogGroupName = (functionName: string) => `/aws/lambda/us-east-1.${functionName}`;
/** How long those logs are kept: as every function's (lib/function-defaults.ts functionRoleAndLogs). */
export const EDGE_LOG_RETENTION = RetentionDays.THREE_MONTHS;

/**
 * A Lambda@Edge function's code: its entry bundled with the stack's own esbuild settings (as every
 * function's, lib/function-defaults.ts), at synthesis, skipped where the app skips bundling.
 */
function edgeCode(module: string): Code {
  const entry = lambdaEntry(module, 'edge function');
  return Code.fromAsset(join(PROJECT_ROOT, 'lambdas'), {
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      // Never pulled: local bundling below always succeeds (esbuild is a dependency of the project).
      image: DockerImage.fromRegistry('public.ecr.aws/sam/build-nodejs22.x'),
      local: {
        tryBundle(outputDir: string) {
          // No source map: Lambda@Edge takes no NODE_OPTIONS to read one with.
          buildSync({ ...esbuildOptions(), entryPoints: [entry], outfile: join(outputDir, 'index.mjs'), sourcemap: false, logLevel: 'error' });
          return true;
        },
      },
    },
  });
}

/** Whether a CloudFront path pattern (`*` any characters, `?` one) matches a route's templated path. */
function matches(pattern: string, path: string): boolean {
  const re = new RegExp(`^${pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
  return re.test(path);
}
