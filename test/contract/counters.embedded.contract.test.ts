import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteKeyValueStore } from '../../lambdas/engine/embedded/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { countersContract } from './counters-contract.js';

/** Opens the file as a worker process does (WAL, waiting on the write lock rather than failing). */
function open(file: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  return db;
}

countersContract('embedded (SQLite on disk)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'counters-'));
  const file = join(dir, 'kv.db');
  const clock = new ManualClock();
  const connections = [open(file)];
  return {
    kv: new SqliteKeyValueStore(connections[0], clock),
    clock,
    // A second better-sqlite3 connection to the same file, as a second worker process has.
    another: () => {
      const db = open(file);
      connections.push(db);
      return new SqliteKeyValueStore(db, clock);
    },
    cleanup: async () => {
      // Let group commits queued by the last test settle before closing.
      await new Promise((resolve) => setImmediate(resolve));
      for (const db of connections) db.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});
