import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteKeyValueStore } from '../../lambdas/engine/embedded/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { kvContract } from './kv-contract.js';

kvContract(
  'embedded (SQLite on disk)',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kv-'));
    const db = new Database(join(dir, 'kv.db'));
    db.pragma('journal_mode = WAL');
    const clock = new ManualClock();
    return {
      kv: new SqliteKeyValueStore(db, clock),
      clock,
      cleanup: async () => {
        db.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  },
  { transactions: true },
);
