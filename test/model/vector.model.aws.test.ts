/**
 * The vector database's model (vector-model.ts) on the AWS engine's adapters: the ledger in DynamoDB
 * on dynalite (TransactWriteItems emulated, test/helpers/dynalite-transactions.ts), the index in
 * S3 Vectors in memory (test/helpers/s3vectors-mock.ts), as test/helpers/aws-data-engine.ts builds
 * them. The same rules must hold on both engines; dynalite is slower per request than SQLite, so fewer
 * and shorter runs. Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import { afterAll, beforeAll } from 'vitest';
import type { Engine } from '../../lambdas/engine/ports.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { startVectorWorld, vectorModelTests, type VectorWorld } from './vector-model.js';

let engine: Engine | undefined;
let world: VectorWorld | undefined;

beforeAll(async () => {
  // The store's expiry and the domain's leases on a clock the crash command moves.
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 12));
  engine = (await startAwsDataEngine('vector-model-aws', { clock })).engine;
  world = await startVectorWorld(engine, clock);
});
afterAll(async () => {
  await world?.close();
  await engine?.close();
});

vectorModelTests('aws', () => world!, { numRuns: 30, maxCommands: 15, timeLimitMs: 20_000 }, 60_000);
