import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import { LogGroupLogDestination, type IAccessLogSettings } from 'aws-cdk-lib/aws-apigatewayv2';
import { LogGroup, RetentionDays } from 'aws-cdk-lib/aws-logs';
import type { Construct } from 'constructs';

/** Fields both API kinds have: who called which route, and what the integration answered. */
const COMMON = {
  requestId: '$context.requestId',
  requestTime: '$context.requestTimeEpoch',
  ip: '$context.identity.sourceIp',
  routeKey: '$context.routeKey',
  status: '$context.status',
  integrationError: '$context.integrationErrorMessage',
};

/** JSON access logs into a log group with retention (nag APIG1); HTTP and WebSocket have different variables. */
export function accessLogSettings(scope: Construct, kind: 'http' | 'websocket'): IAccessLogSettings {
  const extra =
    kind === 'http'
      ? { method: '$context.httpMethod', path: '$context.path', protocol: '$context.protocol', responseLength: '$context.responseLength', latency: '$context.responseLatency', integrationStatus: '$context.integrationStatus' }
      : { eventType: '$context.eventType', connectionId: '$context.connectionId', integrationStatus: '$context.integration.status' };
  return {
    destination: new LogGroupLogDestination(new LogGroup(scope, 'AccessLogs', { retention: RetentionDays.THREE_MONTHS })),
    format: AccessLogFormat.custom(JSON.stringify({ ...COMMON, ...extra })),
  };
}
