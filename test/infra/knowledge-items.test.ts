/**
 * The knowledge queue's consumer in the template (lib/knowledge-items.ts): the event source (one item
 * an invocation, partial batch responses, bounded concurrency), the queue's redrive to its dead-letter
 * queue, the function's timeout a sixth of the visibility timeout at most, its memory, its environment and bundle,
 * its IAM statement by statement (the blob prefixes it names are the domain's), its alarms, and cdk-nag
 * clean. Processing on the AWS adapters runs in test/api/ai-collection-items-aws.test.ts.
 */
import type { App } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { QUEUES } from '../../lambdas/engine/queues.js';
import { packageBlobKey, sourceBlobKey } from '../../lambdas/knowledge/collection-keys.js';
import { uploadBytesKey } from '../../lambdas/knowledge/upload-keys.js';
import { ENV } from '../../lambdas/shared/settings.js';
import { FFMPEG_LAYER_PATHS } from '../../lib/ffmpeg-layer.js';
import { ENTRY_METADATA, type EntryMetadata } from '../../lib/function-defaults.js';
import { KNOWLEDGE_BLOB_PREFIXES, KNOWLEDGE_ITEMS } from '../../lib/knowledge-items.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { API_BLOB_PREFIXES } from '../../lib/route-function.js';
import { BEDROCK_ACTIONS } from '../../lib/upstream-grants.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { allowedStatements, consumerFunction, flatLogicalId, flatTemplate, nagFindings, routeFunctions, RUNTIME_ENV_NAMES, synthStack, type AllowStatement } from './helpers.js';

let app: App;
let stack: PlatformStack;
let template: Template;
let fn: ReturnType<typeof consumerFunction>;
let statements: AllowStatement[];

const queueId = () => flatLogicalId(stack.queues.byName.knowledge.queue.node.defaultChild as never);
const deadId = () => flatLogicalId(stack.queues.byName.knowledge.deadLetterQueue.node.defaultChild as never);
const arn = (id: string, attribute = 'Arn') => ({ 'Fn::GetAtt': [id, attribute] });
const objects = (prefix: string) => ({ 'Fn::Join': ['', [arn(flatLogicalId(stack.storage.bucket.node.defaultChild as never)), `/${prefix}*`]] });

beforeAll(() => {
  ({ app, stack } = synthStack({ nag: true }));
  template = flatTemplate(stack);
  fn = consumerFunction(template, 'knowledge-items');
  statements = allowedStatements(template, fn);
});

describe('the knowledge queue consumer', () => {
  it('takes one item an invocation from the knowledge queue, with partial batch responses and bounded concurrency', () => {
    const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping') as Record<string, { Properties: Record<string, any> }>).filter((m) =>
      JSON.stringify(m.Properties.FunctionName).includes(fn.logicalId),
    );
    expect(mappings).toHaveLength(1);
    expect(mappings[0].Properties).toMatchObject({
      EventSourceArn: arn(queueId()),
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: 1,
      ScalingConfig: { MaximumConcurrency: KNOWLEDGE_ITEMS.maxConcurrency },
    });
    expect(KNOWLEDGE_ITEMS.maxConcurrency).toBeGreaterThanOrEqual(2); // SQS's floor for a mapping's maximum concurrency
    expect(mappings[0].Properties.MaximumBatchingWindowInSeconds ?? 0).toBe(0);
  });

  it('runs within a sixth of the queue visibility timeout, and a message failed 5 times rests in knowledge-dead', () => {
    const queue = template.findResources('AWS::SQS::Queue')[queueId()] as { Properties: Record<string, any> };
    expect(queue.Properties.VisibilityTimeout).toBe(QUEUES.knowledge.visibilitySeconds);
    expect(queue.Properties.RedrivePolicy).toEqual({ deadLetterTargetArn: arn(deadId()), maxReceiveCount: QUEUES.knowledge.maxReceives });
    expect(fn.props.Timeout).toBe(KNOWLEDGE_ITEMS.timeoutSeconds);
    expect(6 * fn.props.Timeout).toBeLessThanOrEqual(QUEUES.knowledge.visibilitySeconds);
    expect(fn.props.MemorySize).toBe(3008);
    // ffmpeg (the layer) reads a recording from /tmp: up to 2 GiB, with its audio pieces beside it.
    expect(fn.props.EphemeralStorage).toEqual({ Size: KNOWLEDGE_ITEMS.ephemeralStorageMiB });
    // Above the 2 GiB a recording may be (MAX_RECORDING_BYTES, lambdas/knowledge/processing.ts).
    expect(KNOWLEDGE_ITEMS.ephemeralStorageMiB).toBeGreaterThan(2048);
  });

  it("has the table, the blob bucket, the vector bucket, the knowledge queue's URL and the ffmpeg layer's ffmpeg in its environment, and the upstream keys in its bundle", () => {
    expect(Object.keys(fn.props.Environment.Variables).sort()).toEqual([ENV.engine, ENV.tableName, ENV.bucketName, ENV.vectorBucketName, ENV.queueUrls, ENV.ffmpegPath, ...RUNTIME_ENV_NAMES].sort());
    expect(fn.props.Environment.Variables[ENV.ffmpegPath]).toBe(FFMPEG_LAYER_PATHS.ffmpeg);
    expect(fn.props.Layers).toEqual([{ Ref: flatLogicalId(stack.ffmpeg.layer.node.defaultChild as never) }]);
    expect(JSON.stringify(fn.props.Environment.Variables[ENV.queueUrls])).toContain(`{\\"knowledge\\":\\"`);
    expect(JSON.stringify(fn.props.Environment.Variables[ENV.queueUrls])).not.toContain('dead');
    const construct = stack.knowledgeItems.fn;
    const entry = construct.node.metadata.find((m) => m.type === ENTRY_METADATA)!.data as EntryMetadata;
    expect(entry.entry).toBe('lambdas/consumers/knowledge-items.ts');
    const absent = Object.keys(entry.define).filter((k) => k.startsWith('globalThis.PLATFORM_PORT_')).sort();
    expect(absent).toEqual(['globalThis.PLATFORM_PORT_CONNECTIONS', 'globalThis.PLATFORM_PORT_SECRET']);
  });

  it('may do exactly this: the table, its source files read, its packages read, written and deleted, vectors put and deleted, upstream keys and models, send to knowledge', () => {
    const table = arn(flatLogicalId(stack.storage.table.node.defaultChild as never));
    const tableAndIndexes = [table, { 'Fn::Join': ['', [table, '/index/*']] }];
    const bucket = arn(flatLogicalId(stack.storage.bucket.node.defaultChild as never));
    const vectorIndexes = { 'Fn::Join': ['', [arn(flatLogicalId(stack.vectors.resource), 'VectorBucketArn'), '/index/*']] };
    const actual = statements.map((s) => ({ actions: [...s.actions].sort(), resources: JSON.parse(s.resources) as unknown, ...(s.condition ? { condition: s.condition } : {}) }));
    const shown = (s: { actions: string[] }) => s.actions.join(',');
    const expected = [
      { actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: arn(flatLogicalId(stack.knowledgeItems.fn.logGroup.node.defaultChild as never)) },
      // The event source mapping's, on the knowledge queue only.
      { actions: ['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:ReceiveMessage'], resources: arn(queueId()) },
      { actions: ['dynamodb:BatchGetItem', 'dynamodb:BatchWriteItem', 'dynamodb:ConditionCheckItem', 'dynamodb:DeleteItem', 'dynamodb:DescribeTable', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:Scan', 'dynamodb:UpdateItem'], resources: tableAndIndexes },
      { actions: ['dynamodb:GetRecords', 'dynamodb:GetShardIterator'], resources: tableAndIndexes },
      { actions: ['s3:GetObject'], resources: [objects(KNOWLEDGE_BLOB_PREFIXES.uploads), objects(KNOWLEDGE_BLOB_PREFIXES.collections)] },
      { actions: ['s3:PutObject'], resources: objects(KNOWLEDGE_BLOB_PREFIXES.collections) },
      { actions: ['s3:DeleteObject'], resources: objects(KNOWLEDGE_BLOB_PREFIXES.collections) },
      // Key names only, so that a package never written is a 404 rather than a 403.
      { actions: ['s3:ListBucket'], resources: bucket },
      { actions: ['s3vectors:DeleteVectors', 's3vectors:PutVectors'], resources: vectorIndexes },
      { actions: ['secretsmanager:GetSecretValue'], resources: expect.objectContaining({ 'Fn::Join': ['', expect.arrayContaining([':secret:PlatformStack/ai-upstream/*'])] }) },
      { actions: [...BEDROCK_ACTIONS].sort(), resources: expect.arrayContaining(['arn:aws:bedrock:*::foundation-model/*']) },
      { actions: ['sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage'], resources: arn(queueId()) },
    ];
    const byActions = (a: { actions: string[] }, b: { actions: string[] }) => shown(a).localeCompare(shown(b));
    expect(actual.sort(byActions)).toEqual(expected.sort(byActions));
  });

  it("names the domain's key prefixes: uploads' files and collections' packages", () => {
    expect(uploadBytesKey('org_1', 'ws_1', 'a'.repeat(64), 'g1').startsWith(KNOWLEDGE_BLOB_PREFIXES.uploads)).toBe(true);
    expect(packageBlobKey('org_1', 'ws_1', 'col_1', 'itm_1', 'pkg_1').startsWith(KNOWLEDGE_BLOB_PREFIXES.collections)).toBe(true);
    expect(sourceBlobKey('org_1', 'ws_1', 'col_1', 'itm_1').startsWith(KNOWLEDGE_BLOB_PREFIXES.collections)).toBe(true);
  });

  it("has the alarms every consumer has: its errors, and the knowledge queue's dead letters and oldest message", () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm') as Record<string, { Properties: Record<string, any> }>).map((a) => JSON.stringify(a.Properties));
    expect(alarms.some((a) => a.includes(fn.logicalId) && a.includes('Errors'))).toBe(true);
    expect(alarms.some((a) => a.includes('knowledge-dead-letters'))).toBe(true);
    expect(alarms.some((a) => a.includes('knowledge-oldest-message'))).toBe(true);
  });
});

describe("the AI API's routes", () => {
  it('hold blob grants on its prefixes only (uploads, their multipart staging, knowledge, knowledge jobs), never the whole bucket; Data routes keep theirs', () => {
    const bucket = arn(flatLogicalId(stack.storage.bucket.node.defaultChild as never));
    const functions = routeFunctions(template);
    const objectResources = (route: string) =>
      allowedStatements(template, functions.get(route)!)
        .filter((s) => s.actions.some((a) => a.startsWith('s3:')))
        .flatMap((s) => ([] as unknown[]).concat(JSON.parse(s.resources)))
        .filter((r) => JSON.stringify(r) !== JSON.stringify(bucket));
    const withBlobs = ROUTES.filter((r) => r.grants.some((g) => g.startsWith('blobs:')));
    const ai = withBlobs.filter((r) => r.api === 'ai');
    expect(ai.map((r) => r.id)).toEqual(expect.arrayContaining(['ai.uploads.create', 'ai.collections.items.create', 'ai.collections.items.delete', 'ai.collections.items.package']));
    for (const route of ai) expect(objectResources(route.id), route.id).toEqual(API_BLOB_PREFIXES.ai!.map(objects));
    for (const route of withBlobs.filter((r) => r.api === 'data')) expect(objectResources(route.id), route.id).toEqual([objects('')]);
  });
});

it('cdk-nag finds nothing on the knowledge consumer, the collections sweep or anywhere else', () => {
  const paths = nagFindings(app).flatMap((v) => (v.violatingConstructs ?? []).map((c) => `${v.ruleName} ${c.constructPath}`));
  expect(paths.filter((p) => /KnowledgeItems|CollectionsSweep/.test(p))).toEqual([]);
  expect(paths).toEqual([]);
});
