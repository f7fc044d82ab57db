/**
 * The vector database's model (vector-model.ts) on the embedded engine: the ledger in SQLite, the index
 * in SQLite with hnswlib-node. Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { checkAnswerAsOfCommit, checkCrashesOfLargeWrite, checkFullCalls, checkPassageStored, checkVectorModel, ESCAPED_TEXTS, startVectorWorld, type VectorWorld } from './vector-model.js';

let dir: string;
let engine: EmbeddedEngine | undefined;
let world: VectorWorld | undefined;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'vector-model-'));
  const clock = new ManualClock(Date.UTC(2026, 10, 27, 12));
  engine = createEmbeddedEngine({ dataDir: dir, clock });
  world = await startVectorWorld(engine, clock);
});
afterAll(async () => {
  await world?.close();
  await engine?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('ingest, delete, query and list behave like the model', { timeout: 120_000 }, async () => {
  const started = Date.now();
  const done = await checkVectorModel(world!, { numRuns: 200, maxCommands: 25, timeLimitMs: 90_000 });
  console.log(`vector model (embedded, FC_SEED=${done.seed}): ${done.runs} runs, ${done.steps} steps in ${((Date.now() - started) / 1000).toFixed(1)} s`, done.stats);
  expect(done.steps).toBeGreaterThan(0);
});

it('answers, lists and counts like the model at the spec limits (100 passages a call, 100 documents)', { timeout: 30_000 }, async () => {
  await checkFullCalls(world!, -4);
});

it('a write of two store transactions killed at each of its writes is seen whole, then finished or undone', { timeout: 40_000 }, async () => {
  const writes = await checkCrashesOfLargeWrite(world!, -10);
  console.log(`a 50-passage write killed at each of its ${writes} writes`);
});

it('a write answers as of its commit, even when another commits to its document during its embeddings call', async () => {
  await checkAnswerAsOfCommit(world!);
});

it('stores a passage of 10 KiB that JSON escapes to twice its size', async () => {
  await checkPassageStored(world!, -2, ESCAPED_TEXTS.quotes);
});

// Its JSON would be 36 KB, over the index's 32 KiB payload: the payload is not JSON (vector/payload.ts).
it('stores a passage of 6,000 control characters (6 KB; its JSON would be 36 KB)', async () => {
  await checkPassageStored(world!, -3, ESCAPED_TEXTS.controls);
});
