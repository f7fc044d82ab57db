/**
 * Operations in the template (docs/decisions/operations.md): the alarm topic and its e-mail
 * parameter, an alarm per watched thing of each kind (all notifying the topic), the dashboard, and
 * log retention on every log group.
 */
import type { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { QUEUES, type QueueName } from '../../lambdas/engine/queues.js';
import { ALARM_EMAIL_PARAMETER } from '../../lib/alarm-topic.js';
import { ERROR_RATE_MIN_CALLS, ERROR_RATE_PERCENT, QUEUE_AGE_ALARM_SECONDS } from '../../lib/alarms.js';
import { HTTP_APIS } from '../../lib/http-apis.js';
import { ENTRY_METADATA } from '../../lib/function-defaults.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { SOCKET_STAGE } from '../../lib/socket-api.js';
import { flatLogicalId, flatTemplate, logicalIdIn, synthStack } from './helpers.js';
import { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';

type Resource = { Type: string; Properties: Record<string, any>; Condition?: string };

let stack: PlatformStack;
let template: Template;
let alarms: Resource[];
let topicRef: { Ref: string };

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
  alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm')) as Resource[];
  topicRef = { Ref: logicalIdIn(stack, stack.alarms.topic) };
});

/** The metrics an alarm reads (a plain metric, or each metric of its math), as `namespace/name` with their dimensions. */
function metricsOf(alarm: Resource): { name: string; dimensions: string }[] {
  const p = alarm.Properties;
  if (p.MetricName) return [{ name: `${p.Namespace}/${p.MetricName}`, dimensions: JSON.stringify(p.Dimensions) }];
  return (p.Metrics as any[]).filter((m) => m.MetricStat).map((m) => ({ name: `${m.MetricStat.Metric.Namespace}/${m.MetricStat.Metric.MetricName}`, dimensions: JSON.stringify(m.MetricStat.Metric.Dimensions) }));
}
const reading = (...names: string[]) => alarms.filter((a) => names.every((n) => metricsOf(a).some((m) => m.name === n)));
const expression = (alarm: Resource) => (alarm.Properties.Metrics as any[]).find((m) => m.ReturnData !== false).Expression as string;

describe('the alarm topic', () => {
  it('is encrypted with a rotated key CloudWatch may use, takes TLS only, and lets CloudWatch publish for this account only', () => {
    const topic = template.findResources('AWS::SNS::Topic')[topicRef.Ref] as Resource;
    const keyId = topic.Properties.KmsMasterKeyId['Fn::GetAtt'][0] as string;
    const key = template.findResources('AWS::KMS::Key')[keyId] as Resource;
    expect(key.Properties.EnableKeyRotation).toBe(true);
    expect(JSON.stringify(key.Properties.KeyPolicy)).toContain('cloudwatch.amazonaws.com');
    const [policy] = Object.values(template.findResources('AWS::SNS::TopicPolicy', { Properties: { Topics: [topicRef] } })) as Resource[];
    const statements = policy.Properties.PolicyDocument.Statement as any[];
    expect(statements).toContainEqual(expect.objectContaining({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } }));
    const allow = statements.find((s) => s.Effect === 'Allow');
    expect(allow).toMatchObject({ Action: 'sns:Publish', Principal: { Service: 'cloudwatch.amazonaws.com' }, Condition: { StringEquals: { 'aws:SourceAccount': { Ref: 'AWS::AccountId' } } } });
  });

  it(`subscribes the ${ALARM_EMAIL_PARAMETER} parameter's address by e-mail, and nobody when it is empty (the default)`, () => {
    const parameter = template.toJSON().Parameters[ALARM_EMAIL_PARAMETER];
    expect(parameter).toMatchObject({ Type: 'String', Default: '' });
    const subscriptions = Object.values(template.findResources('AWS::SNS::Subscription')) as Resource[];
    expect(subscriptions).toHaveLength(1);
    expect(subscriptions[0].Properties).toEqual({ Protocol: 'email', Endpoint: { Ref: ALARM_EMAIL_PARAMETER }, TopicArn: topicRef });
    const condition = template.toJSON().Conditions[subscriptions[0].Condition!];
    expect(condition).toEqual({ 'Fn::Not': [{ 'Fn::Equals': [{ Ref: ALARM_EMAIL_PARAMETER }, ''] }] });
  });

  it('is what every alarm notifies, when it fires and when it clears', () => {
    expect(alarms.length).toBeGreaterThan(0);
    for (const a of alarms) {
      expect(a.Properties.AlarmActions, a.Properties.AlarmName).toEqual([topicRef]);
      expect(a.Properties.OKActions, a.Properties.AlarmName).toEqual([topicRef]);
      expect(a.Properties.TreatMissingData, a.Properties.AlarmName).toBe('notBreaching');
    }
  });
});

describe('alarms, one per watched thing', () => {
  const queueNames = Object.keys(QUEUES) as QueueName[];

  it("on each dead-letter queue's depth, as soon as it holds a message", () => {
    const found = reading('AWS/SQS/ApproximateNumberOfMessagesVisible');
    expect(found).toHaveLength(queueNames.length);
    for (const name of queueNames) {
      const dlq = { 'Fn::GetAtt': [logicalIdIn(stack, stack.queues.byName[name].deadLetterQueue), 'QueueName'] };
      const alarm = found.find((a) => metricsOf(a)[0].dimensions === JSON.stringify([{ Name: 'QueueName', Value: dlq }]));
      expect(alarm?.Properties, name).toMatchObject({ Threshold: 0, ComparisonOperator: 'GreaterThanThreshold', Statistic: 'Maximum' });
    }
  });

  it("on the age of each queue's oldest message, past what its own retries can make a message wait", () => {
    const found = reading('AWS/SQS/ApproximateAgeOfOldestMessage');
    expect(found).toHaveLength(queueNames.length);
    for (const name of queueNames) {
      const queue = { 'Fn::GetAtt': [logicalIdIn(stack, stack.queues.byName[name].queue), 'QueueName'] };
      const alarm = found.find((a) => metricsOf(a)[0].dimensions === JSON.stringify([{ Name: 'QueueName', Value: queue }]));
      expect(alarm?.Properties.Threshold, name).toBe(QUEUE_AGE_ALARM_SECONDS[name]);
      // Failed messages come back after retrySeconds (lambdas/engine/queues.ts; test/infra/queue-timeouts.test.ts adds the send delays).
      expect(QUEUE_AGE_ALARM_SECONDS[name], name).toBeGreaterThan(QUEUES[name].maxReceives * QUEUES[name].retrySeconds);
    }
  });

  it("on every function's errors plus throttles, one alarm each, in the function's own template", () => {
    const found = reading('AWS/Lambda/Errors', 'AWS/Lambda/Throttles');
    // Lambda@Edge functions report in each region they run in: no alarm (lib/operations.ts).
    const fns = stack.node.findAll().filter((c) => c instanceof NodejsFunction && c.node.metadata.some((m) => m.type === ENTRY_METADATA));
    expect(fns.length).toBeGreaterThan(40);
    expect(found).toHaveLength(fns.length);
    for (const fn of fns) {
      const ref = JSON.stringify([{ Name: 'FunctionName', Value: { Ref: flatLogicalId(fn.node.defaultChild as any) } }]);
      const mine = found.filter((a) => metricsOf(a).every((m) => m.dimensions === ref));
      expect(mine, fn.node.path).toHaveLength(1);
      expect(expression(mine[0])).toBe('errors + throttles');
      expect(mine[0].Properties.Threshold).toBe(0);
    }
    // Each API's functions' alarms live in that API's nested stack, beside the functions.
    for (const api of HTTP_APIS) {
      const inApi = Object.values(stack.http.stacks[api].node.findAll()).filter((c) => c.node.id === 'Alarm');
      expect(inApi.length, api).toBeGreaterThan(0);
    }
  });

  it(`on each HTTP API's 5xx rate, the console's included: over ${ERROR_RATE_PERCENT} % of at least ${ERROR_RATE_MIN_CALLS} calls`, () => {
    const found = reading('AWS/ApiGateway/5xx', 'AWS/ApiGateway/Count');
    const apis = { ...stack.http.apis, console: stack.console.api };
    expect(found).toHaveLength(Object.keys(apis).length);
    for (const [api, httpApi] of Object.entries(apis)) {
      const apiId = JSON.stringify([{ Name: 'ApiId', Value: { Ref: logicalIdIn(stack, httpApi) } }]);
      const alarm = found.find((a) => metricsOf(a).every((m) => m.dimensions === apiId));
      expect(alarm, api).toBeDefined();
      expect(expression(alarm!)).toBe(`IF(calls >= ${ERROR_RATE_MIN_CALLS}, 100 * errors / calls, 0)`);
      expect(alarm!.Properties.Threshold).toBe(ERROR_RATE_PERCENT);
    }
  });

  it("on the WebSocket API's failed executions, as a rate of its connects and messages", () => {
    const found = reading('AWS/ApiGateway/ExecutionError', 'AWS/ApiGateway/ConnectCount', 'AWS/ApiGateway/MessageCount');
    expect(found).toHaveLength(1);
    const dims = JSON.stringify([{ Name: 'ApiId', Value: { Ref: logicalIdIn(stack, stack.socket.node.findChild('Api')) } }, { Name: 'Stage', Value: SOCKET_STAGE }]);
    for (const m of metricsOf(found[0])) expect(m.dimensions).toBe(dims);
    expect(found[0].Properties.Threshold).toBe(ERROR_RATE_PERCENT);
  });

  it('on throttled reads and writes of each DynamoDB table', () => {
    const found = reading('AWS/DynamoDB/ReadThrottleEvents', 'AWS/DynamoDB/WriteThrottleEvents');
    const tables = [stack.storage.table, stack.socket.connections.table];
    expect(found).toHaveLength(tables.length);
    for (const table of tables) {
      const dims = JSON.stringify([{ Name: 'TableName', Value: { Ref: logicalIdIn(stack, table) } }]);
      expect(found.filter((a) => metricsOf(a).every((m) => m.dimensions === dims)), table.node.path).toHaveLength(1);
    }
  });

  it('and no other alarm than these kinds and the failing webhooks one (test/infra/webhook-delivery.test.ts)', () => {
    const kinds = ['AWS/SQS/ApproximateNumberOfMessagesVisible', 'AWS/SQS/ApproximateAgeOfOldestMessage', 'AWS/Lambda/Errors', 'AWS/ApiGateway/5xx', 'AWS/ApiGateway/ExecutionError', 'AWS/DynamoDB/ReadThrottleEvents', 'PlatformStack/WebhookAttemptsFailed'];
    for (const a of alarms) expect(kinds.filter((k) => metricsOf(a).some((m) => m.name === k)), a.Properties.AlarmName).toHaveLength(1);
  });
});

describe('the dashboard', () => {
  it("shows each API's calls, latency p50 and p99, 4xx and 5xx, the WebSocket API, and each queue's depth, age and dead letters", () => {
    const dashboards = Object.values(template.findResources('AWS::CloudWatch::Dashboard')) as Resource[];
    expect(dashboards).toHaveLength(1);
    // The body is JSON inside a join: read it without its escapes.
    const body = JSON.stringify(dashboards[0].Properties.DashboardBody).replace(/\\/g, '');
    for (const api of HTTP_APIS) expect(body, api).toContain(JSON.stringify({ Ref: logicalIdIn(stack, stack.http.apis[api]) }));
    expect(body, 'console').toContain(JSON.stringify({ Ref: logicalIdIn(stack, stack.console.api) }));
    for (const part of ['"Count"', '"Latency"', '"p50"', '"p99"', '"4xx"', '"5xx"', '"ConnectCount"', '"MessageCount"', '"ExecutionError"']) expect(body).toContain(part);
    for (const name of Object.keys(QUEUES) as QueueName[]) {
      for (const q of [stack.queues.byName[name].queue, stack.queues.byName[name].deadLetterQueue]) expect(body, name).toContain(logicalIdIn(stack, q));
    }
    for (const metric of ['ApproximateNumberOfMessagesVisible', 'ApproximateAgeOfOldestMessage']) expect(body).toContain(metric);
  });
});

describe('logs', () => {
  it('keep every log group for a set time, and send every function of ours to its own group', () => {
    const groups = template.findResources('AWS::Logs::LogGroup') as Record<string, Resource>;
    for (const [id, group] of Object.entries(groups)) expect(group.Properties.RetentionInDays, id).toBeGreaterThan(0);
    // Lambda@Edge names its own log groups, one per region it runs in (/aws/lambda/us-east-1.<name>).
    const fns = stack.node.findAll().filter((c) => c instanceof NodejsFunction && c.node.metadata.some((m) => m.type === ENTRY_METADATA));
    const resources = template.toJSON().Resources as Record<string, Resource>;
    for (const fn of fns) {
      const logGroup = resources[flatLogicalId(fn.node.defaultChild as any)].Properties.LoggingConfig?.LogGroup;
      expect(groups[logGroup?.Ref], fn.node.path).toBeDefined();
    }
    // The HTTP stages' access logs too, the console API's included (the WebSocket stage's only with -c apiGatewayCloudWatchRole: test/infra/regions.test.ts).
    const stages = (Object.values(template.findResources('AWS::ApiGatewayV2::Stage')) as Resource[]).filter((s) => s.Properties.StageName !== SOCKET_STAGE);
    expect(stages).toHaveLength(HTTP_APIS.length + 1);
    for (const stage of stages) expect(groups[stage.Properties.AccessLogSettings.DestinationArn['Fn::GetAtt'][0]]).toBeDefined();
  });
});
