import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Bucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import { consumerFunction, sqsSource } from './function-defaults.js';
import { acknowledgeTableIndexes, acknowledgeUploadChecksObjects } from './nag.js';
import type { Queues } from './queues.js';

/**
 * Sizing of the upload-checks function (docs/decisions/upload-checks.md). A check reads a file of up
 * to 5 GiB back from S3 through SHA-256 (one stream: 80 to 200 MB/s, about a minute at 5 GiB) and
 * copies it (CopyObject, server side): 600 s leaves room for a slow stream. 1,024 MB: the bytes are
 * streamed, never held; memory buys network and CPU for the hash. One check a message; ten at once.
 */
export const UPLOAD_CHECKS = {
  timeoutSeconds: 600,
  memorySize: 1024,
  batchSize: 1,
  maxBatchingWindowSeconds: 0,
  maxConcurrency: 10,
} as const;

/**
 * What a check does to the blob bucket: reads the joined object on its staging key (the AWS blob
 * store's multipart uploads live under `.staging/`, lambdas/engine/aws/blobs.ts) and deletes it; copies
 * it to the upload's key under `ai-uploads/` (GetObject on the source, PutObject on the target), reads
 * (HEAD) and deletes there (a second upload of bytes already kept drops its own copy).
 */
export const UPLOAD_CHECKS_OBJECTS: Readonly<Record<string, readonly string[]>> = {
  's3:GetObject': ['.staging/*', 'ai-uploads/*'],
  's3:PutObject': ['ai-uploads/*'],
  's3:DeleteObject': ['.staging/*', 'ai-uploads/*'],
};

/**
 * The `upload-checks` queue's consumer (lambdas/consumers/upload-checks.ts): an SQS event source with
 * partial batch responses; a check whose store failed comes back after the queue's retrySeconds and,
 * past its receives, rests in `upload-checks-dead` (its alarms are every queue's, lib/alarms.ts; the
 * function's errors alarm every function's, lib/operations.ts). IAM: the table read and written (the
 * upload, its stored file and its sweep entry), the objects above, `s3:ListBucket` (a missing key is
 * 404, not 403); it sends nothing.
 */
export class UploadChecks extends Construct {
  readonly fn: NodejsFunction;

  constructor(scope: Construct, id: string, props: { table: Table; bucket: Bucket; queues: Queues }) {
    super(scope, id);
    const { queue } = props.queues.byName['upload-checks'];
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/upload-checks',
      name: 'upload-checks',
      tag: 'upload-checks',
      description: "ai: finishes the SHA-256 checks of uploads whose complete answered 202 (upload-checks queue; partial batch responses)",
      timeoutSeconds: UPLOAD_CHECKS.timeoutSeconds,
      memorySize: UPLOAD_CHECKS.memorySize,
      environment: { [ENV.tableName]: props.table.tableName, [ENV.bucketName]: props.bucket.bucketName },
    });
    this.fn = fn;
    fn.addEventSource(sqsSource(queue, UPLOAD_CHECKS));
    props.table.grantReadWriteData(role);
    acknowledgeTableIndexes(this, props.table.tableArn);
    const arns: string[] = [];
    for (const [action, prefixes] of Object.entries(UPLOAD_CHECKS_OBJECTS)) {
      const resources = prefixes.map((p) => props.bucket.arnForObjects(p));
      role.addToPrincipalPolicy(new PolicyStatement({ actions: [action], resources }));
      arns.push(...resources);
    }
    role.addToPrincipalPolicy(new PolicyStatement({ actions: ['s3:ListBucket'], resources: [props.bucket.bucketArn] }));
    acknowledgeUploadChecksObjects(role, [...new Set(arns)]);
  }
}
