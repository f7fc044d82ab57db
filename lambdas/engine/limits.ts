/** AWS service limits that both engines enforce, so nothing passes locally that fails in AWS. */
export const LIMITS = {
  /** DynamoDB item size, bytes (400 KB). */
  itemBytes: 400 * 1024,
  /** DynamoDB TransactWriteItems: actions and total size. */
  transactionItems: 100,
  transactionBytes: 4 * 1024 * 1024,
  /** DynamoDB BatchGetItem: keys per call. */
  batchGetItems: 100,
  /** DynamoDB Query reads at most 1 MB per page. */
  queryPageBytes: 1024 * 1024,
  /** SQS message timer and visibility ceilings, seconds. */
  queueMaxDelaySeconds: 900,
  queueMaxVisibilitySeconds: 12 * 60 * 60,
  queueMaxReceive: 10,
  /** SQS message body, bytes. */
  queueMessageBytes: 256 * 1024,
  /** S3 multipart: part numbers, minimum part size except the last. */
  multipartMaxParts: 10_000,
  multipartMinPartBytes: 5 * 1024 * 1024,
} as const;
