/**
 * The vector database's model (vector-model.ts) on the embedded engine: the ledger in SQLite, the index
 * in SQLite with hnswlib-node. Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import { afterAll, beforeAll } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { startVectorWorld, vectorModelTests, type VectorWorld } from './vector-model.js';

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

vectorModelTests('embedded', () => world!, { numRuns: 200, maxCommands: 25, timeLimitMs: 90_000 }, 120_000);
