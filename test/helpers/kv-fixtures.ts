/**
 * The key-value stores the contract suites run on: SQLite on disk (as the embedded engine opens it)
 * and the DynamoDB adapter on one dynalite per test file (each test keeps to its own partitions).
 */
import { afterAll } from 'vitest';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteKeyValueStore } from '../../lambdas/engine/embedded/kv.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { startDynalite, type DynaliteTable } from './dynalite.js';
import type { KvFixture } from '../contract/kv-contract.js';

/** Opens the file as a worker process does (WAL, waiting on the write lock rather than failing). */
export function openSqlite(file: string): Database.Database {
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('busy_timeout = 5000');
  return db;
}

/** A fresh SQLite store in a temp directory; `another()` opens a second connection to its file, as a second worker has. */
export function sqliteKvFixture(prefix: string): KvFixture & { another(): SqliteKeyValueStore } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const file = join(dir, 'kv.db');
  const clock = new ManualClock();
  const connections = [openSqlite(file)];
  return {
    kv: new SqliteKeyValueStore(connections[0], clock),
    clock,
    another: () => {
      const db = openSqlite(file);
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
}

/** The DynamoDB adapter on this file's dynalite (started on first use, stopped after the file). */
export function dynaliteKvFixtures(): { fixture(): Promise<KvFixture & { table: DynaliteTable }> } {
  let shared: Promise<DynaliteTable> | undefined;
  afterAll(async () => (await shared)?.close());
  return {
    fixture: async () => {
      const table = await (shared ??= startDynalite());
      const clock = new ManualClock();
      return { kv: new DynamoKeyValueStore(table.client, table.tableName, clock), clock, table, cleanup: async () => {} };
    },
  };
}
