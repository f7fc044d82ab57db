/**
 * The stream in AWS, in the template (docs/decisions/stream-url-aws.md): the connection table, the
 * WebSocket function's grants on it, the `streams` queue's consumer and its IAM down to partition
 * keys, and the CloudFront distribution that serves the Events API and its stream under one URL,
 * whose viewer-request function runs here as CloudFront would run it. The handlers behind this
 * wiring run over the AWS adapters in test/contract/events-stream.aws.test.ts.
 */
import { runInNewContext } from 'node:vm';
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { CachePolicy, OriginRequestPolicy } from 'aws-cdk-lib/aws-cloudfront';
import { beforeAll, describe, expect, it } from 'vitest';
import { CONNECTION_TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import { inboxPartition, leasedIndex, waitingIndex } from '../../lambdas/events/keys.js';
import { subscriptionSlots, workspaceSlots } from '../../lambdas/events/stream-slots.js';
import { Router } from '../../lambdas/http/router.js';
import { ROUTES, SOCKET_ROUTES, STREAM_PATH_HEADER } from '../../lambdas/http/routes.js';
import { ENV } from '../../lambdas/shared/settings.js';
import { EDGE_ORIGIN_IDS, STREAM_PATH_PATTERN, streamRouteFunctionCode, streamRouteHandlerSource } from '../../lib/events-edge-function.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { CONNECTION_TABLE_ACTIONS } from '../../lib/route-function.js';
import { SOCKET_STAGE } from '../../lib/socket-api.js';
import { STREAM_CONSUMER, STREAM_CREDENTIAL_KEYS, STREAM_INBOX_KEYS, STREAM_ORIGIN_KEYS, STREAM_SLOT_KEYS } from '../../lib/stream-delivery.js';
import { CONSUMER_TAG } from '../../lib/function-defaults.js';
import { actionsOf, allowedStatements, routeFunctions, synthStack, taggedFunctions, type AllowStatement, leadingKeyPattern, consumerFunction, logicalIdIn, flatTemplate, RUNTIME_ENV_NAMES, TEST_REGION } from './helpers.js';

let stack: PlatformStack;
let template: Template;

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
});

const logicalId = (c: { node: { defaultChild?: unknown } }) => logicalIdIn(stack, c);
const resolve = (value: unknown) => JSON.stringify(Stack.of(stack).resolve(value));
/** Table.grant() names the table (and would name its indexes: it has none). */
const connectionTableArn = () => JSON.stringify([{ 'Fn::GetAtt': [logicalId(stack.socket.connections.table), 'Arn'] }]);
const like = leadingKeyPattern;

function leadingKeys(statements: AllowStatement[], action: string): string[] {
  return statements
    .filter((s) => s.actions.includes(action) && s.resources === JSON.stringify({ 'Fn::GetAtt': [logicalId(stack.storage.table), 'Arn'] }))
    .flatMap((s) => s.condition!['ForAllValues:StringLike']['dynamodb:LeadingKeys'] as string[]);
}

describe('connection table', () => {
  it('is keyed by connection id alone, on demand, with TTL, encrypted, and dropped with the stack', () => {
    const resources = template.findResources('AWS::DynamoDB::Table');
    const table = resources[logicalId(stack.socket.connections.table)] as { Properties: Record<string, unknown>; DeletionPolicy: string };
    expect(table.Properties).toMatchObject({
      KeySchema: [{ AttributeName: CONNECTION_TABLE_SCHEMA.partitionKey, KeyType: 'HASH' }],
      BillingMode: 'PAY_PER_REQUEST',
      TimeToLiveSpecification: { AttributeName: CONNECTION_TABLE_SCHEMA.ttlAttribute, Enabled: true },
      SSESpecification: { SSEEnabled: true },
    });
    expect(table.DeletionPolicy).toBe('Delete');
  });

  it('is read and written only by the WebSocket function (remember, recall, forget) and read or forgotten by the stream consumer', () => {
    const touching = [...routeFunctions(template), ...taggedFunctions(template, CONSUMER_TAG)].filter(([, fn]) =>
      allowedStatements(template, fn).some((s) => s.resources.includes(logicalId(stack.socket.connections.table))),
    );
    expect(touching.map(([name]) => name).sort()).toEqual([SOCKET_ROUTES[0].id, 'streams'].sort());
    const socketFn = routeFunctions(template).get(SOCKET_ROUTES[0].id)!;
    const onTable = allowedStatements(template, socketFn).filter((s) => s.resources.includes(logicalId(stack.socket.connections.table)));
    expect(actionsOf(onTable).sort()).toEqual([...CONNECTION_TABLE_ACTIONS].sort());
    expect(onTable.every((s) => s.resources === connectionTableArn())).toBe(true);
    expect(socketFn.props.Environment.Variables[ENV.connectionsTable]).toEqual({ Ref: logicalId(stack.socket.connections.table) });
  });
});

describe('stream consumer', () => {
  const fn = () => consumerFunction(template, 'streams');
  const statements = () => allowedStatements(template, fn());

  it('consumes the streams queue with ReportBatchItemFailures, no batch window and a concurrency bound', () => {
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: fn().logicalId },
      EventSourceArn: { 'Fn::GetAtt': [logicalId(stack.queues.byName.streams.queue), 'Arn'] },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: STREAM_CONSUMER.batchSize,
      ScalingConfig: { MaximumConcurrency: STREAM_CONSUMER.maxConcurrency },
    });
    expect(fn().props.Timeout).toBe(STREAM_CONSUMER.timeoutSeconds);
  });

  it('gets only the environment its work needs: the table, the streams queue URL, the stage endpoint, the connection table, and what checking a credential needs (server secret, signing keys)', () => {
    const env = fn().props.Environment.Variables as Record<string, unknown>;
    expect(Object.keys(env).sort()).toEqual([ENV.engine, ENV.tableName, ENV.queueUrls, ENV.connectionsEndpoint, ENV.connectionsTable, ENV.serverSecretArn, ENV.signingKeyIds, ...RUNTIME_ENV_NAMES].sort());
    expect(JSON.stringify(env[ENV.queueUrls])).toContain('\\"streams\\":');
    expect(JSON.stringify(env[ENV.queueUrls])).not.toContain('webhooks');
  });

  it('leases inbox messages and lists or frees stream slots, by partition key only, on the very keys the domain uses', () => {
    const s = statements();
    const onTable = s.filter((x) => x.resources.includes(logicalId(stack.storage.table)));
    expect(actionsOf(onTable).sort()).toEqual(['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:Query', 'dynamodb:Query', 'dynamodb:Query', 'dynamodb:UpdateItem']);
    // A pull queries the inbox's waiting and leased indexes: Query only, on the table's indexes, inbox keys only.
    const onIndexes = onTable.filter((x) => x.resources.includes('/index/*'));
    expect(onIndexes.map((x) => [x.actions, x.condition!['ForAllValues:StringLike']['dynamodb:LeadingKeys']])).toEqual([[['dynamodb:Query'], STREAM_INBOX_KEYS]]);
    expect([waitingIndex('sub_01J', 'evt_1').gsi1pk, leasedIndex('sub_01J', 1, 'evt_1').gsi2pk].every((pk) => STREAM_INBOX_KEYS.some((p) => like(p).test(pk)))).toBe(true);
    expect(leadingKeys(s, 'dynamodb:UpdateItem')).toEqual(STREAM_INBOX_KEYS);
    expect(leadingKeys(s, 'dynamodb:DeleteItem')).toEqual(STREAM_SLOT_KEYS);
    expect(leadingKeys(s, 'dynamodb:Query').sort()).toEqual([...STREAM_INBOX_KEYS, ...STREAM_SLOT_KEYS, ...STREAM_ORIGIN_KEYS].sort());
    // Checking a connection's credential: the items the resolver reads, GetItem only.
    expect(leadingKeys(s, 'dynamodb:GetItem').sort()).toEqual([...STREAM_CREDENTIAL_KEYS].sort());
    const covers = (patterns: string[], pk: string) => patterns.some((p) => like(p).test(pk));
    expect(covers(STREAM_INBOX_KEYS, inboxPartition('sub_01J'))).toBe(true);
    expect(covers(STREAM_SLOT_KEYS, subscriptionSlots('sub_01J'))).toBe(true);
    expect(covers(STREAM_SLOT_KEYS, workspaceSlots('ws_01J'))).toBe(true);
    // Nothing else of the table to write: no event, subscription, key or counter item.
    for (const pk of ['evt#ws_1', 'evsub#ws_1', 'evkey#ws_1', 'evstat#ws_1', 'key#abc']) expect(covers([...STREAM_INBOX_KEYS, ...STREAM_SLOT_KEYS], pk), pk).toBe(false);
  });

  it('posts to connections and closes one whose credential no longer holds, reads or forgets connection records, and sends only to the streams work queue', () => {
    const s = statements();
    const manage = s.filter((x) => x.actions.includes('execute-api:ManageConnections'));
    expect(manage.map((x) => x.resources)).toEqual([JSON.stringify(stack.socket.connections.manageArns.map((arn) => stack.resolve(arn)))]);
    const patterns = stack.socket.connections.manageArns.map((arn) => (stack.resolve(arn)['Fn::Join'][1] as unknown[]).filter((p) => typeof p === 'string').join(''));
    expect(patterns.some((p) => p.includes(`/${SOCKET_STAGE}/POST/@connections/*`))).toBe(true);
    expect(patterns.some((p) => p.includes(`/${SOCKET_STAGE}/DELETE/@connections/*`))).toBe(true);
    const onConnections = s.filter((x) => x.resources === connectionTableArn());
    expect(actionsOf(onConnections).sort()).toEqual(['dynamodb:DeleteItem', 'dynamodb:GetItem']);
    // Sends (the lease-end wake) and consumes (the event source mapping) the streams work queue, nothing else.
    const streams = JSON.stringify({ 'Fn::GetAtt': [logicalId(stack.queues.byName.streams.queue), 'Arn'] });
    const sqs = s.filter((x) => x.actions.some((a) => a.startsWith('sqs:')));
    expect(sqs.map((x) => x.resources)).toEqual([streams, streams]);
    expect(sqs.find((x) => x.actions.includes('sqs:SendMessage'))).toBeDefined();
    // The server secret (to open sealed credentials) and the signing key's public half; nothing of S3.
    expect(actionsOf(s).filter((a) => a.startsWith('secretsmanager:')).sort()).toEqual(['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue']);
    expect(actionsOf(s).filter((a) => a.startsWith('kms:')).sort()).toEqual(['kms:GetPublicKey']);
    expect(actionsOf(s).filter((a) => a.startsWith('s3:'))).toEqual([]);
  });
});

describe('the Events distribution: one URL for the HTTP routes and the stream', () => {
  const distribution = () => template.findResources('AWS::CloudFront::Distribution')[logicalId(stack.eventsEdge.distribution)] as { Properties: { DistributionConfig: any } };
  const apiDomain = (apiId: string) => ({ 'Fn::Join': ['', [{ Ref: apiId }, `.execute-api.${TEST_REGION}.`, { Ref: 'AWS::URLSuffix' }]] });

  it('sends every path to the Events HTTP API, and the stream path to the WebSocket API, over TLS 1.2, caching nothing and forwarding every viewer header but Host', () => {
    const config = distribution().Properties.DistributionConfig;
    const origins = Object.fromEntries(config.Origins.map((o: any) => [o.Id, o]));
    expect(Object.keys(origins).sort()).toEqual([EDGE_ORIGIN_IDS.http, EDGE_ORIGIN_IDS.socket].sort());
    const httpApi = logicalId(stack.http.stacks.events.node.findChild('Api'));
    const socketApi = Stack.of(stack).resolve(stack.socket.apiId).Ref as string;
    expect(origins[EDGE_ORIGIN_IDS.http].DomainName).toEqual(apiDomain(httpApi));
    expect(origins[EDGE_ORIGIN_IDS.socket].DomainName).toEqual(apiDomain(socketApi));
    for (const origin of Object.values(origins) as any[]) {
      expect(origin.CustomOriginConfig).toMatchObject({ OriginProtocolPolicy: 'https-only', OriginSSLProtocols: ['TLSv1.2'] });
      expect(origin.OriginPath ?? '').toBe('');
    }
    const passThrough = {
      CachePolicyId: CachePolicy.CACHING_DISABLED.cachePolicyId,
      OriginRequestPolicyId: OriginRequestPolicy.ALL_VIEWER_EXCEPT_HOST_HEADER.originRequestPolicyId,
      ViewerProtocolPolicy: 'https-only',
    };
    expect(config.DefaultCacheBehavior).toMatchObject({ TargetOriginId: EDGE_ORIGIN_IDS.http, AllowedMethods: expect.arrayContaining(['POST', 'DELETE', 'OPTIONS']), ...passThrough });
    expect(config.DefaultCacheBehavior.FunctionAssociations).toBeUndefined();
    expect(config.CacheBehaviors).toHaveLength(1);
    const [stream] = config.CacheBehaviors;
    expect(stream).toMatchObject({ PathPattern: STREAM_PATH_PATTERN, TargetOriginId: EDGE_ORIGIN_IDS.socket, ...passThrough });
    expect(stream.FunctionAssociations).toEqual([{ EventType: 'viewer-request', FunctionARN: { 'Fn::GetAtt': [expect.any(String), 'FunctionARN'] } }]);
  });

  it('runs the stream function on runtime 2.0 with the code this repository tests', () => {
    template.hasResourceProperties('AWS::CloudFront::Function', {
      FunctionConfig: Match.objectLike({ Runtime: 'cloudfront-js-2.0' }),
      FunctionCode: streamRouteFunctionCode(SOCKET_STAGE),
      AutoPublish: true,
    });
  });

  it("the stream path pattern matches the spec's stream URL and no other Events route", () => {
    const cloudfrontMatch = (path: string) => like(STREAM_PATH_PATTERN).test(path);
    expect(cloudfrontMatch('/v1/workspaces/ws_1/subscriptions/sub_1/stream')).toBe(true);
    for (const route of ROUTES.filter((r) => r.api === 'events' && r.path.startsWith('/'))) {
      const example = route.path.replace(/\{[^}]+\}/g, 'x1');
      expect(cloudfrontMatch(example), route.id).toBe(route.id === 'events.subscriptions.stream');
    }
  });

  it('outputs the distribution URL as the Events URL', () => {
    expect(template.findOutputs('EventsUrl').EventsUrl.Value).toEqual({ 'Fn::Join': ['', ['https://', { 'Fn::GetAtt': [expect.any(String), 'DomainName'] }]] });
  });
});

describe('the stream function, run as CloudFront runs it', () => {
  /** Evaluates the function's source with a stand-in for CloudFront's helper module; returns what it did. */
  function run(request: { uri: string; headers: Record<string, { value: string }>; querystring?: Record<string, { value: string }> }) {
    const selected: string[] = [];
    const cf = { selectRequestOriginById: (id: string) => selected.push(id) };
    const handler = runInNewContext(`${streamRouteHandlerSource(SOCKET_STAGE)}; handler`, { cf }) as (event: unknown) => typeof request;
    const out = handler({ request: { method: 'GET', querystring: {}, cookies: {}, ...request } });
    return { out, selected };
  }
  const path = '/v1/workspaces/ws_1/subscriptions/sub_1/stream';

  it('moves a WebSocket handshake to the stage path, its own path into x-stream-path, keeping the query and every header', () => {
    const { out, selected } = run({
      uri: path,
      headers: { upgrade: { value: 'WebSocket' }, 'sec-websocket-protocol': { value: 'service.v1, bearer.apb_x' }, authorization: { value: 'Bearer aik_x' } },
      querystring: { lease_seconds: { value: '20' } },
    });
    expect(selected).toEqual([]);
    expect(out.uri).toBe(`/${SOCKET_STAGE}`);
    expect(out.headers[STREAM_PATH_HEADER]).toEqual({ value: path });
    expect(out.headers['sec-websocket-protocol']).toEqual({ value: 'service.v1, bearer.apb_x' });
    expect(out.headers.authorization).toEqual({ value: 'Bearer aik_x' });
    expect(out.querystring).toEqual({ lease_seconds: { value: '20' } });
    // What $connect then routes: the stream route, with its parameters.
    const { route, params } = new Router('events', ROUTES).match('GET', out.headers[STREAM_PATH_HEADER].value);
    expect([route.id, params]).toEqual(['events.subscriptions.stream', { workspace_id: 'ws_1', subscription_id: 'sub_1' }]);
  });

  it('overwrites an x-stream-path the client sent', () => {
    const { out } = run({ uri: path, headers: { upgrade: { value: 'websocket' }, [STREAM_PATH_HEADER]: { value: '/v1/workspaces/other/subscriptions/x/stream' } } });
    expect(out.headers[STREAM_PATH_HEADER]).toEqual({ value: path });
  });

  it('sends a request that is no handshake to the HTTP API unchanged (which answers 426 upgrade_required after the credential checks)', () => {
    for (const headers of [{}, { upgrade: { value: 'h2c' } }] as Record<string, { value: string }>[]) {
      const { out, selected } = run({ uri: path, headers });
      expect(selected).toEqual([EDGE_ORIGIN_IDS.http]);
      expect(out.uri).toBe(path);
      expect(out.headers[STREAM_PATH_HEADER]).toBeUndefined();
    }
  });
});
