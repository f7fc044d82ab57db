/**
 * The knowledge-jobs queue's consumer in the template (lib/knowledge-jobs.ts): the event source (one
 * message an invocation, partial batch responses, bounded concurrency), the queue's redrive to its
 * dead-letter queue, the function's timeout a sixth of the visibility timeout at most, its memory, its
 * environment and bundle, the ffmpeg layer with FFMPEG_PATH (on it, the items consumer and every
 * `ffmpeg:run` route), its IAM statement by statement (the blob prefixes it names are the domain's),
 * its alarms, and cdk-nag clean. The layer's own contents: test/infra/ffmpeg-layer.test.ts.
 */
import type { App } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { QUEUES } from '../../lambdas/engine/queues.js';
import { ROUTES } from '../../lambdas/http/routes.js';
import { jobBlobKey } from '../../lambdas/knowledge/jobs/job-keys.js';
import { ENV } from '../../lambdas/shared/settings.js';
import { FFMPEG_LAYER_PATHS } from '../../lib/ffmpeg-layer.js';
import { ENTRY_METADATA, type EntryMetadata } from '../../lib/function-defaults.js';
import { KNOWLEDGE_BLOB_PREFIXES } from '../../lib/knowledge-items.js';
import { KNOWLEDGE_JOBS, KNOWLEDGE_JOBS_SENDS, KNOWLEDGE_JOBS_SWEEP_RUN } from '../../lib/knowledge-jobs.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { BEDROCK_ACTIONS } from '../../lib/upstream-grants.js';
import { allowedStatements, consumerFunction, flatLogicalId, flatTemplate, nagFindings, routeFunctions, RUNTIME_ENV_NAMES, synthStack, taggedFunctions, type AllowStatement } from './helpers.js';
import { CONSUMER_TAG } from '../../lib/function-defaults.js';

let app: App;
let stack: PlatformStack;
let template: Template;
let fn: ReturnType<typeof consumerFunction>;
let statements: AllowStatement[];

const queueId = (name: keyof typeof QUEUES = 'knowledge-jobs') => flatLogicalId(stack.queues.byName[name].queue.node.defaultChild as never);
const deadId = () => flatLogicalId(stack.queues.byName['knowledge-jobs'].deadLetterQueue.node.defaultChild as never);
const arn = (id: string, attribute = 'Arn') => ({ 'Fn::GetAtt': [id, attribute] });
const objects = (prefix: string) => ({ 'Fn::Join': ['', [arn(flatLogicalId(stack.storage.bucket.node.defaultChild as never)), `/${prefix}*`]] });
const layerRef = () => ({ Ref: flatLogicalId(stack.ffmpeg.layer.node.defaultChild as never) });

beforeAll(() => {
  ({ app, stack } = synthStack({ nag: true }));
  template = flatTemplate(stack);
  fn = consumerFunction(template, 'knowledge-jobs');
  statements = allowedStatements(template, fn);
}, 240_000);

describe('the knowledge-jobs queue consumer', () => {
  it('takes one message an invocation from the knowledge-jobs queue, with partial batch responses and bounded concurrency', () => {
    const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping') as Record<string, { Properties: Record<string, any> }>).filter((m) =>
      JSON.stringify(m.Properties.FunctionName).includes(fn.logicalId),
    );
    expect(mappings).toHaveLength(1);
    expect(mappings[0].Properties).toMatchObject({
      EventSourceArn: arn(queueId()),
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: 1,
      ScalingConfig: { MaximumConcurrency: KNOWLEDGE_JOBS.maxConcurrency },
    });
    expect(mappings[0].Properties.MaximumBatchingWindowInSeconds ?? 0).toBe(0);
  });

  it('runs 900 s, a sixth of the queue visibility timeout, with 3,008 MB; a message failed 5 times rests in knowledge-jobs-dead', () => {
    const queue = template.findResources('AWS::SQS::Queue')[queueId()] as { Properties: Record<string, any> };
    expect(queue.Properties.VisibilityTimeout).toBe(QUEUES['knowledge-jobs'].visibilitySeconds);
    expect(queue.Properties.RedrivePolicy).toEqual({ deadLetterTargetArn: arn(deadId()), maxReceiveCount: QUEUES['knowledge-jobs'].maxReceives });
    expect(fn.props.Timeout).toBe(900);
    expect(6 * fn.props.Timeout).toBeLessThanOrEqual(QUEUES['knowledge-jobs'].visibilitySeconds);
    expect(fn.props.MemorySize).toBe(3008);
    expect(fn.props.Architectures).toEqual(['arm64']);
    // ffmpeg reads the recording through a presigned URL; only audio pieces and frames reach /tmp (Lambda's 512 MiB).
    expect(fn.props.EphemeralStorage).toBeUndefined();
  });

  it('has the table, the blob bucket, the vector bucket, its three queues and the layer\'s ffmpeg in its environment, and the upstream keys in its bundle', () => {
    const env = fn.props.Environment.Variables as Record<string, unknown>;
    expect(Object.keys(env).sort()).toEqual([ENV.engine, ENV.tableName, ENV.bucketName, ENV.vectorBucketName, ENV.queueUrls, ENV.ffmpegPath, ...RUNTIME_ENV_NAMES].sort());
    expect(env[ENV.ffmpegPath]).toBe(FFMPEG_LAYER_PATHS.ffmpeg);
    const urls = JSON.stringify(env[ENV.queueUrls]);
    for (const name of KNOWLEDGE_JOBS_SENDS) expect(urls).toContain(`\\"${name}\\":`);
    expect(urls).not.toContain('dead');
    expect(urls).not.toContain('\\"knowledge\\":');
    const entry = stack.knowledgeJobs.fn.node.metadata.find((m) => m.type === ENTRY_METADATA)!.data as EntryMetadata;
    expect(entry.entry).toBe('lambdas/consumers/knowledge-jobs.ts');
    const absent = Object.keys(entry.define).filter((k) => k.startsWith('globalThis.PLATFORM_PORT_')).sort();
    expect(absent).toEqual(['globalThis.PLATFORM_PORT_CONNECTIONS', 'globalThis.PLATFORM_PORT_SECRET']);
  });

  it('may do exactly this: the table, uploads read, its own files and the collection read, written and deleted, vectors put and deleted, upstream keys and models, send to its three queues', () => {
    const table = arn(flatLogicalId(stack.storage.table.node.defaultChild as never));
    const tableAndIndexes = [table, { 'Fn::Join': ['', [table, '/index/*']] }];
    const bucket = arn(flatLogicalId(stack.storage.bucket.node.defaultChild as never));
    const vectorIndexes = { 'Fn::Join': ['', [arn(flatLogicalId(stack.vectors.resource), 'VectorBucketArn'), '/index/*']] };
    const actual = statements.map((s) => ({ actions: [...s.actions].sort(), resources: JSON.parse(s.resources) as unknown, ...(s.condition ? { condition: s.condition } : {}) }));
    const { uploads, jobs, collections } = KNOWLEDGE_BLOB_PREFIXES;
    const send = ['sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage'];
    const expected = [
      { actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: arn(flatLogicalId(stack.knowledgeJobs.fn.logGroup.node.defaultChild as never)) },
      // The event source mapping's, on the knowledge-jobs queue only.
      { actions: ['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:ReceiveMessage'], resources: arn(queueId()) },
      { actions: ['dynamodb:BatchGetItem', 'dynamodb:BatchWriteItem', 'dynamodb:ConditionCheckItem', 'dynamodb:DeleteItem', 'dynamodb:DescribeTable', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:Scan', 'dynamodb:UpdateItem'], resources: tableAndIndexes },
      { actions: ['dynamodb:GetRecords', 'dynamodb:GetShardIterator'], resources: tableAndIndexes },
      { actions: ['s3:GetObject'], resources: [objects(uploads), objects(jobs), objects(collections)] },
      { actions: ['s3:PutObject'], resources: [objects(jobs), objects(collections)] },
      { actions: ['s3:DeleteObject'], resources: [objects(jobs), objects(collections)] },
      // Key names only, so that a result never written is a 404 rather than a 403.
      { actions: ['s3:ListBucket'], resources: bucket },
      { actions: ['s3vectors:DeleteVectors', 's3vectors:PutVectors'], resources: vectorIndexes },
      { actions: ['secretsmanager:GetSecretValue'], resources: expect.objectContaining({ 'Fn::Join': ['', expect.arrayContaining([':secret:PlatformStack/ai-upstream/*'])] }) },
      { actions: [...BEDROCK_ACTIONS].sort(), resources: expect.arrayContaining(['arn:aws:bedrock:*::foundation-model/*']) },
      ...KNOWLEDGE_JOBS_SENDS.map((name) => ({ actions: send, resources: arn(queueId(name)) })),
    ];
    const key = (s: { actions: string[]; resources: unknown }) => `${s.actions.join(',')} ${JSON.stringify(s.resources)}`;
    const byKey = (a: { actions: string[]; resources: unknown }, b: { actions: string[]; resources: unknown }) => key(a).localeCompare(key(b));
    expect(actual.sort(byKey)).toEqual(expected.sort(byKey));
  });

  it("names the domain's key prefixes: a job's files", () => {
    expect(jobBlobKey('org_1', 'job_1', 'transcribe.json').startsWith(KNOWLEDGE_BLOB_PREFIXES.jobs)).toBe(true);
    // Apart from the collections' prefix: `knowledge/*` does not reach a job's files, nor the reverse.
    expect(KNOWLEDGE_BLOB_PREFIXES.jobs.startsWith(KNOWLEDGE_BLOB_PREFIXES.collections)).toBe(false);
  });

  it("has the alarms every consumer has: its errors, and the knowledge-jobs queue's dead letters and oldest message", () => {
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm') as Record<string, { Properties: Record<string, any> }>).map((a) => JSON.stringify(a.Properties));
    expect(alarms.some((a) => a.includes(fn.logicalId) && a.includes('Errors'))).toBe(true);
    expect(alarms.some((a) => a.includes('knowledge-jobs-dead-letters'))).toBe(true);
    expect(alarms.some((a) => a.includes('knowledge-jobs-oldest-message'))).toBe(true);
  });
});

describe('the knowledge jobs sweep', () => {
  it('runs every minute for at most 60 s, a failed run not retried', () => {
    const sweep = consumerFunction(template, 'knowledge-jobs-sweep');
    expect(sweep.props.Timeout).toBe(KNOWLEDGE_JOBS_SWEEP_RUN.timeoutSeconds);
    const rules = Object.values(template.findResources('AWS::Events::Rule') as Record<string, { Properties: Record<string, any> }>).filter((r) => JSON.stringify(r.Properties.Targets).includes(sweep.logicalId));
    expect(rules).toHaveLength(1);
    expect(rules[0].Properties.ScheduleExpression).toBe('rate(1 minute)');
    expect(rules[0].Properties.Targets[0].RetryPolicy).toEqual({ MaximumRetryAttempts: 0 });
    const invoke = template.findResources('AWS::Lambda::EventInvokeConfig', { Properties: { FunctionName: { Ref: sweep.logicalId } } });
    expect(Object.values(invoke).map((c: any) => c.Properties.MaximumRetryAttempts)).toEqual([0]);
  });

  it('has the table and the three queues in its environment, and no ffmpeg, objects, vectors or upstream keys', () => {
    const sweep = consumerFunction(template, 'knowledge-jobs-sweep');
    expect(Object.keys(sweep.props.Environment.Variables).sort()).toEqual([ENV.engine, ENV.tableName, ENV.queueUrls, ...RUNTIME_ENV_NAMES].sort());
    expect(sweep.props.Layers).toBeUndefined();
    const entry = stack.knowledgeJobs.sweepFunction.node.metadata.find((m) => m.type === ENTRY_METADATA)!.data as EntryMetadata;
    expect(entry.entry).toBe('lambdas/consumers/knowledge-jobs-sweep.ts');
    const absent = Object.keys(entry.define).filter((k) => k.startsWith('globalThis.PLATFORM_PORT_')).sort();
    expect(absent).toEqual(['BLOBS', 'CONNECTIONS', 'SECRET', 'UPSTREAM_KEYS', 'VECTORS'].map((p) => `globalThis.PLATFORM_PORT_${p}`));
  });

  it('may do exactly this: the table, and send to the three queues', () => {
    const sweep = consumerFunction(template, 'knowledge-jobs-sweep');
    const table = arn(flatLogicalId(stack.storage.table.node.defaultChild as never));
    const tableAndIndexes = [table, { 'Fn::Join': ['', [table, '/index/*']] }];
    const actual = allowedStatements(template, sweep).map((s) => ({ actions: [...s.actions].sort(), resources: JSON.parse(s.resources) as unknown, ...(s.condition ? { condition: s.condition } : {}) }));
    const expected = [
      { actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: arn(flatLogicalId(stack.knowledgeJobs.sweepFunction.logGroup.node.defaultChild as never)) },
      { actions: ['dynamodb:BatchGetItem', 'dynamodb:BatchWriteItem', 'dynamodb:ConditionCheckItem', 'dynamodb:DeleteItem', 'dynamodb:DescribeTable', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:Scan', 'dynamodb:UpdateItem'], resources: tableAndIndexes },
      { actions: ['dynamodb:GetRecords', 'dynamodb:GetShardIterator'], resources: tableAndIndexes },
      ...KNOWLEDGE_JOBS_SENDS.map((name) => ({ actions: ['sqs:GetQueueAttributes', 'sqs:GetQueueUrl', 'sqs:SendMessage'], resources: arn(queueId(name)) })),
    ];
    const key = (s: { actions: string[]; resources: unknown }) => `${s.actions.join(',')} ${JSON.stringify(s.resources)}`;
    const byKey = (a: { actions: string[]; resources: unknown }, b: { actions: string[]; resources: unknown }) => key(a).localeCompare(key(b));
    expect(actual.sort(byKey)).toEqual(expected.sort(byKey));
  });

  it('has its errors alarm', () => {
    const sweep = consumerFunction(template, 'knowledge-jobs-sweep');
    const alarms = Object.values(template.findResources('AWS::CloudWatch::Alarm') as Record<string, { Properties: Record<string, any> }>).map((a) => JSON.stringify(a.Properties));
    expect(alarms.some((a) => a.includes(sweep.logicalId) && a.includes('Errors'))).toBe(true);
  });
});

describe('the ffmpeg layer', () => {
  it('is one arm64 layer of the stack (the only other layer: the AWS CLI of the console files\' deployment)', () => {
    const layers = Object.entries(template.findResources('AWS::Lambda::LayerVersion') as Record<string, { Properties: Record<string, any> }>);
    const ffmpeg = layers.filter(([, l]) => String(l.Properties.Description ?? '').startsWith('ffmpeg and ffprobe'));
    expect(ffmpeg).toHaveLength(1);
    expect(ffmpeg[0][1].Properties.CompatibleArchitectures).toEqual(['arm64']);
    expect(layers.filter((l) => !ffmpeg.includes(l)).map(([id]) => id)).toEqual([expect.stringMatching(/AwsCliLayer/)]);
  });

  it('is on exactly the functions that run ffmpeg, each with FFMPEG_PATH at its ffmpeg: the jobs and items consumers and the ffmpeg:run routes', () => {
    // The console files' deployment (a CDK BucketDeployment) runs with its AWS CLI layer, not ffmpeg's.
    const withLayer = Object.entries(template.findResources('AWS::Lambda::Function') as Record<string, { Properties: Record<string, any> }>).filter(
      ([id, f]) => f.Properties.Layers !== undefined && !id.includes('CustomCDKBucketDeployment'),
    );
    const consumers = taggedFunctions(template, CONSUMER_TAG);
    const routes = routeFunctions(template);
    const expected = [
      consumers.get('knowledge-jobs')!.logicalId,
      consumers.get('knowledge-items')!.logicalId,
      ...ROUTES.filter((r) => r.grants.includes('ffmpeg:run')).map((r) => routes.get(r.id)!.logicalId),
    ];
    expect(withLayer.map(([id]) => id).sort()).toEqual(expected.sort());
    for (const [id, f] of withLayer) {
      expect(f.Properties.Layers, id).toEqual([layerRef()]);
      expect(f.Properties.Environment.Variables[ENV.ffmpegPath], id).toBe(FFMPEG_LAYER_PATHS.ffmpeg);
      expect(f.Properties.Architectures, id).toEqual(['arm64']);
    }
    // No other function names FFMPEG_PATH: without the layer it would point nowhere.
    const named = Object.entries(template.findResources('AWS::Lambda::Function') as Record<string, { Properties: Record<string, any> }>).filter(([, f]) => f.Properties.Environment?.Variables?.[ENV.ffmpegPath] !== undefined);
    expect(named.map(([id]) => id).sort()).toEqual(expected.sort());
  });

  it('has ffprobe beside ffmpeg, where the settings look for it', () => {
    expect(FFMPEG_LAYER_PATHS.ffprobe).toBe(FFMPEG_LAYER_PATHS.ffmpeg.replace(/ffmpeg$/, 'ffprobe'));
  });
});

it('cdk-nag finds nothing on the knowledge jobs consumer, the layer or anywhere else', () => {
  const paths = nagFindings(app).flatMap((v) => (v.violatingConstructs ?? []).map((c) => `${v.ruleName} ${c.constructPath}`));
  expect(paths.filter((p) => /KnowledgeJobs|Ffmpeg/.test(p))).toEqual([]);
  expect(paths).toEqual([]);
});
