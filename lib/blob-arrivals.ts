import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import { EventType, HttpMethods, type Bucket } from 'aws-cdk-lib/aws-s3';
import { LambdaDestination } from 'aws-cdk-lib/aws-s3-notifications';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import { Duration, Stack } from 'aws-cdk-lib';
import { Construct } from 'constructs';
import { ENV } from '../lambdas/shared/settings.js';
import { consumerFunction } from './function-defaults.js';
import { acknowledgeBucketNotificationsHandler, acknowledgeGrantWildcards } from './nag.js';
import type { Queues } from './queues.js';

/** The id CDK gives the stack's bucket-notifications custom resource function (aws-s3 BucketNotificationsHandler). */
const BUCKET_NOTIFICATIONS_HANDLER = 'BucketNotificationsHandler050a0587b7544547bf325f094a3db834';

/** Where upload URLs write (lambdas/data/keys.ts arrivalBytesKey): what the notification watches. */
export const ARRIVAL_KEY_PREFIX = 'arrivals/';
/**
 * What stays under it: bytes sent again to a URL after its arrival was settled (or whose settling
 * crashed). An arrival's own bytes are adopted within its URL's 15 minutes plus a day at most.
 */
export const ARRIVAL_BYTES_DAYS = 2;

/**
 * Files sent straight to the bucket through a presigned URL (docs/data/blobs.md, "Large files on AWS"):
 * the bucket's ObjectCreated notification on `arrivals/` runs the arrivals consumer, which adopts and
 * checks what arrived and records the file as the PUT route would (metadata, activity entry, platform event). So it
 * gets the file routes' access: the table, the bucket, and sending to the work queues (a recorded file
 * publishes its `blob.created` event, which may queue webhook deliveries and stream wakes).
 * Also the bucket's CORS: a browser following a 307 to the bucket needs it.
 */
export class BlobArrivals extends Construct {
  readonly fn: NodejsFunction;

  constructor(scope: Construct, id: string, props: { table: Table; bucket: Bucket; queues: Queues }) {
    super(scope, id);
    const { fn, role } = consumerFunction(this, {
      module: 'consumers/blob-arrivals',
      name: 'blob-arrivals',
      tag: 'blob-arrivals',
      description: 'data: records files sent straight to the bucket once their bytes are checked (S3 notification)',
      // A file's check may read it back (100 MiB, or a multipart file the store kept no checksum of).
      timeoutSeconds: 300,
      environment: {
        [ENV.tableName]: props.table.tableName,
        [ENV.bucketName]: props.bucket.bucketName,
        [ENV.queueUrls]: Stack.of(this).toJsonString(props.queues.urls()),
      },
    });
    this.fn = fn;
    props.table.grantReadWriteData(role);
    props.bucket.grantReadWrite(role);
    for (const { queue } of Object.values(props.queues.byName)) queue.grantSendMessages(role);
    acknowledgeGrantWildcards(this, new Set(['table:write', 'blobs:write']), props);
    props.bucket.addEventNotification(EventType.OBJECT_CREATED, new LambdaDestination(fn), { prefix: ARRIVAL_KEY_PREFIX });
    props.bucket.addLifecycleRule({ prefix: ARRIVAL_KEY_PREFIX, expiration: Duration.days(ARRIVAL_BYTES_DAYS) });
    const handler = Stack.of(this).node.tryFindChild(BUCKET_NOTIFICATIONS_HANDLER);
    if (!handler) throw new Error(`no ${BUCKET_NOTIFICATIONS_HANDLER} after addEventNotification: CDK renamed it`);
    acknowledgeBucketNotificationsHandler(handler);
    // The presigned URL is the credential; no cookies go with it, so any origin may follow a redirect.
    props.bucket.addCorsRule({ allowedMethods: [HttpMethods.GET, HttpMethods.PUT, HttpMethods.HEAD], allowedOrigins: ['*'], allowedHeaders: ['*'], exposedHeaders: ['ETag'], maxAge: 3600 });
  }
}
