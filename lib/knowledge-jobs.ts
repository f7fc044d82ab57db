import { Stack } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { Rule } from 'aws-cdk-lib/aws-events';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Bucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import type { QueueName } from '../lambdas/engine/queues.js';
import { ENV } from '../lambdas/shared/settings.js';
import type { FfmpegLayer } from './ffmpeg-layer.js';
import { consumerFunction, schedule, sqsSource } from './function-defaults.js';
import { grantBlobPrefixes, KNOWLEDGE_BLOB_PREFIXES } from './knowledge-items.js';
import { acknowledgeGrantWildcards, acknowledgeTableIndexes, acknowledgeVectorIndexes } from './nag.js';
import type { Queues } from './queues.js';
import { grantUpstreams } from './upstream-grants.js';
import type { VectorBucket } from './vector-bucket.js';

/**
 * Sizing of the knowledge jobs function (docs/decisions/knowledge-jobs-aws.md). One message an
 * invocation: a message is one step of one job or one transcription piece, and a step stops itself
 * within its time budget and sends itself again, so no run nears the 900 s timeout (the queue's
 * visibility timeout is six times that). 3,008 MB, the most a new account's Lambda quota allows:
 * Lambda's CPU grows with memory, and the steps that use it are ffmpeg's (the audio track cut into
 * pieces, frames decoded; about 1.7 vCPUs here, for ffmpeg's two threads) while the others wait on
 * upstreams, whose cost is the model's, not the function's. Ten instances at most: a job's pieces are
 * transcribed 4 at once by default, and every call goes through the organization's AI limits anyway.
 */
export const KNOWLEDGE_JOBS = {
  timeoutSeconds: 900,
  memorySize: 3008,
  batchSize: 1,
  maxBatchingWindowSeconds: 0,
  maxConcurrency: 10,
} as const;

/**
 * The queues a job sends to: its own next step or piece (`knowledge-jobs`); and, when it finishes,
 * its platform event's deliveries: webhook attempts and stream wakes (lambdas/events/publish.ts).
 */
export const KNOWLEDGE_JOBS_SENDS: readonly QueueName[] = ['knowledge-jobs', 'webhooks', 'streams'];

/**
 * Its objects: the recording and referenced texts read (ai-uploads/: ffprobe and ffmpeg read the
 * recording through a presigned GET, which this role signs); its own files read, written and removed
 * (knowledge-jobs/: given texts, step results, audio pieces, frames); the collection it publishes
 * written (knowledge/: packages, read back when a publish is resumed, removed when replaced). Never an
 * upload's file deleted: the job only moves its expiry (keep_source_hours), the uploads sweep removes it.
 */
export const KNOWLEDGE_JOBS_OBJECTS = {
  's3:GetObject': [KNOWLEDGE_BLOB_PREFIXES.uploads, KNOWLEDGE_BLOB_PREFIXES.jobs, KNOWLEDGE_BLOB_PREFIXES.collections],
  's3:PutObject': [KNOWLEDGE_BLOB_PREFIXES.jobs, KNOWLEDGE_BLOB_PREFIXES.collections],
  's3:DeleteObject': [KNOWLEDGE_BLOB_PREFIXES.jobs, KNOWLEDGE_BLOB_PREFIXES.collections],
} as const;

/**
 * The jobs sweep (lambdas/consumers/knowledge-jobs-sweep.ts): every minute, as a step's lease is 60 s
 * (stepLeaseSeconds), so a job whose processor died goes on within about two; a run reads one page
 * of due entries, a few seconds' work, and stops within its 60 s.
 */
export const KNOWLEDGE_JOBS_SWEEP_RUN = { timeoutSeconds: 60, everyMinutes: 1 } as const;

/** S3 Vectors actions a publish sends: the collection's chunks' vectors put, a replaced package's deleted. No index is made or removed here. */
export const KNOWLEDGE_JOBS_VECTOR_ACTIONS = ['s3vectors:PutVectors', 's3vectors:DeleteVectors'] as const;

export interface KnowledgeJobsProps {
  readonly table: Table;
  readonly bucket: Bucket;
  readonly queues: Queues;
  readonly vectors: VectorBucket;
  readonly ffmpeg: FfmpegLayer;
}

/**
 * The `knowledge-jobs` queue's consumer (lambdas/consumers/knowledge-jobs.ts), and the jobs sweep on a
 * schedule (`Sweep`). The consumer: an SQS event source with
 * partial batch responses; a message fails only when the store does, comes back after the queue's
 * retrySeconds and, past its receives, rests in `knowledge-jobs-dead` (its alarms are every queue's,
 * lib/alarms.ts; the function's errors alarm every function's, lib/operations.ts). It has the ffmpeg
 * layer (FFMPEG_PATH). IAM: the table read and written (jobs, their spend and leases, the gateway's
 * limits, usage and activity, the published collection, platform events), KNOWLEDGE_JOBS_OBJECTS, the
 * vector indexes written, the upstream keys and Bedrock models (transcription, chat, embeddings), and
 * sending to KNOWLEDGE_JOBS_SENDS only. The sweep (docs/decisions/knowledge-jobs-aws.md, "The jobs
 * sweep"): the table read and written (due lease entries, the jobs they name, pending events, the
 * publish) and sending to the same queues; no objects, vectors or upstreams. A failed run is not
 * retried: the next one takes the same entries. Its errors alarm comes with every function's.
 */
export class KnowledgeJobs extends Construct {
  readonly fn: NodejsFunction;
  readonly sweepFunction: NodejsFunction;
  readonly sweepSchedule: Rule;

  constructor(scope: Construct, id: string, props: KnowledgeJobsProps) {
    super(scope, id);
    const { queue } = props.queues.byName['knowledge-jobs'];
    const sends = KNOWLEDGE_JOBS_SENDS.map((name) => [name, props.queues.byName[name].queue] as const);
    const queueUrls = Stack.of(this).toJsonString(Object.fromEntries(sends.map(([name, q]) => [name, q.queueUrl])));
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/knowledge-jobs',
      name: 'knowledge-jobs',
      tag: 'knowledge-jobs',
      description: 'knowledge: runs knowledge jobs a step or a transcription piece a message (knowledge-jobs queue; partial batch responses)',
      timeoutSeconds: KNOWLEDGE_JOBS.timeoutSeconds,
      memorySize: KNOWLEDGE_JOBS.memorySize,
      upstreamKeys: true,
      environment: {
        [ENV.tableName]: props.table.tableName,
        [ENV.bucketName]: props.bucket.bucketName,
        [ENV.vectorBucketName]: props.vectors.bucketName,
        [ENV.queueUrls]: queueUrls,
      },
    });
    this.fn = fn;
    props.ffmpeg.use(fn);
    fn.addEventSource(sqsSource(queue, KNOWLEDGE_JOBS));
    props.table.grantReadWriteData(role);
    acknowledgeTableIndexes(this, props.table.tableArn);
    grantBlobPrefixes(role, props.bucket, KNOWLEDGE_JOBS_OBJECTS);
    role.addToPrincipalPolicy(new PolicyStatement({ actions: [...KNOWLEDGE_JOBS_VECTOR_ACTIONS], resources: [props.vectors.indexArns] }));
    acknowledgeVectorIndexes(this, props.vectors.indexArns);
    grantUpstreams(role);
    acknowledgeGrantWildcards(this, new Set(['upstream-keys:read']), { table: props.table, bucket: props.bucket });
    for (const [, q] of sends) q.grantSendMessages(role);

    const sweepScope = new Construct(this, 'Sweep');
    const sweep = consumerFunction(sweepScope, {
      module: 'consumers/knowledge-jobs-sweep',
      name: 'knowledge-jobs-sweep',
      tag: 'knowledge-jobs-sweep',
      description: 'knowledge: sends again the steps of knowledge jobs whose processor died, publishes the unsent events of finished jobs (every minute)',
      timeoutSeconds: KNOWLEDGE_JOBS_SWEEP_RUN.timeoutSeconds,
      retryAttempts: 0,
      environment: { [ENV.tableName]: props.table.tableName, [ENV.queueUrls]: queueUrls },
    });
    this.sweepFunction = sweep.fn;
    props.table.grantReadWriteData(sweep.role);
    acknowledgeTableIndexes(sweepScope, props.table.tableArn);
    for (const [, q] of sends) q.grantSendMessages(sweep.role);
    this.sweepSchedule = schedule(sweepScope, sweep.fn, KNOWLEDGE_JOBS_SWEEP_RUN.everyMinutes, `${Stack.of(this).stackName}: runs the knowledge jobs sweep`);
  }
}
