/**
 * Waits for the snapshot an embedded engine writes on its own once ingest went quiet (5 s after its
 * graph caught up), so no snapshot is written during a measured round; writes it when none came.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';

export type SnapshotOrigin = 'written when ingest went quiet' | 'written by the bench';

export async function settledSnapshot(engine: EmbeddedEngine, dataDir: string, index: string): Promise<SnapshotOrigin> {
  const snapshots = join(dataDir, 'vector-snapshots');
  const hasSnapshot = () => existsSync(snapshots) && readdirSync(snapshots).some((f) => f.endsWith('.hnsw'));
  for (let waited = 0; waited < 15_000 && !hasSnapshot(); waited += 250) await new Promise((r) => setTimeout(r, 250));
  if (hasSnapshot()) return 'written when ingest went quiet';
  await engine.vectors.snapshot(index);
  return 'written by the bench';
}
