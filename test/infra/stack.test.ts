import { Stack, type CfnElement } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import { QUEUES, type QueueName } from '../../lambdas/engine/queues.js';
import { ROUTES, SOCKET_ROUTES, countsCalls } from '../../lambdas/http/routes.js';
import { EDGE_TAG } from '../../lib/data-edge.js';
import { HTTP_APIS } from '../../lib/http-apis.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import {
  actionsOf,
  allowedStatements,
  expectedEnvNames,
  integratedFunction,
  nagFindings,
  routeFunctions,
  synthStack,
  flatTemplate,
  logicalIdIn,
} from './helpers.js';

const ALL_ROUTES = [...ROUTES, ...SOCKET_ROUTES];

let stack: PlatformStack;
let template: Template;

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
});

/** Logical id of the API named `PlatformStack-<suffix>`. */
function apiId(suffix: string, protocol: 'HTTP' | 'WEBSOCKET'): string {
  const found = Object.keys(template.findResources('AWS::ApiGatewayV2::Api', { Properties: { Name: `PlatformStack-${suffix}`, ProtocolType: protocol } }));
  expect(found).toHaveLength(1);
  return found[0];
}

function routesOf(api: string) {
  return Object.values(template.findResources('AWS::ApiGatewayV2::Route', { Properties: { ApiId: { Ref: api } } })) as {
    Type: string;
    Properties: Record<string, any>;
  }[];
}

describe('functions', () => {
  it('has exactly one function per route table entry, Node.js 22+ on arm64', () => {
    const fns = routeFunctions(template);
    expect([...fns.keys()].sort()).toEqual(ALL_ROUTES.map((r) => r.id).sort());
    for (const { props } of fns.values()) {
      const major = Number(/^nodejs(\d+)\.x$/.exec(props.Runtime)?.[1]);
      expect(major).toBeGreaterThanOrEqual(22);
      expect(props.Architectures).toEqual(['arm64']);
      expect(props.Handler).toBe('index.handler');
    }
  });

  it('lets every HTTP route function record activity: table:write writes all, the others only act# items', () => {
    const fns = routeFunctions(template);
    for (const route of ROUTES) {
      const statements = allowedStatements(template, fns.get(route.id)!);
      const puts = statements.filter((s) => s.actions.includes('dynamodb:PutItem'));
      expect(puts.length, route.id).toBeGreaterThanOrEqual(1);
      if (!route.grants.includes('table:write')) {
        for (const s of puts) expect(s.condition, route.id).toEqual({ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['act#*'] } });
      }
    }
  });

  it('lets Data and Events functions without table:write count calls: UpdateItem on rate# items only; AI and credential-less routes not', () => {
    const fns = routeFunctions(template);
    for (const route of ROUTES) {
      const updates = allowedStatements(template, fns.get(route.id)!).filter((s) => s.actions.includes('dynamodb:UpdateItem'));
      if (route.grants.includes('table:write')) continue;
      if (countsCalls(route)) {
        expect(updates, route.id).toHaveLength(1);
        expect(updates[0].actions, route.id).toEqual(['dynamodb:UpdateItem']);
        expect(updates[0].condition, route.id).toEqual({ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['rate#*'] } });
      } else {
        expect(updates, route.id).toEqual([]);
      }
    }
    expect(ROUTES.filter((r) => countsCalls(r) && !r.grants.includes('table:write')).map((r) => r.id)).toEqual(expect.arrayContaining(['data.databases.list', 'events.fallback']));
  });

  it('gives each function ENGINE=aws and only the variables its grants need', () => {
    const fns = routeFunctions(template);
    for (const route of ALL_ROUTES) {
      const env = fns.get(route.id)!.props.Environment.Variables as Record<string, unknown>;
      expect(env.ENGINE).toBe('aws');
      expect(Object.keys(env).sort(), route.id).toEqual(expectedEnvNames(route.grants, 'api' in route ? route.api : undefined));
    }
  });

  it('runs every function of the stack with source maps on, so stack traces in the logs name source files and lines', () => {
    // Every Node.js function (CDK's own Python custom resource, writing the bucket's notifications at deploy time, has no source maps to read).
    // (Lambda@Edge functions take no environment at all: lib/data-edge.ts.)
    const fns = (Object.values(template.findResources('AWS::Lambda::Function')) as { Properties: { Runtime?: string; Tags?: { Key: string }[]; Environment?: { Variables?: Record<string, unknown> } } }[]).filter(
      (fn) => fn.Properties.Runtime?.startsWith('nodejs') && !fn.Properties.Tags?.some((t) => t.Key === EDGE_TAG),
    );
    expect(fns.length).toBeGreaterThan(ALL_ROUTES.length);
    for (const fn of fns) expect(fn.Properties.Environment?.Variables?.NODE_OPTIONS).toBe('--enable-source-maps');
  });

  it('lets a table:read-only function read the table, and write only activity items (partition key act#...)', () => {
    const route = ROUTES.find((r) => r.grants.length === 1 && r.grants[0] === 'table:read');
    expect(route, 'the route table has a table:read-only route').toBeDefined();
    const statements = allowedStatements(template, routeFunctions(template).get(route!.id)!);
    const unconditioned = statements.filter((s) => !s.condition);
    const actions = actionsOf(statements);
    expect(actionsOf(unconditioned)).toEqual(expect.arrayContaining(['dynamodb:GetItem', 'dynamodb:Query']));
    for (const write of ['PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem', 'PartiQLInsert', 'PartiQLUpdate', 'PartiQLDelete']) {
      expect(actionsOf(unconditioned)).not.toContain(`dynamodb:${write}`);
    }
    // The implicit activity grant: PutItem (also what TransactWriteItems checks) and BatchWriteItem, on the
    // table itself (not its indexes), only for items whose partition key begins with act#.
    const writes = statements.filter((s) => s.actions.some((a) => /^dynamodb:(Put|Update|Delete|BatchWrite|PartiQL)/.test(a)));
    expect(writes).toHaveLength(1);
    expect(writes[0].actions.sort()).toEqual(['dynamodb:BatchWriteItem', 'dynamodb:PutItem']);
    expect(writes[0].condition).toEqual({ 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': ['act#*'] } });
    expect(writes[0].resources).toBe(JSON.stringify({ 'Fn::GetAtt': [stack.getLogicalId(stack.storage.table.node.defaultChild as CfnElement), 'Arn'] }));
    expect(actions.filter((a) => a.endsWith('*') || a === '*')).toEqual([]);
    // Nothing beyond the table, the signing public key (every function verifies tokens) and its own log group.
    const allowed = (a: string) => a.startsWith('dynamodb:') || a === 'kms:GetPublicKey' || a === 'logs:CreateLogStream' || a === 'logs:PutLogEvents';
    expect(actions.filter((a) => !allowed(a))).toEqual([]);
  });
});

describe('HTTP APIs', () => {
  it.each(HTTP_APIS)('%s API has exactly its table routes, each invoking its own function', (api) => {
    const fns = routeFunctions(template);
    const routes = routesOf(apiId(api, 'HTTP'));
    const expected = ROUTES.filter((r) => r.api === api);
    expect(routes.map((r) => r.Properties.RouteKey).sort()).toEqual(
      expected.map((r) => (r.path === '$default' ? '$default' : `${r.method} ${r.path}`)).sort(),
    );
    for (const def of expected) {
      const key = def.path === '$default' ? '$default' : `${def.method} ${def.path}`;
      const route = routes.find((r) => r.Properties.RouteKey === key)!;
      expect(integratedFunction(template, route), def.id).toBe(fns.get(def.id)!.logicalId);
    }
  });

  it.each(HTTP_APIS)('%s API has a $default route and an auto-deployed $default stage with access logs', (api) => {
    const id = apiId(api, 'HTTP');
    expect(routesOf(id).map((r) => r.Properties.RouteKey)).toContain('$default');
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      ApiId: { Ref: id },
      StageName: '$default',
      AutoDeploy: true,
      AccessLogSettings: { DestinationArn: Match.anyValue(), Format: Match.stringLikeRegexp('\\$context\\.requestId') },
    });
  });
});

describe('Events WebSocket API', () => {
  it('routes $connect, $default and $disconnect to the socket functions, on stage v1', () => {
    const fns = routeFunctions(template);
    const id = apiId('events-socket', 'WEBSOCKET');
    const routes = routesOf(id);
    expect(routes.map((r) => r.Properties.RouteKey).sort()).toEqual(SOCKET_ROUTES.flatMap((r) => r.routeKeys).sort());
    expect(routes.map((r) => r.Properties.RouteKey)).toEqual(expect.arrayContaining(['$connect', '$default', '$disconnect']));
    for (const def of SOCKET_ROUTES) {
      for (const key of def.routeKeys) {
        const route = routes.find((r) => r.Properties.RouteKey === key)!;
        expect(integratedFunction(template, route), `${def.id} ${key}`).toBe(fns.get(def.id)!.logicalId);
      }
    }
    // Access logs only with the account's API Gateway CloudWatch role opted into (test/infra/regions.test.ts).
    template.hasResourceProperties('AWS::ApiGatewayV2::Stage', { ApiId: { Ref: id }, StageName: 'v1', AutoDeploy: true, AccessLogSettings: Match.absent() });
  });

  it('lets connections:post functions manage connections of this API stage only', () => {
    const id = apiId('events-socket', 'WEBSOCKET');
    const fns = routeFunctions(template);
    for (const route of ALL_ROUTES) {
      const statements = allowedStatements(template, fns.get(route.id)!).filter((s) => s.actions.some((a) => a.startsWith('execute-api:')));
      if (!route.grants.includes('connections:post')) {
        expect(statements, route.id).toEqual([]);
        continue;
      }
      expect(statements).toHaveLength(1);
      expect(statements[0].actions).toEqual(['execute-api:ManageConnections']);
      expect(statements[0].resources).toContain(`{"Ref":"${id}"},"/v1/POST/@connections/*"`);
    }
  });
});

describe('storage', () => {
  it('has the table of TABLE_SCHEMA: on demand, PITR, TTL, both GSIs, encrypted', () => {
    const gsis = Object.entries(TABLE_SCHEMA.indexes).map(([IndexName, k]) => ({
      IndexName,
      KeySchema: [
        { AttributeName: k.partitionKey, KeyType: 'HASH' },
        { AttributeName: k.sortKey, KeyType: 'RANGE' },
      ],
      Projection: { ProjectionType: 'ALL' },
    }));
    // The platform table and the WebSocket connection table (test/infra/stream-delivery.test.ts).
    template.resourceCountIs('AWS::DynamoDB::Table', 2);
    template.hasResourceProperties('AWS::DynamoDB::Table', {
      KeySchema: [
        { AttributeName: TABLE_SCHEMA.partitionKey, KeyType: 'HASH' },
        { AttributeName: TABLE_SCHEMA.sortKey, KeyType: 'RANGE' },
      ],
      BillingMode: 'PAY_PER_REQUEST',
      PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true },
      TimeToLiveSpecification: { AttributeName: 'expires_at', Enabled: true },
      GlobalSecondaryIndexes: Match.arrayWith(gsis),
      SSESpecification: { SSEEnabled: true },
    });
    const table = template.findResources('AWS::DynamoDB::Table')[stack.getLogicalId(stack.storage.table.node.defaultChild as CfnElement)] as any;
    expect(table.Properties.GlobalSecondaryIndexes).toHaveLength(gsis.length);
  });

  it('blocks public access and denies plain HTTP on every bucket', () => {
    const buckets = template.findResources('AWS::S3::Bucket');
    expect(Object.keys(buckets).length).toBeGreaterThanOrEqual(1);
    for (const [id, bucket] of Object.entries(buckets) as [string, any][]) {
      expect(bucket.Properties.PublicAccessBlockConfiguration, id).toEqual({
        BlockPublicAcls: true,
        BlockPublicPolicy: true,
        IgnorePublicAcls: true,
        RestrictPublicBuckets: true,
      });
      template.hasResourceProperties('AWS::S3::BucketPolicy', {
        Bucket: { Ref: id },
        PolicyDocument: {
          Statement: Match.arrayWith([
            Match.objectLike({ Effect: 'Deny', Principal: { AWS: '*' }, Condition: { Bool: { 'aws:SecureTransport': 'false' } } }),
          ]),
        },
      });
    }
    // The blob bucket logs its access to the log bucket.
    const blobs = stack.getLogicalId(stack.storage.bucket.node.defaultChild as CfnElement);
    expect((buckets[blobs] as any).Properties.LoggingConfiguration?.DestinationBucketName).toBeDefined();
  });
});

describe('queues', () => {
  it.each(Object.keys(QUEUES) as QueueName[])('%s has a dead-letter queue after maxReceives, SSL only', (name) => {
    const { queue, deadLetterQueue } = stack.queues.byName[name];
    const resources = template.findResources('AWS::SQS::Queue');
    const q = resources[stack.getLogicalId(queue.node.defaultChild as CfnElement)] as any;
    const dlq = stack.getLogicalId(deadLetterQueue.node.defaultChild as CfnElement);
    expect(q.Properties.RedrivePolicy).toEqual({ deadLetterTargetArn: { 'Fn::GetAtt': [dlq, 'Arn'] }, maxReceiveCount: QUEUES[name].maxReceives });
    expect(q.Properties.VisibilityTimeout).toBe(QUEUES[name].visibilitySeconds);
    expect((resources[dlq] as any).Properties.MessageRetentionPeriod).toBe(14 * 24 * 3600);
    for (const id of [stack.getLogicalId(queue.node.defaultChild as CfnElement), dlq]) {
      expect((resources[id] as any).Properties.SqsManagedSseEnabled ?? (resources[id] as any).Properties.KmsMasterKeyId).toBeTruthy();
      template.hasResourceProperties('AWS::SQS::QueuePolicy', {
        Queues: [{ Ref: id }],
        PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Effect: 'Deny', Condition: { Bool: { 'aws:SecureTransport': 'false' } } })]) },
      });
    }
  });

  it('creates no other queues', () => {
    template.resourceCountIs('AWS::SQS::Queue', Object.keys(QUEUES).length * 2);
  });
});

it('outputs the three API URLs, the WebSocket URL, the Data, Events and AI URLs (the distributions), the console URL, the table name and the vector bucket name, each described', () => {
  const outputs = template.findOutputs('*');
  expect(Object.keys(outputs).sort()).toEqual(['AiApiUrl', 'AiUrl', 'ConsoleUrl', 'DataApiUrl', 'DataUrl', 'EventsApiUrl', 'EventsSocketUrl', 'EventsUrl', 'TableName', 'VectorBucketName']);
  for (const [name, output] of Object.entries(outputs)) expect(output.Description, name).toMatch(/\w{3,}.{20,}/);
  expect(outputs.TableName.Value).toEqual({ Ref: logicalIdIn(stack, stack.storage.table) });
  // What the admin CLI's `vector-db create` needs on AWS (VECTOR_BUCKET_NAME): the name, not the ARN.
  expect(outputs.VectorBucketName.Value).toEqual({ 'Fn::Select': [1, { 'Fn::Split': ['/', { 'Fn::GetAtt': [stack.getLogicalId(stack.vectors.resource), 'VectorBucketArn'] }] }] });
  expect(Stack.of(stack).resolve(stack.socket.url)['Fn::Join'][1][0]).toBe('wss://');
});

// The one cdk-nag run for the whole stack: grants, signing, the edges and the delivery constructs included.
describe('cdk-nag AwsSolutions', () => {
  it('reports no unacknowledged error or warning', () => {
    const { app } = synthStack({ nag: true });
    expect(nagFindings(app)).toEqual([]);
  });
});
