/**
 * The engine the Data routes run on in AWS, here: DynamoDB on dynalite (TransactWriteItems emulated,
 * see dynalite-transactions.ts), S3 on s3rver and S3 Vectors in memory (s3vectors-mock.ts, behind
 * aws-sdk-client-mock on this engine's client only). The ports record routes do not use (queue,
 * connections, signer, secret) come from an embedded engine in a temp dir, the queue unless one is given.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3VectorsClient } from '@aws-sdk/client-s3vectors';
import type { Clock, Engine, Queue } from '../../lambdas/engine/ports.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { S3BlobStore } from '../../lambdas/engine/aws/blobs.js';
import { S3VectorIndex } from '../../lambdas/engine/aws/vectors.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { startDynalite, type DynaliteTable } from './dynalite.js';
import { startS3rver, type S3rverBucket } from './s3rver.js';
import { emulateTransactions, type TransactionEmulation } from './dynalite-transactions.js';
import { mockS3Vectors, type S3VectorsMock } from './s3vectors-mock.js';

/** `clock` drives the store's expiry (default: the system clock); `queue` replaces the embedded queue (e.g. SQS on a client mock). */
export async function startAwsDataEngine(
  name: string,
  options: { clock?: Clock; queue?: Queue } = {},
): Promise<{ engine: Engine; emulation: TransactionEmulation; dynamo: DynaliteTable; s3: S3rverBucket; s3vectors: S3VectorsMock }> {
  const dynamo = await startDynalite();
  const s3 = await startS3rver();
  const emulation = await emulateTransactions(dynamo);
  const dataDir = mkdtempSync(join(tmpdir(), `${name}-`));
  const local = createEmbeddedEngine({ dataDir });
  const vectorsClient = new S3VectorsClient({ region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
  const s3vectors = mockS3Vectors(vectorsClient, { buckets: ['vectors-test'] });
  const engine: Engine = {
    name: 'aws',
    kv: new DynamoKeyValueStore(dynamo.client, dynamo.tableName, options.clock ?? systemClock),
    blobs: new S3BlobStore(s3.client, s3.bucket),
    queue: options.queue ?? local.queue,
    connections: local.connections,
    signer: local.signer,
    secret: local.secret,
    upstreamKeys: local.upstreamKeys,
    vectors: new S3VectorIndex(vectorsClient, 'vectors-test'),
    clock: options.clock ?? systemClock,
    async close() {
      emulation.restore();
      s3vectors.restore();
      await local.close();
      await Promise.all([dynamo.close(), s3.close()]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return { engine, emulation, dynamo, s3, s3vectors };
}
