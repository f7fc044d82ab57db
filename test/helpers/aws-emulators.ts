/**
 * dynalite and s3rver as `ENGINE=aws npm start` meets an emulator pair: the environment a user sets
 * (TABLE_NAME, BUCKET_NAME, the SDK's AWS_ENDPOINT_URL_<SERVICE>, region and keys), for a server in a
 * child process and for an engine opened here by the same code (lambdas/local/engine.ts).
 * dynalite lacks TransactWriteItems: it is reached through an endpoint that emulates it
 * (dynalite-endpoint.ts), so a server in another process gets transactions too.
 */
import { startDynalite, type DynaliteTable } from './dynalite.js';
import { startS3rver, type S3rverBucket } from './s3rver.js';
import { startTransactingEndpoint, type TransactingEndpoint } from './dynalite-endpoint.js';

export interface AwsEmulators {
  dynamo: DynaliteTable;
  /** dynalite with TransactWriteItems, where AWS_ENDPOINT_URL_DYNAMODB points. */
  dynamoEndpoint: TransactingEndpoint;
  s3: S3rverBucket;
  /** The variables a user sets to run `ENGINE=aws npm start` on these emulators. */
  env: Record<string, string>;
  /** Puts `env` into this process's environment (the SDK reads it there); the returned function puts back what was. */
  apply(): () => void;
  close(): Promise<void>;
}

export async function startAwsEmulators(): Promise<AwsEmulators> {
  const [dynamo, s3] = await Promise.all([startDynalite(), startS3rver()]);
  const dynamoEndpoint = await startTransactingEndpoint(dynamo);
  const env: Record<string, string> = {
    ENGINE: 'aws',
    TABLE_NAME: dynamo.tableName,
    BUCKET_NAME: s3.bucket,
    AWS_ENDPOINT_URL_DYNAMODB: dynamoEndpoint.endpoint,
    // By name, as a user types it: the SDK then puts the bucket in the host name unless told otherwise.
    AWS_ENDPOINT_URL_S3: s3.endpoint.replace('127.0.0.1', 'localhost'),
    S3_FORCE_PATH_STYLE: '1',
    AWS_REGION: 'us-east-1',
    // dynalite takes any key; s3rver knows only this pair.
    AWS_ACCESS_KEY_ID: 'S3RVER',
    AWS_SECRET_ACCESS_KEY: 'S3RVER',
    // s3rver stores an aws-chunked body's framing as object bytes: checksums only where S3 requires them.
    AWS_REQUEST_CHECKSUM_CALCULATION: 'WHEN_REQUIRED',
    AWS_RESPONSE_CHECKSUM_VALIDATION: 'WHEN_REQUIRED',
  };
  return {
    dynamo,
    dynamoEndpoint,
    s3,
    env,
    apply() {
      const before = Object.fromEntries(Object.keys(env).map((name) => [name, process.env[name]]));
      Object.assign(process.env, env);
      return () => {
        for (const [name, value] of Object.entries(before)) {
          if (value === undefined) delete process.env[name];
          else process.env[name] = value;
        }
      };
    },
    async close() {
      await dynamoEndpoint.close();
      await Promise.all([dynamo.close(), s3.close()]);
    },
  };
}
