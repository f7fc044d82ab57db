/**
 * The local server's WAL checkpoints run in a worker thread (lambdas/engine/embedded/checkpointer.ts):
 * the WAL is still copied into the database while the server writes, and a closed engine leaves
 * nothing behind to checkpoint.
 */
import { afterEach, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** [busy, WAL frames, frames checkpointed] as a PASSIVE checkpoint from another connection sees them. */
function walState(dir: string): number[] {
  const db = new Database(join(dir, 'platform.db'));
  try {
    return Object.values((db.pragma('wal_checkpoint(PASSIVE)') as Record<string, number>[])[0]);
  } finally {
    db.close();
  }
}

it('checkpoints from a worker thread while the engine writes, with the automatic checkpoint off', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'checkpointer-'));
  dirs.push(dir);
  const engine = createEmbeddedEngine({ dataDir: dir, checkpoints: 'thread' });
  const probe = new Database(join(dir, 'platform.db'));
  for (let i = 0; i < 30; i++) await Promise.all(Array.from({ length: 100 }, (_, j) => engine.kv.put({ pk: `p${i}`, sk: `s${j}`, text: 'x'.repeat(200) })));
  // Within a second or two the thread has copied every frame: nothing is left for another checkpoint.
  await expect.poll(() => {
    const [busy, log, checkpointed] = (probe.pragma('wal_checkpoint(PASSIVE)') as Record<string, number>[]).map((r) => Object.values(r))[0];
    return busy === 0 && log > 0 && log === checkpointed;
  }, { timeout: 5000, interval: 200 }).toBe(true);
  probe.close();
  await engine.close();
  expect(walState(dir)[0]).toBe(0);
});
