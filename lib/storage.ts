import { Duration } from 'aws-cdk-lib';
import { AttributeType, BillingMode, Table, TableEncryption } from 'aws-cdk-lib/aws-dynamodb';
import { BlockPublicAccess, Bucket, BucketEncryption, ObjectOwnership } from 'aws-cdk-lib/aws-s3';
import { S3_SERVER_ACCESS_LOGS_USE_BUCKET_POLICY } from 'aws-cdk-lib/cx-api';
import { Construct } from 'constructs';
import { STAGING_PREFIX } from '../lambdas/engine/aws/staging.js';
import { TABLE_SCHEMA } from '../lambdas/engine/aws/table.js';
import { acknowledgeAccessLogBucket } from './nag.js';

/** How long an object may stay on the AWS blob store's staging prefix. */
export const STAGING_EXPIRY_DAYS = 7;

/** The one DynamoDB table and the blob bucket. Keys come from TABLE_SCHEMA, shared with the AWS adapter. */
export class Storage extends Construct {
  readonly table: Table;
  readonly bucket: Bucket;
  /** The server access logs of the blob bucket (prefix `blobs/`) and the console's files bucket (`console/`, lib/console.ts). */
  readonly accessLogs: Bucket;

  constructor(scope: Construct, id: string) {
    super(scope, id);
    // Let the log bucket admit S3 log delivery by bucket policy, not ACLs (ACLs stay disabled everywhere).
    this.node.setContext(S3_SERVER_ACCESS_LOGS_USE_BUCKET_POLICY, true);
    const str = (name: string) => ({ name, type: AttributeType.STRING });

    this.table = new Table(this, 'Table', {
      partitionKey: str(TABLE_SCHEMA.partitionKey),
      sortKey: str(TABLE_SCHEMA.sortKey),
      // Traffic is bursty and unknown up front; on-demand avoids capacity planning and throttling.
      billingMode: BillingMode.PAY_PER_REQUEST,
      // Restores to any second of the last 35 days (nag DDB3): the table is the system of record.
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      timeToLiveAttribute: TABLE_SCHEMA.ttlAttribute,
      // KMS key aws/dynamodb: key use shows up in CloudTrail, no key policy of ours to manage.
      encryption: TableEncryption.AWS_MANAGED,
    });
    for (const [indexName, keys] of Object.entries(TABLE_SCHEMA.indexes)) {
      this.table.addGlobalSecondaryIndex({ indexName, partitionKey: str(keys.partitionKey), sortKey: str(keys.sortKey) });
    }

    // S3 server access logs need a destination with SSE-S3 and no ACLs.
    this.accessLogs = new Bucket(this, 'AccessLogs', {
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      encryption: BucketEncryption.S3_MANAGED,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      lifecycleRules: [{ expiration: Duration.days(365) }],
    });
    const accessLogs = this.accessLogs;
    acknowledgeAccessLogBucket(accessLogs);

    this.bucket = new Bucket(this, 'Blobs', {
      blockPublicAccess: BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      encryption: BucketEncryption.S3_MANAGED,
      objectOwnership: ObjectOwnership.BUCKET_OWNER_ENFORCED,
      serverAccessLogsBucket: accessLogs,
      serverAccessLogsPrefix: 'blobs/',
      lifecycleRules: [
        // The blob port has multipart uploads; an abandoned one would otherwise be billed forever.
        { abortIncompleteMultipartUploadAfter: Duration.days(7) },
        // Staged objects (a blob being hashed, an upload's joined file waiting for its check) belong to
        // no key until checked; one a crashed function or a dead-lettered check left would stay for good.
        // A check takes minutes: after STAGING_EXPIRY_DAYS nothing still needs one.
        { prefix: STAGING_PREFIX, expiration: Duration.days(STAGING_EXPIRY_DAYS) },
      ],
    });
  }
}
