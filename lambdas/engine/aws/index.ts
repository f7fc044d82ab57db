/** The AWS engine: DynamoDB, S3, SQS, the API Gateway Management API and KMS, configured from the environment the stack sets. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { KMSClient } from '@aws-sdk/client-kms';
import type { Engine } from '../ports.js';
import { systemClock } from '../clock.js';
import { ENV } from '../config.js';
import { DynamoKeyValueStore } from './kv.js';
import { S3BlobStore } from './blobs.js';
import { SqsQueue } from './queue.js';
import { ApiGatewayConnectionGateway } from './connections.js';
import { KmsSigner } from './signer.js';

export function createAwsEngine(env: NodeJS.ProcessEnv): Engine {
  const need = (name: string) => {
    const value = env[name];
    if (!value) throw new Error(`${name} is not set`);
    return value;
  };
  // A function only gets the variables its grants need: build each client on first use.
  const lazy = <T extends object>(make: () => T): T => {
    let made: T | undefined;
    return new Proxy({} as T, {
      get: (_t, prop) => {
        made ??= make();
        const value = (made as Record<PropertyKey, unknown>)[prop];
        return typeof value === 'function' ? value.bind(made) : value;
      },
    });
  };
  return {
    name: 'aws',
    kv: lazy(() => new DynamoKeyValueStore(new DynamoDBClient({}), need(ENV.tableName), systemClock)),
    blobs: lazy(() => new S3BlobStore(new S3Client({}), need(ENV.bucketName))),
    queue: lazy(() => new SqsQueue(new SQSClient({}), JSON.parse(need(ENV.queueUrls)))),
    connections: lazy(() => new ApiGatewayConnectionGateway(new ApiGatewayManagementApiClient({ endpoint: need(ENV.connectionsEndpoint) }))),
    signer: lazy(() => new KmsSigner(new KMSClient({}), signingKeyIds(need(ENV.signingKeyIds)))),
    clock: systemClock,
    async close() {},
  };
}

function signingKeyIds(json: string): string[] {
  let ids: unknown;
  try {
    ids = JSON.parse(json);
  } catch {
    ids = undefined;
  }
  if (!Array.isArray(ids) || ids.length === 0 || !ids.every((id) => typeof id === 'string' && id !== '')) {
    throw new Error(`${ENV.signingKeyIds} must be a JSON array of KMS key ids, current first`);
  }
  return ids;
}
