/**
 * The Data service contract on the AWS engine's adapters: DynamoDB on dynalite (TransactWriteItems
 * emulated, see test/helpers/dynalite-transactions.ts) and S3 on s3rver. The queue, connection gateway
 * and signer are not used by these routes; they come from an embedded engine in a temp dir.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, expect, it } from 'vitest';
import type { Engine } from '../../lambdas/engine/ports.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { S3BlobStore } from '../../lambdas/engine/aws/blobs.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { startDynalite } from '../helpers/dynalite.js';
import { startS3rver } from '../helpers/s3rver.js';
import { emulateTransactions, type TransactionEmulation } from '../helpers/dynalite-transactions.js';
import { dataServiceContract } from './data-service-contract.js';

let emulation: TransactionEmulation | undefined;

dataServiceContract('aws (DynamoDB on dynalite, S3 on s3rver)', async () => {
  const dynamo = await startDynalite();
  const s3 = await startS3rver();
  emulation = await emulateTransactions(dynamo);
  const dataDir = mkdtempSync(join(tmpdir(), 'data-contract-aws-'));
  const local = createEmbeddedEngine({ dataDir });
  const engine: Engine = {
    name: 'aws',
    kv: new DynamoKeyValueStore(dynamo.client, dynamo.tableName, systemClock),
    blobs: new S3BlobStore(s3.client, s3.bucket),
    queue: local.queue,
    connections: local.connections,
    signer: local.signer,
    secret: local.secret,
    clock: systemClock,
    async close() {
      emulation?.restore();
      await local.close();
      await Promise.all([dynamo.close(), s3.close()]);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return engine;
});

// Runs after the contract (tests in a file run in order): the writes above really went through the emulation.
it('ran every write as a TransactWriteItems through the dynalite emulation', () => {
  expect(emulation!.stats.executed).toBeGreaterThan(20);
  expect(emulation!.stats.canceled).toBeGreaterThan(3);
});
afterAll(() => emulation?.restore());
