/**
 * The AWS engine: DynamoDB, S3, SQS, the API Gateway Management API, KMS, Secrets Manager and S3 Vectors, configured
 * from the environment the stack sets. Every client is built without an endpoint, so the SDK's own
 * `AWS_ENDPOINT_URL` and `AWS_ENDPOINT_URL_<SERVICE>` point it at an emulator; the API Gateway
 * Management API has no regional endpoint and takes CONNECTIONS_ENDPOINT (docs/decisions/aws-engine-emulators.md).
 */
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import type { Engine } from '../ports.js';
import { systemClock } from '../clock.js';
import { ENV, type Settings } from '../../shared/settings.js';
import { DynamoKeyValueStore } from './kv.js';
import { ApiGatewayConnectionGateway } from './connections.js';
import { onFirstCall } from '../adapter-kit/memo.js';

export function createAwsEngine(config: Settings): Engine {
  const need = <K extends 'tableName' | 'bucketName' | 'vectorBucketName' | 'queueUrls' | 'connectionsEndpoint' | 'connectionsTable' | 'signingKeyIds' | 'serverSecretArn'>(name: K): NonNullable<Settings[K]> => {
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
  // Ports whose client most calls never need load at their first call (onFirstCall): DynamoDB resolves
  // every credential, so it stays in.
  // A Lambda bundle leaves out the ports its function has no grant for: PLATFORM_PORT_<PORT> is
  // "absent" in that function's bundle (../adapter-kit/bundle-defines.ts), each condition below is then a constant,
  // and esbuild drops the client it no longer reaches. Bytes are what a function's import costs (S3's
  // client alone is 160 KiB minified; docs/decisions/lambda-bundles.md).
  const absent = (port: string) => (): never => {
    throw new Error(`this function was built without the ${port} port (its grants do not include it)`);
  };
  // Kept to be destroyed by close(): their keep-alive sockets would hold a local server's process open.
  const clients: { destroy(): void }[] = [];
  const made = <C extends { destroy(): void }>(client: C): C => {
    clients.push(client);
    return client;
  };
  return {
    name: 'aws',
    kv: lazy(() => new DynamoKeyValueStore(made(new DynamoDBClient({})), need('tableName'), systemClock)),
    blobs:
      globalThis.PLATFORM_PORT_BLOBS === 'absent'
        ? lazy(absent('blobs'))
        : onFirstCall(async () => {
            const [{ S3Client }, { S3BlobStore }] = await Promise.all([import('@aws-sdk/client-s3'), import('./blobs.js')]);
            // An emulator's endpoint has no per-bucket host names: S3_FORCE_PATH_STYLE puts the bucket in the path.
            return new S3BlobStore(made(new S3Client({ forcePathStyle: config.s3ForcePathStyle })), need('bucketName'));
          }),
    queue:
      globalThis.PLATFORM_PORT_QUEUE === 'absent'
        ? lazy(absent('queue'))
        : onFirstCall(async () => {
            const [{ SQSClient }, { SqsQueue }] = await Promise.all([import('@aws-sdk/client-sqs'), import('./queue.js')]);
            // The SDK would send to each queue URL's host instead, past AWS_ENDPOINT_URL_SQS: an emulator's
            // URLs may name a host only it can resolve. The stack's queues are in the function's region.
            return new SqsQueue(made(new SQSClient({ useQueueUrlAsEndpoint: false })), need('queueUrls'));
          }),
    connections: lazy(
      globalThis.PLATFORM_PORT_CONNECTIONS === 'absent'
        ? absent('connections')
        : () =>
            new ApiGatewayConnectionGateway(
              made(new ApiGatewayManagementApiClient({ endpoint: need('connectionsEndpoint') })),
              // Functions that only post frames (the HTTP stream route) have no connection table.
              config.connectionsTable === undefined
                ? undefined
                : { documents: DynamoDBDocumentClient.from(made(new DynamoDBClient({}))), tableName: config.connectionsTable, clock: systemClock },
            ),
      // publish() asks on every call whether to wake streams; most functions have no connections endpoint.
      { holdsSockets: false },
    ),
    // Every function verifies tokens, but only calls with a token (not a key) need the public keys.
    signer: onFirstCall(async () => {
      const [{ KMSClient }, { KmsSigner }] = await Promise.all([import('@aws-sdk/client-kms'), import('./signer.js')]);
      return new KmsSigner(made(new KMSClient({})), need('signingKeyIds'));
    }),
    secret:
      globalThis.PLATFORM_PORT_SECRET === 'absent'
        ? lazy(absent('secret'))
        : onFirstCall(async () => {
            const [{ SecretsManagerClient }, { SecretsManagerSecret }] = await Promise.all([import('@aws-sdk/client-secrets-manager'), import('./secret.js')]);
            return new SecretsManagerSecret(made(new SecretsManagerClient({})), need('serverSecretArn'));
          }),
    vectors:
      globalThis.PLATFORM_PORT_VECTORS === 'absent'
        ? lazy(absent('vectors'))
        : onFirstCall(async () => {
            const [{ S3VectorsClient }, { S3VectorIndex }] = await Promise.all([import('@aws-sdk/client-s3vectors'), import('./vectors.js')]);
            // One attempt a send: the adapter retries throttling and 5xx itself, with longer pauses (vectors.ts RETRY).
            return new S3VectorIndex(made(new S3VectorsClient({ maxAttempts: 1 })), need('vectorBucketName'));
          }),
    upstreamKeys:
      globalThis.PLATFORM_PORT_UPSTREAM_KEYS === 'absent'
        ? lazy(absent('upstreamKeys'))
        : onFirstCall(async () => {
            const [{ SecretsManagerClient }, { SecretsManagerUpstreamKeys }] = await Promise.all([import('@aws-sdk/client-secrets-manager'), import('./upstream-keys.js')]);
            return new SecretsManagerUpstreamKeys(made(new SecretsManagerClient({})));
          }),
    clock: systemClock,
    async close() {
      for (const client of clients.splice(0)) client.destroy();
    },
  };
}

