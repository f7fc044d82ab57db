/**
 * The one price table of the cost model: AWS us-east-1 list prices (on-demand, no free tier, no
 * savings plan) and the public prices of hosted peers, each with where it was read and how sure it is.
 *
 * `checked` is the day the figure was read from `source`; `verified: false` marks a figure taken from a
 * third-party transcription or from the provider's worked examples rather than its own price table
 * (docs/costs.md says which). Change a price here and run `npm run costs -- --write`.
 */

export interface Price {
  /** USD per `unit`. */
  usd: number;
  unit: string;
  source: string;
  checked: string;
  /** False: read from a secondary source (a transcription, an article), not the provider's own table. */
  verified: boolean;
  note?: string;
}

const AWS_READ = '2026-11-27';

export const PRICES = {
  lambdaRequest: { usd: 0.2 / 1e6, unit: 'request', source: 'https://aws.amazon.com/lambda/pricing/', checked: AWS_READ, verified: true },
  lambdaArmGbSecond: {
    usd: 0.0000133334,
    unit: 'GB-second (arm64, first 7.5 billion GB-s a month)',
    source: 'https://aws.amazon.com/lambda/pricing/',
    checked: AWS_READ,
    verified: false,
    note: "the page renders its rate table client-side; the figure is the arm64 rate AWS has listed since 2021, as artillery's price table (lib/platform/aws-lambda/prices.js) carries it",
  },
  lambdaEdgeRequest: { usd: 0.6 / 1e6, unit: 'Lambda@Edge request', source: 'https://aws.amazon.com/lambda/pricing/ (Lambda@Edge)', checked: AWS_READ, verified: false },
  lambdaEdgeGbSecond: { usd: 0.00005001, unit: 'Lambda@Edge GB-second', source: 'https://aws.amazon.com/lambda/pricing/ (Lambda@Edge)', checked: AWS_READ, verified: false },
  httpApiRequest: {
    usd: 1.0 / 1e6,
    unit: 'HTTP API request (first 300 million a month; each 512 KB of a request counts as one)',
    source: 'https://aws.amazon.com/api-gateway/pricing/',
    checked: AWS_READ,
    verified: true,
    note: "from the page's worked example; $0.90 per million above 300 million",
  },
  webSocketMessage: {
    usd: 1.0 / 1e6,
    unit: 'WebSocket message, sent or received (32 KB increments; first billion a month)',
    source: 'https://aws.amazon.com/api-gateway/pricing/',
    checked: AWS_READ,
    verified: false,
    note: 'the metering (32 KB increments) is on the page; the rate is the long-standing list price',
  },
  webSocketConnectionMinute: {
    usd: 0.25 / 1e6,
    unit: 'WebSocket connection minute',
    source: 'https://repost.aws/questions/QU7IqgooGeQmqudOsmzTw5YQ (quoting https://aws.amazon.com/api-gateway/pricing/)',
    checked: AWS_READ,
    verified: false,
  },
  dynamoReadUnit: {
    usd: 0.125 / 1e6,
    unit: 'read request unit (on-demand; one strongly consistent read of up to 4 KB)',
    source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/',
    checked: AWS_READ,
    verified: false,
    note: 'the rate after the 1 November 2024 halving of on-demand prices, as airbyte.com/data-engineering-resources/dynamodb-pricing lists it; the unit definitions are from the AWS page',
  },
  dynamoWriteUnit: {
    usd: 0.625 / 1e6,
    unit: 'write request unit (on-demand; one write of up to 1 KB)',
    source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/',
    checked: AWS_READ,
    verified: false,
    note: 'as the read unit',
  },
  dynamoStorageGbMonth: { usd: 0.25, unit: 'GB-month of table storage (first 25 GB free)', source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/', checked: AWS_READ, verified: false },
  dynamoPitrGbMonth: { usd: 0.2, unit: 'GB-month of continuous backup (PITR)', source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/', checked: AWS_READ, verified: false },
  s3PutRequest: { usd: 0.005 / 1000, unit: 'S3 Standard PUT, COPY, POST or LIST request', source: 'https://aws.amazon.com/s3/pricing/', checked: AWS_READ, verified: false, note: 'the page renders its rate table client-side; long-standing list price' },
  s3StorageGbMonth: { usd: 0.023, unit: 'GB-month of S3 Standard storage (first 50 TB)', source: 'https://aws.amazon.com/s3/pricing/', checked: AWS_READ, verified: false, note: 'as PUT' },
  s3GetRequest: { usd: 0.0004 / 1000, unit: 'S3 Standard GET, HEAD or SELECT request', source: 'https://aws.amazon.com/s3/pricing/', checked: AWS_READ, verified: false, note: 'as PUT' },
  sqsRequest: { usd: 0.4 / 1e6, unit: 'SQS standard request (each 64 KB chunk of a payload counts as one; first million a month free)', source: 'https://aws.amazon.com/sqs/pricing/', checked: AWS_READ, verified: false },
  cloudFrontHttpsRequest: {
    usd: 0.01 / 10_000,
    unit: 'CloudFront HTTPS request (United States, Mexico, Canada; first 10 million a month free)',
    source: 'https://aws.amazon.com/cloudfront/pricing/',
    checked: AWS_READ,
    verified: false,
    note: 'as infracost prices it (github.com/vreutova/infracost-idem-support/pull/15) and snowplow-tco-model uses it',
  },
  cloudFrontTransferOutGb: {
    usd: 0.085,
    unit: 'GB from CloudFront to the internet (United States, Mexico, Canada; first 10 TB; first 1 TB a month free); not in the per-call figures',
    source: 'https://aws.amazon.com/cloudfront/pricing/',
    checked: AWS_READ,
    verified: false,
    note: 'as the CloudFront request price',
  },
  regionTransferOutGb: { usd: 0.09, unit: 'GB from the region to the internet (first 10 TB; first 100 GB a month free); not in the per-call figures', source: 'https://aws.amazon.com/ec2/pricing/on-demand/#Data_Transfer', checked: AWS_READ, verified: false },
  cloudFrontFunction: { usd: 0.1 / 1e6, unit: 'CloudFront Functions invocation', source: 'https://aws.amazon.com/cloudfront/pricing/', checked: AWS_READ, verified: false },
  kmsKeyMonth: { usd: 1.0, unit: 'KMS key a month (symmetric or asymmetric)', source: 'https://aws.amazon.com/kms/pricing/', checked: AWS_READ, verified: false },
  kmsAsymmetricRequest: { usd: 0.15 / 10_000, unit: 'KMS asymmetric request (Sign)', source: 'https://aws.amazon.com/kms/pricing/', checked: AWS_READ, verified: false },
  secretApiCall: { usd: 0.05 / 10_000, unit: 'Secrets Manager API call (GetSecretValue)', source: 'https://aws.amazon.com/secrets-manager/pricing/', checked: AWS_READ, verified: false },
  secretMonth: { usd: 0.4, unit: 'Secrets Manager secret a month', source: 'https://aws.amazon.com/secrets-manager/pricing/', checked: AWS_READ, verified: false },
  alarmMonth: {
    usd: 0.1,
    unit: 'CloudWatch standard-resolution alarm metric a month (first 10 free per account); a metric-math alarm counts each metric it reads',
    source: 'https://aws.amazon.com/cloudwatch/pricing/',
    checked: AWS_READ,
    verified: false,
  },
  dashboardMonth: {
    usd: 3.0,
    unit: 'CloudWatch dashboard a month (first 3, of up to 50 metrics each, free per account)',
    source: 'https://aws.amazon.com/cloudwatch/pricing/',
    checked: AWS_READ,
    verified: false,
    note: 'as github.com/nishinoshake/aws-rough/issues/37 transcribes the page',
  },
  logIngestGb: { usd: 0.5, unit: 'GB of CloudWatch Logs ingested (standard class)', source: 'https://aws.amazon.com/cloudwatch/pricing/', checked: AWS_READ, verified: false },
  logStorageGbMonth: { usd: 0.03, unit: 'GB-month of CloudWatch Logs archived', source: 'https://aws.amazon.com/cloudwatch/pricing/', checked: AWS_READ, verified: false },
  s3VectorsStorageGbMonth: {
    usd: 0.06,
    unit: 'GB-month of vectors stored (S3 Vectors)',
    source: 'https://aws.amazon.com/s3/pricing/ (S3 Vectors tab)',
    checked: AWS_READ,
    verified: false,
    note: "from the page's worked example, as transcribed by api-evangelist/amazon-s3 plans (read 2026-09-20)",
  },
  s3VectorsPutGb: { usd: 0.2, unit: 'GB of vectors written (PutVectors; 128 KB minimum a request)', source: 'https://aws.amazon.com/s3/pricing/ (S3 Vectors tab)', checked: AWS_READ, verified: false, note: 'as storage' },
  s3VectorsQuery: {
    usd: 2.5 / 1e6,
    unit: 'QueryVectors call, plus a per-TB data-processed charge that grows with the index (not modelled)',
    source: 'https://aws.amazon.com/s3/pricing/ (S3 Vectors tab)',
    checked: AWS_READ,
    verified: false,
    note: 'as storage; the data-processed tiers were cut by up to 80 % for indexes over 10 million vectors on 2026-06-16 (dev.classmethod.jp)',
  },
} satisfies Record<string, Price>;

/** Hosted peers doing the same work, at their public list prices. */
export const PEERS = {
  svix: {
    usd: 490,
    unit: 'a month, Professional, 50,000 messages included, then $0.0001 a message',
    overagePerCall: 0.0001,
    included: 50_000,
    source: 'https://www.svix.com/pricing/',
    checked: '2026-09-20',
    verified: false,
    note: 'as api-evangelist/svix plans transcribe the page (read 2026-09-20); the free plan has 50,000 messages and the same overage',
  },
  hookdeck: {
    usd: 39,
    unit: 'a month, Team (Event Gateway), 10,000 events included, metered beyond',
    source: 'https://hookdeck.com/pricing',
    checked: '2026-09-20',
    verified: false,
    note: 'as api-evangelist/hookdeck plans transcribe the page; the per-event rate beyond the plan could not be read (a slider), Growth starts at $499 a month',
  },
  portkey: {
    usd: 49,
    unit: 'a month, Production, 100,000 requests logged included, then $9 per 100,000 up to 3 million',
    overagePer100k: 9,
    included: 100_000,
    source: 'https://portkey.ai/pricing',
    checked: '2026-11-27',
    verified: false,
    note: 'as finops.apis.io/finops/portkey transcribes it; the open-source gateway self-hosted has no fee',
  },
  litellm: {
    usd: NaN,
    unit: 'LiteLLM Enterprise: quoted per contract, no public per-request fee; the open-source proxy has none',
    source: 'https://www.litellm.ai/enterprise',
    checked: '2026-11-27',
    verified: false,
  },
  pinecone: {
    usd: 50,
    unit: 'a month minimum (Standard), then $0.33 per GB-month, $16 per million read units, $4 per million write units (AWS us-east-1)',
    readUnitUsd: 16 / 1e6,
    writeUnitUsd: 4 / 1e6,
    storageGbMonth: 0.33,
    source: 'https://www.pinecone.io/pricing/',
    checked: '2026-11-04',
    verified: false,
    note: "as docs.flexprice.io's Pinecone teardown captured the page on 2026-11-04",
  },
} as const;
