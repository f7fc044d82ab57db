import { AssetHashType, DockerImage, Duration, NestedStack, RemovalPolicy } from 'aws-cdk-lib';
import { HttpApi, HttpStage } from 'aws-cdk-lib/aws-apigatewayv2';
import {
  AllowedMethods,
  CachePolicy,
  Distribution,
  Function as CloudFrontFunction,
  FunctionCode,
  FunctionEventType,
  FunctionRuntime,
  HeadersFrameOption,
  HeadersReferrerPolicy,
  ResponseHeadersPolicy,
  ViewerProtocolPolicy,
} from 'aws-cdk-lib/aws-cloudfront';
import { S3BucketOrigin } from 'aws-cdk-lib/aws-cloudfront-origins';
import type { IAlarmAction } from 'aws-cdk-lib/aws-cloudwatch';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { BlockPublicAccess, Bucket, BucketEncryption, ObjectOwnership, type IBucket } from 'aws-cdk-lib/aws-s3';
import { Secret } from 'aws-cdk-lib/aws-secretsmanager';
import { BucketDeployment, CacheControl, Source, type ISource } from 'aws-cdk-lib/aws-s3-deployment';
import { Construct } from 'constructs';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync } from 'node:fs';
import { basename, join } from 'node:path';
import { CONSOLE_ORIGIN_HEADER, CONSOLE_SECURITY_HEADERS } from '../lambdas/shared/console-headers.js';
import { ROUTES, type RouteDef } from '../lambdas/http/routes.js';
import { accessLogSettings } from './access-log.js';
import { httpApiAlarm } from './alarms.js';
import { CONSOLE_API_PATH_PATTERN, spaFallbackFunctionCode } from './console-edge-function.js';
import { API_DISTRIBUTION, apiGatewayOrigin, PASS_THROUGH } from './edge.js';
import { functionRoleAndLogs, PROJECT_ROOT } from './function-defaults.js';
import { addRoutes, isFallback } from './http-apis.js';
import { acknowledgeConsoleDistribution, acknowledgeConsoleFilesDeployment, acknowledgeConsoleOriginSecret, acknowledgeNoGatewayAuth } from './nag.js';
import type { GrantTargets } from './route-function.js';
import { platformStackName } from './stack-name.js';

/** The route table's API of the console's routes (lambdas/shared/api.ts). */
export const CONSOLE_API = 'console';
/** The console API's routes: the route table's rows of API `console`. */
export const consoleRoutes = (routes: readonly RouteDef[] = ROUTES): RouteDef[] => routes.filter((r) => (r.api as string) === CONSOLE_API);

/**
 * The setting that tells a console function its own origin (the spec's words: the console's URL): the
 * CSRF check compares a request's `Origin` with it, the session cookie is `Secure` when it is https, and
 * invitation links start with it. On AWS it is the distribution's URL (`https://<id>.cloudfront.net`).
 */
export const CONSOLE_URL_SETTING = 'CONSOLE_URL';

/** The setting that gives a console function the value of CloudFront's origin header (lambdas/http/middleware/console-session.ts). */
export const CONSOLE_ORIGIN_VERIFY_SETTING = 'CONSOLE_ORIGIN_VERIFY';

/**
 * How many nested stacks hold the console API's route functions. A route costs about eight resources
 * (function, role, policy, log group, permission, integration, route, alarm) and a template stays under
 * 300 (test/infra/template-size.test.ts): six stacks take some 200 routes, spread unevenly by the hash
 * (68 routes: 9 to 17 a stack). A route's stack follows
 * from its id alone (consoleRouteStack), so adding a route never moves another one: a function moved to
 * another nested stack would be created there, under its same name, before the old one is deleted, and
 * the deployment would fail. Raising this number moves routes (docs/decisions/console-aws.md).
 */
export const CONSOLE_ROUTE_STACKS = 6;

/** The nested stack (0 .. CONSOLE_ROUTE_STACKS - 1) of a console route: from the SHA-256 of its id, which spreads similar ids evenly. */
export function consoleRouteStack(routeId: string): number {
  return createHash('sha256').update(routeId).digest().readUInt32BE(0) % CONSOLE_ROUTE_STACKS;
}

/**
 * The console's security headers on every answer of its origin, files and console API alike: the ones
 * the console API's chain sends (CONSOLE_SECURITY_HEADERS, which the local server sends on the files
 * too): no framing (clickjacking), scripts, styles and requests from the origin itself only, no Referer,
 * no type sniffing. On AWS CloudFront sets them (a response headers policy), plus HSTS.
 */
export const CONSOLE_CONTENT_SECURITY_POLICY = CONSOLE_SECURITY_HEADERS['content-security-policy'];
/** HSTS: two years, as browsers' preload lists ask; the distribution's own name and any below it. */
export const CONSOLE_HSTS_MAX_AGE = Duration.days(730);

/** The distribution's origin ids. */
export const CONSOLE_ORIGIN_IDS = { files: 'console-files', api: 'console-api' } as const;

export interface PlatformConsoleProps {
  /** What the console routes' grants point at (as for the other APIs' functions). */
  readonly targets: GrantTargets;
  readonly alarmAction: IAlarmAction;
  /** Where the files bucket writes its server access logs (the stack's access log bucket, prefix `console/`). */
  readonly accessLogs: IBucket;
}

/**
 * The console on AWS (docs/decisions/console-aws.md), in a nested stack of its own: the built front-end
 * (`console/dist`) in a private bucket behind a CloudFront distribution (origin access control), and the
 * console API (the route table's `console` rows, one function each, as the other APIs) behind the same
 * distribution at `/console/api/*`, so the session cookie and the CSRF `Origin` check see one origin.
 *
 * The functions get that origin (CONSOLE_URL) from the distribution, which reaches the API by its id:
 * function -> distribution -> API, and route -> function. No cycle, as long as the API itself does not
 * wait for its routes. The route functions live in nested stacks of this one (CONSOLE_ROUTE_STACKS),
 * which take the API id and the URL as parameters.
 */
export class PlatformConsole extends Construct {
  readonly stack: NestedStack;
  readonly bucket: Bucket;
  readonly distribution: Distribution;
  readonly api: HttpApi;
  /** The value CloudFront sends in CONSOLE_ORIGIN_HEADER to the console API, and its functions expect. */
  readonly originSecret: Secret;
  /** The console's URL, `https://<distribution domain>` (ConsoleUrl, and CONSOLE_URL of its functions). */
  readonly url: string;
  /** The nested stacks of the route functions, by their index (consoleRouteStack); only those with routes. */
  readonly routeStacks: Record<number, NestedStack> = {};
  /** Each console route's function, by route id. */
  readonly functions: Record<string, NodejsFunction> = {};

  constructor(scope: Construct, id: string, props: PlatformConsoleProps) {
    super(scope, id);
    const stackName = platformStackName(this);
    const routes = consoleRoutes();
    for (const r of routes) {
      if (!isFallback(r) && !r.path.startsWith(CONSOLE_API_PATH_PATTERN.slice(0, -1))) throw new Error(`console route ${r.id}: its path ${r.path} is not under ${CONSOLE_API_PATH_PATTERN}, where the distribution sends the console API`);
    }

    this.stack = new NestedStack(this, 'Stack', { description: `${stackName}: the console (its files, distribution and API)` });
    const s = this.stack;

    this.bucket = new Bucket(s, 'Files', {
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      // SSE-S3: CloudFront's origin access control reads it with no key policy to keep.
      encryption: BucketEncryption.S3_MANAGED,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      serverAccessLogsBucket: props.accessLogs,
      serverAccessLogsPrefix: 'console/',
    });

    this.api = new HttpApi(s, 'Api', { apiName: `${stackName}-${CONSOLE_API}`, createDefaultStage: false });
    new HttpStage(s, 'Stage', { httpApi: this.api, stageName: '$default', autoDeploy: true, accessLogSettings: accessLogSettings(s, 'http') });
    httpApiAlarm(s, CONSOLE_API, this.api, props.alarmAction);

    // A caller going straight to the execute-api URL could write the headers CloudFront sets
    // (`cloudfront-viewer-address`, which the per-address sign-in limit reads): CloudFront adds a header
    // with a value generated here at deployment, and the functions serve no request without it. Both
    // read it through a CloudFormation dynamic reference, so the template holds only the secret's ARN.
    this.originSecret = new Secret(s, 'OriginVerify', {
      description: `${stackName}: the header value CloudFront sends to the console API (only calls through the console's distribution are served)`,
      generateSecretString: { passwordLength: 48, excludePunctuation: true, includeSpace: false },
      // Nothing is sealed with it: a new stack makes a new one.
      removalPolicy: RemovalPolicy.DESTROY,
    });
    acknowledgeConsoleOriginSecret(this.originSecret);
    const originVerify = this.originSecret.secretValue.unsafeUnwrap();

    const headers = new ResponseHeadersPolicy(s, 'Headers', {
      comment: `${stackName}: the console's security headers`,
      securityHeadersBehavior: {
        contentSecurityPolicy: { contentSecurityPolicy: CONSOLE_CONTENT_SECURITY_POLICY, override: true },
        strictTransportSecurity: { accessControlMaxAge: CONSOLE_HSTS_MAX_AGE, includeSubdomains: true, override: true },
        frameOptions: { frameOption: HeadersFrameOption.DENY, override: true },
        contentTypeOptions: { override: true },
        referrerPolicy: { referrerPolicy: HeadersReferrerPolicy.NO_REFERRER, override: true },
      },
    });
    const spaFallback = new CloudFrontFunction(s, 'PageFallback', {
      comment: "Console pages: a path that names no file is answered with the front-end's index.html",
      runtime: FunctionRuntime.JS_2_0,
      code: FunctionCode.fromInline(spaFallbackFunctionCode()),
    });
    this.distribution = new Distribution(s, 'Distribution', {
      comment: `${stackName}: the console (files and console API)`,
      ...API_DISTRIBUTION,
      defaultRootObject: 'index.html',
      // No custom error responses: they would be distribution-wide and turn the API's 403 and 404 into index.html.
      defaultBehavior: {
        origin: S3BucketOrigin.withOriginAccessControl(this.bucket, { originId: CONSOLE_ORIGIN_IDS.files }),
        allowedMethods: AllowedMethods.ALLOW_GET_HEAD,
        cachePolicy: CachePolicy.CACHING_OPTIMIZED,
        viewerProtocolPolicy: ViewerProtocolPolicy.REDIRECT_TO_HTTPS,
        responseHeadersPolicy: headers,
        functionAssociations: [{ function: spaFallback, eventType: FunctionEventType.VIEWER_REQUEST }],
      },
      additionalBehaviors: {
        // Host stays API Gateway's (it routes by it); cookies, Origin, the CSRF header and the query pass.
        [CONSOLE_API_PATH_PATTERN]: { origin: apiGatewayOrigin(s, this.api.apiId, CONSOLE_ORIGIN_IDS.api, { [CONSOLE_ORIGIN_HEADER]: originVerify }), ...PASS_THROUGH, responseHeadersPolicy: headers },
      },
    });
    this.url = `https://${this.distribution.distributionDomainName}`;
    acknowledgeConsoleDistribution(this.distribution);

    // The built files; every deployment replaces them all (prune). Every file is `no-cache`: browsers
    // revalidate on each load (a 304 by ETag) and CloudFront keeps a copy no longer than the cache
    // policy's minimum TTL (1 s), so a new deployment shows at once without an invalidation (and its
    // IAM on every distribution: CDK grants CreateInvalidation on `*`).
    const deployment = new Construct(s, 'FilesDeployment');
    const { role, logGroup } = functionRoleAndLogs(deployment);
    const files = new BucketDeployment(deployment, 'Deployment', {
      sources: [consoleFiles()],
      destinationBucket: this.bucket,
      prune: true,
      cacheControl: [CacheControl.noCache()],
      role,
      logGroup,
      memoryLimit: 256,
      // The keys would only go into the custom resource's answer, which CloudFormation caps at 4 KB.
      outputObjectKeys: false,
    });
    acknowledgeConsoleFilesDeployment(files, role, this.bucket);

    const environment = { [CONSOLE_URL_SETTING]: this.url, [CONSOLE_ORIGIN_VERIFY_SETTING]: originVerify };
    for (let i = 0; i < CONSOLE_ROUTE_STACKS; i++) {
      const mine = routes.filter((r) => consoleRouteStack(r.id) === i);
      if (mine.length === 0) continue;
      const routeStack = new NestedStack(s, `Routes${i}`, { description: `${stackName}: console API route functions (${i + 1} of ${CONSOLE_ROUTE_STACKS}) and their alarms` });
      this.routeStacks[i] = routeStack;
      Object.assign(this.functions, addRoutes(routeStack, this.api, CONSOLE_API, mine, props.targets, environment));
      acknowledgeNoGatewayAuth(routeStack);
    }
  }
}

/** The built console (`npm run build:console` writes console/dist: console/vite.config.ts). */
export const CONSOLE_DIST = join(PROJECT_ROOT, 'console', 'dist');

/**
 * The console's files as a deployment source: built at synthesis (`cdk synth`, `cdk deploy`) by the
 * project's own build (rebuilt only when its sources changed: scripts/build-console.mjs), as every
 * function's bundle is, and skipped where the app skips bundling (the template tests, `cdk ls`), so
 * those need no build. The source directory is the front-end's sources; the asset's hash is the built
 * output's. Dot files (the build's `.build-hash`) stay out of the bucket.
 */
export function consoleFiles(): ISource {
  return Source.asset(join(PROJECT_ROOT, 'console'), {
    assetHashType: AssetHashType.OUTPUT,
    bundling: {
      // Never pulled: local bundling below always succeeds or fails with the build's own message.
      image: DockerImage.fromRegistry('public.ecr.aws/sam/build-nodejs22.x'),
      local: {
        tryBundle(outputDir: string) {
          // The build's output goes to stderr: the CDK CLI reads the app's stdout.
          execFileSync('npm', ['run', '--silent', 'build:console', '--', '--if-stale'], { cwd: PROJECT_ROOT, stdio: ['ignore', 2, 2] });
          if (!existsSync(join(CONSOLE_DIST, 'index.html'))) throw new Error(`npm run build:console wrote no ${join(CONSOLE_DIST, 'index.html')}: is Vite installed (npm ci with dev dependencies)?`);
          cpSync(CONSOLE_DIST, outputDir, { recursive: true, filter: (source) => !basename(source).startsWith('.') });
          return true;
        },
      },
    },
  });
}
