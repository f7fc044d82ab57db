/**
 * Environment variables that select and configure the engine. The CDK stack sets the `aws` ones on
 * every function; the local server and the admin CLI use the `embedded` defaults.
 */
export const ENV = {
  /** `aws` or `embedded` (default). */
  engine: 'ENGINE',
  /** embedded: directory for the SQLite database, blobs and keys (default `.platform`). */
  dataDir: 'DATA_DIR',
  /** aws: DynamoDB table name. */
  tableName: 'TABLE_NAME',
  /** aws: S3 bucket for blobs. */
  bucketName: 'BUCKET_NAME',
  /** aws: JSON object, queue name (see queues.ts, dead-letter queues included) -> SQS queue URL. */
  queueUrls: 'QUEUE_URLS',
  /** aws: https endpoint of the WebSocket API stage, for the API Gateway Management API. */
  connectionsEndpoint: 'CONNECTIONS_ENDPOINT',
  /** aws: JSON array of the KMS key ids or ARNs that sign and verify tokens, current key first. */
  signingKeyIds: 'SIGNING_KEY_IDS',
} as const;
