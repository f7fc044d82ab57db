/**
 * The vector bucket (lib/vector-bucket.ts) and what reaches it: the `vectors:read` and `vectors:write`
 * grants of routes (test routes here, beside whatever routes of the table hold them), and the jobs
 * queue's consumer (lib/jobs-consumer.ts). Each function gets exactly its grant's S3 Vectors actions,
 * on the indexes of the one vector bucket, and VECTOR_BUCKET_NAME; every other function gets neither,
 * and its bundle leaves the S3 Vectors client out.
 */
import type { App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import type { RouteDef } from '../../lambdas/http/routes.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { QUEUES } from '../../lambdas/engine/queues.js';
import { ENTRY_METADATA, type EntryMetadata } from '../../lib/function-defaults.js';
import { VECTOR_ACTIONS } from '../../lib/vector-bucket.js';
import { JOBS } from '../../lib/jobs-consumer.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { allowedStatements, consumerFunction, flatLogicalId, flatTemplate, nagFindings, routeFunctions, synthStack, taggedFunctions, type RouteFunctionResource } from './helpers.js';
import { CONSUMER_TAG } from '../../lib/function-defaults.js';

vi.mock('../../lambdas/http/routes.js', async (importOriginal) => {
  const actual = await importOriginal<typeof import('../../lambdas/http/routes.js')>();
  const handler = actual.ROUTES[0].handler; // any module that exists on disk
  const extra: RouteDef[] = [
    { id: 'ai.test.vectors-read', api: 'ai', method: 'POST', path: '/v1/test/vectors/query', handler, grants: ['table:read', 'vectors:read'] },
    { id: 'ai.test.vectors-write', api: 'ai', method: 'POST', path: '/v1/test/vectors/ingest', handler, grants: ['table:write', 'vectors:write'] },
    { id: 'ai.test.vectors-both', api: 'ai', method: 'POST', path: '/v1/test/vectors/both', handler, grants: ['table:write', 'vectors:read', 'vectors:write'] },
  ];
  return { ...actual, ROUTES: [...actual.ROUTES, ...extra] };
});

let app: App;
let stack: PlatformStack;
let template: Template;
let bucketId: string;

beforeAll(() => {
  ({ app, stack } = synthStack({ nag: true }));
  template = flatTemplate(stack);
  bucketId = flatLogicalId(stack.vectors.resource);
});

const S3_VECTORS = /^s3vectors:/;
const vectorStatements = (fn: RouteFunctionResource) => allowedStatements(template, fn).filter((s) => s.actions.some((a) => S3_VECTORS.test(a)));
/** The index wildcard of the one vector bucket, as the template holds it. */
const indexArns = () => JSON.stringify({ 'Fn::Join': ['', [{ 'Fn::GetAtt': [bucketId, 'VectorBucketArn'] }, '/index/*']] });
const bucketNameOf = () => ({ 'Fn::Select': [1, { 'Fn::Split': ['/', { 'Fn::GetAtt': [bucketId, 'VectorBucketArn'] }] }] });
const definesOf = (fn: RouteFunctionResource): Record<string, string> => {
  const construct = stack.node.findAll().find((c) => c.node.metadata.some((m) => m.type === ENTRY_METADATA) && flatLogicalId(c.node.defaultChild as never) === fn.logicalId);
  return (construct!.node.metadata.find((m) => m.type === ENTRY_METADATA)!.data as EntryMetadata).define;
};

describe('the vector bucket', () => {
  it('is one S3 Vectors vector bucket, SSE-S3 encrypted, kept when the stack is deleted', () => {
    const buckets = template.findResources('AWS::S3Vectors::VectorBucket');
    expect(Object.keys(buckets)).toEqual([bucketId]);
    expect(buckets[bucketId]).toMatchObject({ DeletionPolicy: 'Retain', UpdateReplacePolicy: 'Retain', Properties: { EncryptionConfiguration: { SseType: 'AES256' } } });
    // Indexes are the vector databases', made at run time: none in the template.
    expect(template.findResources('AWS::S3Vectors::Index')).toEqual({});
  });
});

describe('vectors grants', () => {
  it('vectors:read queries the indexes (GetVectors too: every query filters or returns metadata), nothing else of S3 Vectors', () => {
    const fn = routeFunctions(template).get('ai.test.vectors-read')!;
    expect(vectorStatements(fn)).toEqual([{ actions: [...VECTOR_ACTIONS.read], resources: indexArns() }]);
    expect(fn.props.Environment.Variables.VECTOR_BUCKET_NAME).toEqual(bucketNameOf());
  });

  it('vectors:write writes, makes and removes indexes, and cannot query them', () => {
    const fn = routeFunctions(template).get('ai.test.vectors-write')!;
    expect(vectorStatements(fn)).toEqual([{ actions: [...VECTOR_ACTIONS.write], resources: indexArns() }]);
    // Both grants: one statement, their union.
    const both = routeFunctions(template).get('ai.test.vectors-both')!;
    expect(vectorStatements(both)).toEqual([{ actions: [...new Set([...VECTOR_ACTIONS.read, ...VECTOR_ACTIONS.write])], resources: indexArns() }]);
    expect(VECTOR_ACTIONS.write).not.toContain('s3vectors:QueryVectors');
    expect(fn.props.Environment.Variables.VECTOR_BUCKET_NAME).toEqual(bucketNameOf());
  });

  it('every route function follows its grants alone: no vectors grant, no S3 Vectors action, no bucket name, no client in its bundle', () => {
    const fns = routeFunctions(template);
    for (const route of ROUTES) {
      const fn = fns.get(route.id)!;
      const read = route.grants.includes('vectors:read');
      const write = route.grants.includes('vectors:write');
      const actions = vectorStatements(fn).flatMap((s) => s.actions).sort();
      const expected = [...new Set([...(read ? VECTOR_ACTIONS.read : []), ...(write ? VECTOR_ACTIONS.write : [])])].sort();
      expect(vectorStatements(fn).length, route.id).toBe(read || write ? 1 : 0);
      expect(actions, route.id).toEqual(expected);
      expect('VECTOR_BUCKET_NAME' in fn.props.Environment.Variables, route.id).toBe(read || write);
      expect(definesOf(fn)['globalThis.PLATFORM_PORT_VECTORS'], route.id).toBe(read || write ? undefined : '"absent"');
    }
  });

  it("the vector database's routes: a query reads, an ingest and a document delete also write, a document list never touches the bucket", () => {
    const fns = routeFunctions(template);
    const actionsOf = (id: string) => vectorStatements(fns.get(id)!).flatMap((s) => s.actions);
    expect(actionsOf('ai.vector.query')).toEqual([...VECTOR_ACTIONS.read]);
    for (const id of ['ai.vector.ingest', 'ai.vector.documents.delete']) expect(actionsOf(id).sort(), id).toEqual([...new Set([...VECTOR_ACTIONS.read, ...VECTOR_ACTIONS.write])].sort());
    expect(actionsOf('ai.vector.documents.list')).toEqual([]);
  });

  it('no statement of any role is broader: S3 Vectors actions are named one by one, on the index wildcard only', () => {
    const policies = Object.values(template.findResources('AWS::IAM::Policy') as Record<string, { Properties: { PolicyDocument: { Statement: { Action: string | string[]; Resource: unknown }[] } } }>);
    const statements = policies.flatMap((p) => p.Properties.PolicyDocument.Statement).filter((s) => ([] as string[]).concat(s.Action).some((a) => a === '*' || S3_VECTORS.test(a)));
    expect(statements.length).toBeGreaterThan(0);
    for (const s of statements) {
      for (const action of ([] as string[]).concat(s.Action)) expect(action).toMatch(/^s3vectors:[A-Z][A-Za-z]+$/);
      expect(JSON.stringify(s.Resource)).toBe(indexArns());
    }
  });
});

describe('the jobs queue consumer', () => {
  it('runs lambdas/consumers/jobs on the jobs queue with partial batch responses, within a sixth of its visibility timeout', () => {
    const fn = consumerFunction(template, 'jobs');
    const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping') as Record<string, { Properties: Record<string, any> }>).filter(
      (m) => JSON.stringify(m.Properties.FunctionName).includes(fn.logicalId),
    );
    expect(mappings).toHaveLength(1);
    expect(mappings[0].Properties).toMatchObject({
      EventSourceArn: { 'Fn::GetAtt': [flatLogicalId(stack.queues.byName.jobs.queue.node.defaultChild as never), 'Arn'] },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: JOBS.batchSize,
      ScalingConfig: { MaximumConcurrency: JOBS.maxConcurrency },
    });
    expect(fn.props.Timeout).toBe(JOBS.timeoutSeconds);
    expect(6 * fn.props.Timeout).toBeLessThanOrEqual(QUEUES.jobs.visibilitySeconds);
    expect(taggedFunctions(template, CONSUMER_TAG).get('jobs')!.logicalId).toBe(fn.logicalId);
  });

  it('may read and write the table, write the vector indexes and send to jobs only; its environment names those', () => {
    const fn = consumerFunction(template, 'jobs');
    expect(Object.keys(fn.props.Environment.Variables).sort()).toEqual(['ENGINE', 'NODE_OPTIONS', 'QUEUE_URLS', 'TABLE_NAME', 'VECTOR_BUCKET_NAME']);
    const statements = allowedStatements(template, fn);
    expect(vectorStatements(fn)).toEqual([{ actions: [...VECTOR_ACTIONS.write], resources: indexArns() }]);
    const sends = statements.filter((s) => s.actions.includes('sqs:SendMessage'));
    expect(sends).toHaveLength(1);
    expect(sends[0].resources).toBe(JSON.stringify({ 'Fn::GetAtt': [flatLogicalId(stack.queues.byName.jobs.queue.node.defaultChild as never), 'Arn'] }));
    expect(statements.flatMap((s) => s.actions)).toEqual(expect.arrayContaining(['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:DeleteItem']));
    expect(statements.some((s) => s.actions.some((a) => /^(s3|secretsmanager|kms|execute-api):/.test(a)) && !s.actions.some((a) => a.startsWith('kms:Decrypt')))).toBe(false);
    expect(definesOf(fn)['globalThis.PLATFORM_PORT_VECTORS']).toBeUndefined();
  });

  it('has the alarms every consumer has: its errors, and the jobs queue\'s dead letters and oldest message', () => {
    const fn = consumerFunction(template, 'jobs');
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm') as Record<string, { Properties: Record<string, any> }>).map((a) => JSON.stringify(a.Properties));
    expect(alarms.some((a) => a.includes(fn.logicalId) && a.includes('Errors'))).toBe(true);
    expect(alarms.some((a) => a.includes('jobs-dead-letters'))).toBe(true);
    expect(alarms.some((a) => a.includes('jobs-oldest-message'))).toBe(true);
  });
});

it('cdk-nag finds nothing on the vector bucket, the jobs consumer or the vectors routes', () => {
  const paths = nagFindings(app).flatMap((v) => (v.violatingConstructs ?? []).map((c) => `${v.ruleName} ${c.constructPath}`));
  expect(paths.filter((p) => /Vectors|Jobs|TestVectors/i.test(p))).toEqual([]);
  expect(paths).toEqual([]);
});
