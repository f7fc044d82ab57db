/**
 * The local server's WAL checkpoints run in a worker thread (lambdas/engine/embedded/checkpointer.ts):
 * the WAL is still copied into the database while the server writes, and a closed engine leaves
 * nothing behind to checkpoint; under steady writes the log still starts over, so the WAL stays bounded.
 */
import { afterEach, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
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

it('lets the log start over while writes go on, so the WAL does not grow without end', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'checkpointer-'));
  dirs.push(dir);
  const engine = createEmbeddedEngine({ dataDir: dir, checkpoints: 'thread' });
  const wal = join(dir, 'platform.db-wal');
  // Four seconds of writes (four checkpoint rounds), in bursts with no pause long enough for a checkpoint
  // to catch up on its own; each 3 KB item is a leaf page and an overflow page: two 4 KB frames a put.
  const text = 'x'.repeat(3000);
  let written = 0;
  const until = Date.now() + 4000;
  for (let i = 0; Date.now() < until; i++) {
    await Promise.all(Array.from({ length: 10 }, (_, j) => engine.kv.put({ pk: `p${i}`, sk: `s${j}`, text })));
    written += 10;
    await new Promise((r) => setTimeout(r, 5));
  }
  const logBytes = written * 2 * 4096;
  expect(logBytes).toBeGreaterThan(8 * 1024 * 1024);
  // Without the RESTART the file holds every frame written; with it, only those since the last rewind.
  expect(statSync(wal).size).toBeLessThan(logBytes / 2);
  await engine.close();
}, 20_000);
