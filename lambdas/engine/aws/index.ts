/** The AWS engine: DynamoDB, S3, SQS, the API Gateway Management API, KMS and Secrets Manager, configured from the environment the stack sets. */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { S3Client } from '@aws-sdk/client-s3';
import { SQSClient } from '@aws-sdk/client-sqs';
import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { KMSClient } from '@aws-sdk/client-kms';
import { SecretsManagerClient } from '@aws-sdk/client-secrets-manager';
import type { Engine } from '../ports.js';
import { systemClock } from '../clock.js';
import { ENV, type Settings } from '../../shared/settings.js';
import { DynamoKeyValueStore } from './kv.js';
import { S3BlobStore } from './blobs.js';
import { SqsQueue } from './queue.js';
import { ApiGatewayConnectionGateway } from './connections.js';
import { KmsSigner } from './signer.js';
import { SecretsManagerSecret } from './secret.js';
import { SecretsManagerUpstreamKeys } from './upstream-keys.js';

export function createAwsEngine(config: Settings): Engine {
  const need = <K extends 'tableName' | 'bucketName' | 'queueUrls' | 'connectionsEndpoint' | 'connectionsTable' | 'signingKeyIds' | 'serverSecretArn'>(name: K): NonNullable<Settings[K]> => {
    const value = config[name];
    if (value === undefined) throw new Error(`${ENV[name]} is not set`);
    return value as NonNullable<Settings[K]>;
  };
  // A function only gets the variables its grants need: build each client on first use.
  // `known`: properties answered without building the client (a function without the variables can read them).
  const lazy = <T extends object>(make: () => T, known: Partial<T> = {}): T => {
    let made: T | undefined;
    return new Proxy({} as T, {
      get: (_t, prop) => {
        if (Object.hasOwn(known, prop)) return (known as Record<PropertyKey, unknown>)[prop];
        made ??= make();
        const value = (made as Record<PropertyKey, unknown>)[prop];
        return typeof value === 'function' ? value.bind(made) : value;
      },
    });
  };
  return {
    name: 'aws',
    kv: lazy(() => new DynamoKeyValueStore(new DynamoDBClient({}), need('tableName'), systemClock)),
    blobs: lazy(() => new S3BlobStore(new S3Client({}), need('bucketName'))),
    queue: lazy(() => new SqsQueue(new SQSClient({}), need('queueUrls'))),
    connections: lazy(
      () =>
        new ApiGatewayConnectionGateway(
          new ApiGatewayManagementApiClient({ endpoint: need('connectionsEndpoint') }),
          // Functions that only post frames (the HTTP stream route) have no connection table.
          config.connectionsTable === undefined
            ? undefined
            : { documents: DynamoDBDocumentClient.from(new DynamoDBClient({})), tableName: config.connectionsTable, clock: systemClock },
        ),
      // publish() asks on every call whether to wake streams; most functions have no connections endpoint.
      { holdsSockets: false },
    ),
    signer: lazy(() => new KmsSigner(new KMSClient({}), need('signingKeyIds'))),
    secret: lazy(() => new SecretsManagerSecret(new SecretsManagerClient({}), need('serverSecretArn'))),
    upstreamKeys: lazy(() => new SecretsManagerUpstreamKeys(new SecretsManagerClient({}))),
    clock: systemClock,
    async close() {},
  };
}

