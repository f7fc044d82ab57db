import { Stack } from 'aws-cdk-lib';
import {
  Distribution,
  Function as CloudFrontFunction,
  FunctionCode,
  FunctionEventType,
  FunctionRuntime,
} from 'aws-cdk-lib/aws-cloudfront';
import { Construct } from 'constructs';
import { acknowledgeApiDistribution, EVENTS_DISTRIBUTION_REASONS } from './nag.js';
import { API_DISTRIBUTION, apiGatewayOrigin, PASS_THROUGH } from './edge.js';
import { EDGE_ORIGIN_IDS, STREAM_PATH_PATTERN, streamRouteFunctionCode } from './events-edge-function.js';

export interface EventsEdgeProps {
  /** The Events HTTP API's id. */
  readonly httpApiId: string;
  /** The Events WebSocket API's id and its stage name. */
  readonly socketApiId: string;
  readonly socketStage: string;
}

/**
 * One base URL for the whole Events API, the stream included (docs/decisions/stream-url-aws.md): a
 * CloudFront distribution in front of the Events HTTP API, whose stream path goes to the WebSocket
 * API. API Gateway takes WebSocket handshakes only at a stage's path, so a viewer-request function
 * moves the spec's path (`/v1/workspaces/{w}/subscriptions/{s}/stream`) into `x-stream-path` and asks
 * for the stage; a request on that path that is no handshake goes to the HTTP API instead, which
 * answers it as the local server does (426 upgrade_required after the credential checks). Nothing is
 * cached: every header, the query and the body reach the APIs.
 */
export class EventsEdge extends Construct {
  readonly distribution: Distribution;
  readonly url: string;

  constructor(scope: Construct, id: string, props: EventsEdgeProps) {
    super(scope, id);
    const stack = Stack.of(this);
    const streamRoute = new CloudFrontFunction(this, 'StreamRoute', {
      comment: 'Events stream: a WebSocket handshake goes to the WebSocket API stage, its path in x-stream-path',
      runtime: FunctionRuntime.JS_2_0,
      code: FunctionCode.fromInline(streamRouteFunctionCode(props.socketStage)),
    });
    this.distribution = new Distribution(this, 'Distribution', {
      comment: `${stack.stackName}: the Events API (HTTP and stream)`,
      ...API_DISTRIBUTION,
      defaultBehavior: { origin: apiGatewayOrigin(this, props.httpApiId, EDGE_ORIGIN_IDS.http), ...PASS_THROUGH },
      additionalBehaviors: {
        [STREAM_PATH_PATTERN]: {
          origin: apiGatewayOrigin(this, props.socketApiId, EDGE_ORIGIN_IDS.socket),
          ...PASS_THROUGH,
          functionAssociations: [{ function: streamRoute, eventType: FunctionEventType.VIEWER_REQUEST }],
        },
      },
    });
    this.url = `https://${this.distribution.distributionDomainName}`;
    acknowledgeApiDistribution(this.distribution, EVENTS_DISTRIBUTION_REASONS);
  }
}
