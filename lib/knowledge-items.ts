import { Stack } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement, type Role } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Bucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import type { FfmpegLayer } from './ffmpeg-layer.js';
import { consumerFunction, sqsSource } from './function-defaults.js';
import { acknowledgeBlobPrefixes, acknowledgeGrantWildcards, acknowledgeTableIndexes, acknowledgeVectorIndexes } from './nag.js';
import type { Queues } from './queues.js';
import { grantUpstreams } from './upstream-grants.js';
import type { VectorBucket } from './vector-bucket.js';

/**
 * Where knowledge keeps its bytes in the blob bucket (test/infra/knowledge-items.test.ts and
 * knowledge-jobs.test.ts check they are the domain's): a completed upload's file
 * (lambdas/knowledge/upload-keys.ts), a collection's packages and inline texts
 * (lambdas/knowledge/collection-keys.ts), and a knowledge job's given texts and step results
 * (lambdas/knowledge/jobs/job-keys.ts).
 */
export const KNOWLEDGE_BLOB_PREFIXES = { uploads: 'ai-uploads/', collections: 'knowledge/', jobs: 'knowledge-jobs/' } as const;

/**
 * Sizing of the items function (docs/decisions/knowledge-items-aws.md). One item a message and one
 * message an invocation: a 100 MiB PDF parses for minutes, and a batch would make its neighbours wait
 * for it and come back with it when it fails. 840 s; the queue's visibility timeout is six times that
 * (sqsSource, lib/function-defaults.ts), a failed item's retry comes after 900 s (retrySeconds). 3,008 MB: the file is
 * held whole (100 MiB at most for a document, 2 GiB for a recording), pdf.js's parsed document is several
 * times the file, and the text, chunks and package come on top; it is also the most a new account's
 * Lambda quota allows, and CPU grows with memory (parsing and ffmpeg are CPU-bound). Ten instances at most: each
 * item embeds through the organization's limits and writes its workspace's index, throttled per index.
 * 2,560 MiB of /tmp: ffmpeg (the ffmpeg layer) reads a recording from a file, at most 2 GiB
 * (MAX_RECORDING_BYTES, lambdas/knowledge/processing.ts), and writes its audio pieces beside it (6 hours
 * at 32 kbit/s, 86 MB).
 */
export const KNOWLEDGE_ITEMS = {
  timeoutSeconds: 840,
  memorySize: 3008,
  ephemeralStorageMiB: 2560,
  batchSize: 1,
  maxBatchingWindowSeconds: 0,
  maxConcurrency: 10,
} as const;

export interface KnowledgeItemsProps {
  readonly table: Table;
  readonly bucket: Bucket;
  readonly queues: Queues;
  readonly vectors: VectorBucket;
  /** ffmpeg and ffprobe: recordings cut into audio pieces before transcription. */
  readonly ffmpeg: FfmpegLayer;
}

/** S3 Vectors actions processing sends: a package's vectors put, a replaced or failed package's deleted. No index is made or removed here. */
export const KNOWLEDGE_ITEMS_VECTOR_ACTIONS = ['s3vectors:PutVectors', 's3vectors:DeleteVectors'] as const;

/**
 * The `knowledge` queue's consumer (lambdas/consumers/knowledge-items.ts): an SQS event source with
 * partial batch responses; a message that fails (the store failed) comes back after the queue's
 * retrySeconds and, past its receives, rests in `knowledge-dead` (its alarms are every queue's,
 * lib/alarms.ts; the function's errors alarm every function's, lib/operations.ts). It has the ffmpeg
 * layer (FFMPEG_PATH: recordings cut into audio pieces, lib/ffmpeg-layer.ts). IAM: the table read
 * and written (items, counters, the gateway's limits, usage and activity), the source files read and
 * the packages read, written and deleted (blobPrefixGrants), the vector indexes written, the upstream
 * keys and Bedrock models (embeddings and transcriptions), and sending to `knowledge` only (a transient
 * failure sends the item again with a delay).
 */
export class KnowledgeItems extends Construct {
  readonly fn: NodejsFunction;

  constructor(scope: Construct, id: string, props: KnowledgeItemsProps) {
    super(scope, id);
    const { queue } = props.queues.byName.knowledge;
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/knowledge-items',
      name: 'knowledge-items',
      tag: 'knowledge-items',
      description: 'knowledge: processes collection items into packages of cited chunks (knowledge queue; partial batch responses)',
      timeoutSeconds: KNOWLEDGE_ITEMS.timeoutSeconds,
      memorySize: KNOWLEDGE_ITEMS.memorySize,
      ephemeralStorageMiB: KNOWLEDGE_ITEMS.ephemeralStorageMiB,
      upstreamKeys: true,
      environment: {
        [ENV.tableName]: props.table.tableName,
        [ENV.bucketName]: props.bucket.bucketName,
        [ENV.vectorBucketName]: props.vectors.bucketName,
        [ENV.queueUrls]: Stack.of(this).toJsonString({ knowledge: queue.queueUrl }),
      },
    });
    this.fn = fn;
    props.ffmpeg.use(fn);
    fn.addEventSource(sqsSource(queue, KNOWLEDGE_ITEMS));
    props.table.grantReadWriteData(role);
    acknowledgeTableIndexes(this, props.table.tableArn);
    grantBlobPrefixes(role, props.bucket, {
      's3:GetObject': [KNOWLEDGE_BLOB_PREFIXES.uploads, KNOWLEDGE_BLOB_PREFIXES.collections],
      's3:PutObject': [KNOWLEDGE_BLOB_PREFIXES.collections],
      's3:DeleteObject': [KNOWLEDGE_BLOB_PREFIXES.collections],
    });
    role.addToPrincipalPolicy(new PolicyStatement({ actions: [...KNOWLEDGE_ITEMS_VECTOR_ACTIONS], resources: [props.vectors.indexArns] }));
    acknowledgeVectorIndexes(this, props.vectors.indexArns);
    grantUpstreams(role);
    acknowledgeGrantWildcards(this, new Set(['upstream-keys:read']), { table: props.table, bucket: props.bucket });
    queue.grantSendMessages(role);
  }
}

/**
 * Object actions on key prefixes of the blob bucket, one statement an action, and `s3:ListBucket` on
 * the bucket: without it S3 answers a key that does not exist with 403 instead of 404, and the blob
 * port could not tell a package never written (a failed item's) from a refusal. ListBucket shows key
 * names, never bytes (docs/decisions/knowledge-items-aws.md).
 */
export function grantBlobPrefixes(role: Role, bucket: Bucket, objects: Readonly<Record<string, readonly string[]>>): void {
  const arns: string[] = [];
  for (const [action, prefixes] of Object.entries(objects)) {
    const resources = prefixes.map((p) => bucket.arnForObjects(`${p}*`));
    role.addToPrincipalPolicy(new PolicyStatement({ actions: [action], resources }));
    arns.push(...resources);
  }
  role.addToPrincipalPolicy(new PolicyStatement({ actions: ['s3:ListBucket'], resources: [bucket.bucketArn] }));
  acknowledgeBlobPrefixes(role, [...new Set(arns)]);
}
