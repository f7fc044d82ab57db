/**
 * The vector database's model (vector-model.ts) on the AWS engine's adapters: the ledger in DynamoDB
 * on dynalite (TransactWriteItems emulated, test/helpers/dynalite-transactions.ts), the index in
 * S3 Vectors in memory (test/helpers/s3vectors-mock.ts), as test/helpers/aws-data-engine.ts builds
 * them. The same rules must hold on both engines; dynalite is slower per request than SQLite, so fewer
 * and shorter runs. Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Engine } from '../../lambdas/engine/ports.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { checkAnswerAsOfCommit, checkCrashesOfLargeWrite, checkFullCalls, checkPassageStored, checkVectorModel, ESCAPED_TEXTS, startVectorWorld, type VectorWorld } from './vector-model.js';

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

it('ingest, delete, query and list behave like the model on the AWS adapters (dynalite, S3 Vectors in memory)', { timeout: 60_000 }, async () => {
  const started = Date.now();
  const done = await checkVectorModel(world!, { numRuns: 30, maxCommands: 15, timeLimitMs: 20_000 });
  console.log(`vector model (aws, FC_SEED=${done.seed}): ${done.runs} runs, ${done.steps} steps in ${((Date.now() - started) / 1000).toFixed(1)} s`, done.stats);
  expect(done.steps).toBeGreaterThan(0);
});

it('answers, lists and counts like the model at the spec limits (100 passages a call, 100 documents)', { timeout: 30_000 }, async () => {
  await checkFullCalls(world!, -4);
});

it('a write of two store transactions killed at each of its writes is seen whole, then finished or undone', { timeout: 40_000 }, async () => {
  const writes = await checkCrashesOfLargeWrite(world!, -10);
  console.log(`a 50-passage write killed at each of its ${writes} writes`);
});

it('a write answers as of its commit on the AWS adapters too', async () => {
  await checkAnswerAsOfCommit(world!);
});

// As JSON the entry's metadata, payload and all, would be 41 KB, over S3 Vectors' 40 KB: the payload is not JSON (vector/payload.ts).
it('stores a passage of 10 KiB that JSON escapes to twice its size, as the embedded engine does', async () => {
  await checkPassageStored(world!, -2, ESCAPED_TEXTS.quotes);
});

it('stores a passage of 6,000 control characters (6 KB; its JSON would be 36 KB)', async () => {
  await checkPassageStored(world!, -3, ESCAPED_TEXTS.controls);
});
