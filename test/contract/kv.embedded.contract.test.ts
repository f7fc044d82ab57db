import { describe, expect, it } from 'vitest';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteKeyValueStore } from '../../lambdas/engine/embedded/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { sqliteKvFixture } from '../helpers/kv-fixtures.js';
import { kvContract } from './kv-contract.js';

kvContract('embedded (SQLite on disk)', async () => sqliteKvFixture('kv-'), { transactions: true });

describe('embedded store housekeeping', () => {
  it('sweeps expired items away for good (they were invisible already), and keeps live ones', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kv-sweep-'));
    const db = new Database(join(dir, 'kv.db'));
    const clock = new ManualClock();
    const kv = new SqliteKeyValueStore(db, clock);
    const now = Math.floor(clock.now() / 1000);
    await kv.put({ pk: 'p', sk: 'old', expires_at: now - 1 });
    await kv.put({ pk: 'p', sk: 'due', expires_at: now + 10 });
    await kv.put({ pk: 'p', sk: 'forever' });
    const rows = () => (db.prepare('SELECT sk FROM kv ORDER BY sk').all() as { sk: string }[]).map((r) => r.sk);
    expect(await kv.sweepExpired()).toBe(1);
    expect(rows()).toEqual(['due', 'forever']);
    clock.advance(10_000);
    expect(await kv.sweepExpired()).toBe(1);
    expect(rows()).toEqual(['forever']);
    db.close();
    rmSync(dir, { recursive: true, force: true });
  });
});
