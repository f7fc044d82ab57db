/**
 * The engine the Data routes run on in AWS, here: DynamoDB on dynalite (TransactWriteItems emulated,
 * see dynalite-transactions.ts) and S3 on s3rver. The ports record routes do not use (queue,
 * connections, signer, secret) come from an embedded engine in a temp dir, the queue unless one is given.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Clock, Engine, Queue } from '../../lambdas/engine/ports.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { S3BlobStore } from '../../lambdas/engine/aws/blobs.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { startDynalite, type DynaliteTable } from './dynalite.js';
import { startS3rver, type S3rverBucket } from './s3rver.js';
import { emulateTransactions, type TransactionEmulation } from './dynalite-transactions.js';

/** `clock` drives the store's expiry (default: the system clock); `queue` replaces the embedded queue (e.g. SQS on a client mock). */
export async function startAwsDataEngine(
  name: string,
  options: { clock?: Clock; queue?: Queue } = {},
): Promise<{ engine: Engine; emulation: TransactionEmulation; dynamo: DynaliteTable; s3: S3rverBucket }> {
  const dynamo = await startDynalite();
  const s3 = await startS3rver();
  const emulation = await emulateTransactions(dynamo);
  const dataDir = mkdtempSync(join(tmpdir(), `${name}-`));
  const local = createEmbeddedEngine({ dataDir });
  const engine: Engine = {
    name: 'aws',
    kv: new DynamoKeyValueStore(dynamo.client, dynamo.tableName, options.clock ?? systemClock),
    blobs: new S3BlobStore(s3.client, s3.bucket),
    queue: options.queue ?? local.queue,
    connections: local.connections,
    signer: local.signer,
    secret: local.secret,
    upstreamKeys: local.upstreamKeys,
    clock: options.clock ?? systemClock,
    async close() {
      emulation.restore();
      await local.close();
      await Promise.all([dynamo.close(), s3.close()]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return { engine, emulation, dynamo, s3 };
}
