import { Duration, Stack } from 'aws-cdk-lib';
import { Distribution, type BehaviorOptions } from 'aws-cdk-lib/aws-cloudfront';
import { FunctionUrlOrigin } from 'aws-cdk-lib/aws-cloudfront-origins';
import { FunctionUrlAuthType, InvokeMode, type FunctionUrl } from 'aws-cdk-lib/aws-lambda';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import { ROUTES, type RouteDef } from '../lambdas/http/routes.js';
import { acknowledgeApiDistribution, AI_DISTRIBUTION_REASONS } from './nag.js';
import { API_DISTRIBUTION, apiGatewayOrigin, PASS_THROUGH } from './edge.js';
import { RouteFunction, constructId, type GrantTargets } from './route-function.js';

/**
 * The AI routes whose answers may be streamed: those whose route table entry names a `streamedHandler`
 * (chat completions, grounded collection chat). Each gets its own streaming function, function URL and
 * distribution behavior.
 */
export const STREAMED_ROUTES: readonly RouteDef[] = ROUTES.filter((r) => r.api === 'ai' && r.streamedHandler);
/**
 * A route's path as a CloudFront path pattern: each `{param}` a `*` (which matches any characters, `/`
 * included; the streaming entry sends a path that is not its route's to the AI API's fallback).
 */
export const pathPattern = (path: string) => path.replace(/\{[^}]+\}/g, '*');
/** Tag on the streaming function (not ROUTE_TAG: that stays one function per route), valued with the route id. */
export const STREAM_ROUTE_TAG = 'platform:stream-route';
/** The distribution's origin ids: the AI HTTP API's, and each streamed route's function URL's. */
export const AI_ORIGIN_IDS = { http: 'ai-http', stream: (route: RouteDef) => `ai-stream-${route.id.replaceAll('.', '-')}` } as const;
/**
 * How long CloudFront waits for the first byte, and then between two chunks: the AI routes' upstreams
 * are slow to start (CloudFront's default is 30 s; 60 s is the most it allows without a quota raise).
 */
export const AI_ORIGIN_READ_TIMEOUT = Duration.seconds(60);
/**
 * The streaming function's timeout: Lambda's ceiling. A route's own upstream timeout (`timeout_ms`,
 * 60 s by default) ends a stream long before; a stream only runs, and costs, while it sends.
 */
export const STREAM_FUNCTION_TIMEOUT = Duration.minutes(15);

export interface AiEdgeProps {
  /** The AI HTTP API's id. */
  readonly httpApiId: string;
  /** What the streaming functions' grants point at (each route's, as for its HTTP API function). */
  readonly targets: GrantTargets;
}

/**
 * One base URL for the whole AI API, streamed answers included (docs/decisions/ai-streaming-aws.md): a
 * CloudFront distribution whose default behavior is the AI HTTP API, and whose streamed routes' paths
 * each go to a Lambda function URL in RESPONSE_STREAM mode, served by a second function of that route
 * (same grants, same chain, its streaming entry). API Gateway HTTP APIs cannot stream an answer.
 */
export class AiEdge extends Construct {
  readonly distribution: Distribution;
  /** Each streamed route's streaming function and its function URL, by route id. */
  readonly streamFunctions: Record<string, NodejsFunction> = {};
  readonly functionUrls: Record<string, FunctionUrl> = {};
  readonly url: string;

  constructor(scope: Construct, id: string, props: AiEdgeProps) {
    super(scope, id);
    const stack = Stack.of(this);

    const additionalBehaviors: Record<string, BehaviorOptions> = {};
    for (const route of STREAMED_ROUTES) {
      const fn = new RouteFunction(this, `${constructId(route.id)}Stream`, {
        route,
        description: `ai API, streamed: ${route.method} ${route.path} (function URL, RESPONSE_STREAM)`,
        targets: props.targets,
        streamed: { suffix: 'stream', tag: STREAM_ROUTE_TAG, timeout: STREAM_FUNCTION_TIMEOUT },
      }).fn;
      // No IAM auth: OAC would sign, but Lambda wants the client's body hash (x-amz-content-sha256) on
      // POST, which OpenAI clients never send. The function authenticates every call itself, as the
      // (equally public) HTTP API's functions do.
      const url = fn.addFunctionUrl({ authType: FunctionUrlAuthType.NONE, invokeMode: InvokeMode.RESPONSE_STREAM });
      this.streamFunctions[route.id] = fn;
      this.functionUrls[route.id] = url;
      const origin = new FunctionUrlOrigin(url, { originId: AI_ORIGIN_IDS.stream(route), readTimeout: AI_ORIGIN_READ_TIMEOUT });
      additionalBehaviors[pathPattern(route.path)] = { origin, ...PASS_THROUGH };
    }
    this.distribution = new Distribution(this, 'Distribution', {
      comment: `${stack.stackName}: the AI API (chat streamed)`,
      ...API_DISTRIBUTION,
      defaultBehavior: { origin: apiGatewayOrigin(this, props.httpApiId, AI_ORIGIN_IDS.http), ...PASS_THROUGH },
      additionalBehaviors,
    });
    this.url = `https://${this.distribution.distributionDomainName}`;
    acknowledgeApiDistribution(this.distribution, AI_DISTRIBUTION_REASONS);
  }
}
