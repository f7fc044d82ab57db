import { Stack } from 'aws-cdk-lib';
import { AllowedMethods, CachePolicy, HttpVersion, OriginProtocolPolicy, OriginRequestPolicy, OriginSslPolicy, PriceClass, ViewerProtocolPolicy, type DistributionProps } from 'aws-cdk-lib/aws-cloudfront';
import { HttpOrigin } from 'aws-cdk-lib/aws-cloudfront-origins';
import type { Construct } from 'constructs';

/**
 * What the API distributions (lib/events-edge.ts, lib/ai-edge.ts) share: CloudFront as a pass-through
 * in front of API Gateway, never a cache.
 */

/**
 * A behavior's pass-through: every method, nothing cached, every viewer header but Host (API Gateway
 * and function URLs route by their own host name; with caching disabled this policy forwards
 * Authorization too), HTTPS only.
 */
export const PASS_THROUGH = {
  allowedMethods: AllowedMethods.ALLOW_ALL,
  cachePolicy: CachePolicy.CACHING_DISABLED,
  originRequestPolicy: OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER,
  viewerProtocolPolicy: ViewerProtocolPolicy.HTTPS_ONLY,
} as const;

/** The distribution-wide settings of an API front. */
export const API_DISTRIBUTION: Pick<DistributionProps, 'httpVersion' | 'priceClass'> = { httpVersion: HttpVersion.HTTP2_AND_3, priceClass: PriceClass.PRICE_CLASS_ALL };

/** An API Gateway API (HTTP or WebSocket) as an origin, by its id, reached over TLS 1.2 only; `customHeaders` are added to every request CloudFront sends it. */
export function apiGatewayOrigin(scope: Construct, apiId: string, originId: string, customHeaders?: Record<string, string>): HttpOrigin {
  const stack = Stack.of(scope);
  return new HttpOrigin(`${apiId}.execute-api.${stack.region}.${stack.urlSuffix}`, { originId, protocolPolicy: OriginProtocolPolicy.HTTPS_ONLY, originSslProtocols: [OriginSslPolicy.TLS_V1_2], customHeaders });
}
