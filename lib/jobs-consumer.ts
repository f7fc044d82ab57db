import { Stack } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import { consumerFunction, sqsSource } from './function-defaults.js';
import { acknowledgeTableIndexes, acknowledgeVectorIndexes } from './nag.js';
import type { Queues } from './queues.js';
import type { VectorBucket } from './vector-bucket.js';

/**
 * Sizing of the jobs function. A job (a vector database's removal: its passages' vectors deleted 500
 * a call, its ledger items after) works in steps and sends its own continuation, so one run stays
 * short; 240 s leaves it room (the queue's visibility timeout is six times that, sqsSource). A handful of jobs a batch, a handful of instances:
 * jobs write S3 Vectors indexes, whose writes are throttled per index, so more at once buys nothing.
 */
export const JOBS = {
  timeoutSeconds: 240,
  batchSize: 5,
  maxBatchingWindowSeconds: 1,
  maxConcurrency: 5,
} as const;

export interface JobsConsumerProps {
  readonly table: Table;
  readonly queues: Queues;
  readonly vectors: VectorBucket;
}

/**
 * The `jobs` queue's consumer (lambdas/consumers/jobs.ts): an SQS event source with partial batch
 * responses; a failed job comes back after the queue's retrySeconds and, past its receives, rests in
 * `jobs-dead` (its alarms are every queue's, lib/alarms.ts; the function's errors alarm as every
 * function's, lib/operations.ts). IAM: the table read and written (jobs touch the domain's items),
 * the vector bucket's indexes written, made and removed (vectors:write), and sending to `jobs` only
 * (continuations).
 */
export class JobsConsumer extends Construct {
  readonly fn: NodejsFunction;

  constructor(scope: Construct, id: string, props: JobsConsumerProps) {
    super(scope, id);
    const { queue } = props.queues.byName.jobs;
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/jobs',
      name: 'jobs',
      tag: 'jobs',
      description: 'background jobs: runs jobs queue messages (vector database removal; partial batch responses)',
      timeoutSeconds: JOBS.timeoutSeconds,
      environment: {
        [ENV.tableName]: props.table.tableName,
        [ENV.vectorBucketName]: props.vectors.bucketName,
        [ENV.queueUrls]: Stack.of(this).toJsonString({ jobs: queue.queueUrl }),
      },
    });
    this.fn = fn;
    fn.addEventSource(sqsSource(queue, JOBS));
    props.table.grantReadWriteData(role);
    acknowledgeTableIndexes(this, props.table.tableArn);
    props.vectors.grant(role, { write: true });
    acknowledgeVectorIndexes(this, props.vectors.indexArns);
    queue.grantSendMessages(role);
  }
}
