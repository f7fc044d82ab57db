import { Duration, Stack } from 'aws-cdk-lib';
import { Distribution } from 'aws-cdk-lib/aws-cloudfront';
import { FunctionUrlOrigin } from 'aws-cdk-lib/aws-cloudfront-origins';
import { FunctionUrlAuthType, InvokeMode, type FunctionUrl } from 'aws-cdk-lib/aws-lambda';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import { ROUTES, type RouteDef } from '../lambdas/http/routes.js';
import { acknowledgeApiDistribution, AI_DISTRIBUTION_REASONS } from './nag.js';
import { API_DISTRIBUTION, apiGatewayOrigin, PASS_THROUGH } from './edge.js';
import { RouteFunction, constructId, type GrantTargets } from './route-function.js';

/** The AI route whose answers may be streamed: the one whose route table entry names a `streamedHandler`. */
export const STREAMED_ROUTE: RouteDef = (() => {
  const streamed = ROUTES.filter((r) => r.api === 'ai' && r.streamedHandler);
  // One distribution path goes to one function URL; a second streamed route needs its own behavior here.
  if (streamed.length !== 1) throw new Error(`the AI edge serves one streamed route; the route table has ${streamed.length}`);
  return streamed[0];
})();
/** Tag on the streaming function (not ROUTE_TAG: that stays one function per route), valued with the route id. */
export const STREAM_ROUTE_TAG = 'platform:stream-route';
/** The distribution's origin ids. */
export const AI_ORIGIN_IDS = { http: 'ai-http', stream: 'ai-stream' } as const;
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
  /** What the streaming function's grants point at (the chat route's, as for its HTTP API function). */
  readonly targets: GrantTargets;
}

/**
 * One base URL for the whole AI API, chat streaming included (docs/decisions/ai-streaming-aws.md): a
 * CloudFront distribution whose default behavior is the AI HTTP API, and whose chat path goes to a
 * Lambda function URL in RESPONSE_STREAM mode, served by a second function of the chat route (same
 * grants, same chain, its streaming entry). API Gateway HTTP APIs cannot stream an answer.
 */
export class AiEdge extends Construct {
  readonly distribution: Distribution;
  readonly streamFunction: NodejsFunction;
  readonly functionUrl: FunctionUrl;
  readonly url: string;

  constructor(scope: Construct, id: string, props: AiEdgeProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const route = STREAMED_ROUTE;

    this.streamFunction = new RouteFunction(this, `${constructId(route.id)}Stream`, {
      route,
      description: `ai API, streamed: ${route.method} ${route.path} (function URL, RESPONSE_STREAM)`,
      targets: props.targets,
      streamed: { suffix: 'stream', tag: STREAM_ROUTE_TAG, timeout: STREAM_FUNCTION_TIMEOUT },
    }).fn;
    // No IAM auth: OAC would sign, but Lambda wants the client's body hash (x-amz-content-sha256) on
    // POST, which OpenAI clients never send. The function authenticates every call itself, as the
    // (equally public) HTTP API's functions do.
    this.functionUrl = this.streamFunction.addFunctionUrl({ authType: FunctionUrlAuthType.NONE, invokeMode: InvokeMode.RESPONSE_STREAM });

    const streamOrigin = new FunctionUrlOrigin(this.functionUrl, { originId: AI_ORIGIN_IDS.stream, readTimeout: AI_ORIGIN_READ_TIMEOUT });
    this.distribution = new Distribution(this, 'Distribution', {
      comment: `${stack.stackName}: the AI API (chat streamed)`,
      ...API_DISTRIBUTION,
      defaultBehavior: { origin: apiGatewayOrigin(this, props.httpApiId, AI_ORIGIN_IDS.http), ...PASS_THROUGH },
      additionalBehaviors: { [route.path]: { origin: streamOrigin, ...PASS_THROUGH } },
    });
    this.url = `https://${this.distribution.distributionDomainName}`;
    acknowledgeApiDistribution(this.distribution, AI_DISTRIBUTION_REASONS);
  }
}
