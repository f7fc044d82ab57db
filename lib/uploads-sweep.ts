import { Stack } from 'aws-cdk-lib';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Rule } from 'aws-cdk-lib/aws-events';
import type { Bucket } from 'aws-cdk-lib/aws-s3';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import { consumerFunction, grantItems, schedule } from './function-defaults.js';
import { acknowledgeUploadsSweepObjects } from './nag.js';

/**
 * What the uploads sweep may do, by action, to which partition keys (lambdas/knowledge/upload-keys.ts;
 * test/infra/uploads-sweep.test.ts checks each is used): it reads its due entries and a stored file's
 * item, and removes entries, expired uploads and stored files. Nothing else of the table.
 */
export const UPLOADS_SWEEP_KEYS: Readonly<Record<string, readonly string[]>> = {
  /** The due entries (aiupsweep). */
  'dynamodb:Query': ['aiupsweep'],
  /** The stored file an entry's bytes belong to: still named by a later upload? */
  'dynamodb:GetItem': ['aiupbytes#*'],
  /** A swept entry; an expired upload (conditional on its generation); an expired stored file (on its generation and expiry). */
  'dynamodb:DeleteItem': ['aiupsweep', 'aiupl#*', 'aiupbytes#*'],
};

/**
 * The blob keys it acts on: a stored file's bytes (`ai-uploads/...`, deleted), and an unfinished
 * upload's multipart upload, which the AWS blob store keeps on a staging key (`.staging/...`,
 * lambdas/engine/aws/blobs.ts; aborted).
 */
export const UPLOADS_SWEEP_OBJECTS = { 's3:DeleteObject': 'ai-uploads/*', 's3:AbortMultipartUpload': '.staging/*' } as const;

/** Every 5 minutes (expiries are counted in hours); a run stops starting batches after 30 s (UPLOADS_SWEEP). */
export const UPLOADS_SWEEP_RUN = { timeoutSeconds: 60, everyMinutes: 5 } as const;

/**
 * The AI uploads' sweep on a schedule (docs/decisions/ai-uploads.md, "Expiry"): removes what expired
 * even when no upload starts. A failed run is not retried: the next one takes the same due entries.
 * Its errors alarm comes with every function's (lib/operations.ts).
 */
export class UploadsSweep extends Construct {
  readonly fn: NodejsFunction;
  readonly schedule: Rule;

  constructor(scope: Construct, id: string, props: { table: Table; bucket: Bucket }) {
    super(scope, id);
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/uploads-sweep',
      name: 'uploads-sweep',
      tag: 'uploads-sweep',
      description: 'ai: removes the parts and bytes of expired uploads (every 5 minutes)',
      timeoutSeconds: UPLOADS_SWEEP_RUN.timeoutSeconds,
      retryAttempts: 0,
      environment: { [ENV.tableName]: props.table.tableName, [ENV.bucketName]: props.bucket.bucketName },
    });
    this.fn = fn;
    for (const [action, keys] of Object.entries(UPLOADS_SWEEP_KEYS)) grantItems(role, props.table, [action], [...keys]);
    const objects = Object.entries(UPLOADS_SWEEP_OBJECTS).map(([action, prefix]) => ({ action, arn: props.bucket.arnForObjects(prefix) }));
    for (const { action, arn } of objects) role.addToPrincipalPolicy(new PolicyStatement({ actions: [action], resources: [arn] }));
    acknowledgeUploadsSweepObjects(role, objects.map((o) => o.arn));
    this.schedule = schedule(this, fn, UPLOADS_SWEEP_RUN.everyMinutes, `${Stack.of(this).stackName}: runs the AI uploads sweep`);
  }
}
