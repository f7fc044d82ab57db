import { Stack } from 'aws-cdk-lib';
import {
  AllowedMethods,
  CachePolicy,
  Distribution,
  Function as CloudFrontFunction,
  FunctionCode,
  FunctionEventType,
  FunctionRuntime,
  HttpVersion,
  OriginProtocolPolicy,
  OriginRequestPolicy,
  OriginSslPolicy,
  PriceClass,
  ViewerProtocolPolicy,
} from 'aws-cdk-lib/aws-cloudfront';
import { HttpOrigin } from 'aws-cdk-lib/aws-cloudfront-origins';
import { Construct } from 'constructs';
import { acknowledgeEventsEdge } from './nag.js';
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
    const apiDomain = (apiId: string) => `${apiId}.execute-api.${stack.region}.${stack.urlSuffix}`;
    const origin = (apiId: string, originId: string) =>
      new HttpOrigin(apiDomain(apiId), { originId, protocolPolicy: OriginProtocolPolicy.HTTPS_ONLY, originSslProtocols: [OriginSslPolicy.TLS_V1_2] });
    // No caching, and every viewer header but Host (API Gateway routes by its own host name); with
    // caching disabled this policy forwards Authorization too.
    const passThrough = {
      cachePolicy: CachePolicy.CACHING_DISABLED,
      originRequestPolicy: OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
      viewerProtocolPolicy: ViewerProtocolPolicy.HTTPS_ONLY,
    };
    const streamRoute = new CloudFrontFunction(this, 'StreamRoute', {
      comment: 'Events stream: a WebSocket handshake goes to the WebSocket API stage, its path in x-stream-path',
      runtime: FunctionRuntime.JS_2_0,
      code: FunctionCode.fromInline(streamRouteFunctionCode(props.socketStage)),
    });
    this.distribution = new Distribution(this, 'Distribution', {
      comment: `${stack.stackName}: the Events API (HTTP and stream)`,
      httpVersion: HttpVersion.HTTP2_AND_3,
      priceClass: PriceClass.PRICE_CLASS_ALL,
      defaultBehavior: { origin: origin(props.httpApiId, EDGE_ORIGIN_IDS.http), allowedMethods: AllowedMethods.ALLOW_ALL, ...passThrough },
      additionalBehaviors: {
        [STREAM_PATH_PATTERN]: {
          origin: origin(props.socketApiId, EDGE_ORIGIN_IDS.socket),
          allowedMethods: AllowedMethods.ALLOW_ALL,
          ...passThrough,
          functionAssociations: [{ function: streamRoute, eventType: FunctionEventType.VIEWER_REQUEST }],
        },
      },
    });
    this.url = `https://${this.distribution.distributionDomainName}`;
    acknowledgeEventsEdge(this.distribution);
  }
}
