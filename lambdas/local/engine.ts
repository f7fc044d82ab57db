/**
 * The engine `npm start` serves over, from the settings: the embedded one (SQLite and files in
 * DATA_DIR, the default) or, with ENGINE=aws, the AWS engine a Lambda function runs (the selector's
 * createEngine), in AWS or on an emulator the SDK reaches through AWS_ENDPOINT_URL(_<SERVICE>).
 *
 * DynamoDB and S3 are required. An emulator pair such as dynalite and s3rver has no SQS, KMS,
 * Secrets Manager, S3 Vectors or WebSocket API, so each of those ports stays the embedded one unless its own
 * setting is given, as a function without a grant does without the port
 * (docs/decisions/aws-engine-emulators.md).
 */
import { join } from 'node:path';
import type { Engine } from '../engine/ports.js';
import { createEngine } from '../engine/index.js';
import { createEmbeddedEngine } from '../engine/embedded/index.js';
import { ENV, SettingsError, settings, type Settings } from '../shared/settings.js';

/** What the AWS engine cannot run locally without: the table and the bucket. */
const REQUIRED = ['tableName', 'bucketName'] as const;

/**
 * The directory of this process's local state: DATA_DIR itself for the embedded engine; for the AWS
 * engine a folder per table beside it, so the credentials bootstrapped into one table are never
 * taken for those of the embedded database or of another table.
 */
export function localStateDir(config: Settings = settings()): string {
  return config.engine === 'aws' ? join(config.dataDir, `aws-${config.tableName}`) : config.dataDir;
}

/** `checkpoints`: the embedded engine's (engine/embedded/index.ts); a server takes them off the request path. */
export async function openLocalEngine(checkpoints: 'auto' | 'thread', config: Settings = settings()): Promise<Engine> {
  if (config.engine !== 'aws') return createEmbeddedEngine({ dataDir: config.dataDir, checkpoints });
  const missing = REQUIRED.filter((name) => config[name] === undefined).map((name) => ENV[name]);
  if (missing.length) {
    throw new SettingsError(
      `ENGINE=aws: ${missing.join(' and ')} must be set (the DynamoDB table and the S3 bucket to serve over; ` +
        'AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_<SERVICE> for an emulator; docs/decisions/aws-engine-emulators.md)',
    );
  }
  const aws = await createEngine(config);
  const local = createEmbeddedEngine({ dataDir: localStateDir(config), checkpoints });
  // Secrets Manager holds the server secret and, on AWS, the upstream keys routes name: both go there together.
  const secrets = config.serverSecretArn !== undefined;
  return {
    name: 'aws',
    kv: aws.kv,
    blobs: aws.blobs,
    queue: config.queueUrls !== undefined ? aws.queue : local.queue,
    connections: config.connectionsEndpoint !== undefined ? aws.connections : local.connections,
    signer: config.signingKeyIds !== undefined ? aws.signer : local.signer,
    secret: secrets ? aws.secret : local.secret,
    upstreamKeys: secrets ? aws.upstreamKeys : local.upstreamKeys,
    // S3 Vectors has no emulator: without a vector bucket the vector databases live in the embedded index.
    vectors: config.vectorBucketName !== undefined ? aws.vectors : local.vectors,
    clock: aws.clock,
    async close() {
      await Promise.all([aws.close(), local.close()]);
    },
  };
}
