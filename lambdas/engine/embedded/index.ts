/** The embedded engine: one SQLite database (WAL) for items and queues, files on disk for blobs, signing keys and the server secret. */
import Database from 'better-sqlite3';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import type { Clock, Engine } from '../ports.js';
import { systemClock } from '../clock.js';
import { SqliteKeyValueStore } from './kv.js';
import { SqliteQueue } from './queue.js';
import { GroupCommit } from './group-commit.js';
import { startCheckpointer, WAL_SIZE_LIMIT, type Checkpointer } from './checkpointer.js';
import { FileBlobStore } from './blobs.js';
import { LocalConnectionGateway } from './connections.js';
import { FileSigner } from './signer.js';
import { FileSecret } from './secret.js';
import { EnvironmentUpstreamKeys } from './upstream-keys.js';
import { SqliteVectorIndex } from './vectors.js';

export interface EmbeddedEngine extends Engine {
  name: 'embedded';
  kv: SqliteKeyValueStore;
  queue: SqliteQueue;
  connections: LocalConnectionGateway;
  signer: FileSigner;
  vectors: SqliteVectorIndex;
  dataDir: string;
}

const SWEEP_MS = 60_000;
const require = createRequire(import.meta.url);

/**
 * `checkpoints: 'thread'` (the local server): WAL checkpoints in a worker thread instead of inside the
 * commit that crosses 1,000 pages (checkpointer.ts). Short-lived users (the admin CLI, tests) keep
 * SQLite's automatic ones.
 */
export function createEmbeddedEngine(options: { dataDir: string; clock?: Clock; checkpoints?: 'auto' | 'thread' }): EmbeddedEngine {
  const clock = options.clock ?? systemClock;
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const db = new Database(join(options.dataDir, 'platform.db'));
  // WAL with synchronous=NORMAL survives a killed process (only an OS crash can lose the last commits);
  // the busy timeout covers the setup below while other processes open the same file.
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  // Reads dominate lists: keep 64 MiB of pages in SQLite's cache and map the file (256 MiB) so page
  // reads are memory reads, not read() calls.
  db.pragma('cache_size = -65536');
  db.pragma('mmap_size = 268435456');
  // One group commit for the items and the queue: a turn's writes of both take the write lock once.
  const writer = new GroupCommit(db);
  const kv = new SqliteKeyValueStore(db, clock, writer);
  const queue = new SqliteQueue(db, clock, writer);
  // Set up (schemas created, WAL on): from here a write that finds another process holding the lock
  // waits in the group commit without blocking the event loop, not in SQLite's busy handler, which
  // sleeps the whole process (group-commit.ts). In WAL mode readers never wait for the writer.
  db.pragma('busy_timeout = 0');
  // A server's checkpoints run in a worker thread, not inside a request's commit (checkpointer.ts).
  let checkpointer: Checkpointer | undefined;
  if (options.checkpoints === 'thread') {
    db.pragma('wal_autocheckpoint = 0');
    // The checkpointer lets the log start over; the write that does it cuts the file back to this.
    db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT}`);
    checkpointer = startCheckpointer(join(options.dataDir, 'platform.db'), require.resolve('better-sqlite3'));
  }
  const sweeper = setInterval(() => void kv.sweepExpired().catch(() => undefined), SWEEP_MS);
  sweeper.unref();
  // Its own SQLite file (vectors.db), opened at first use: docs/decisions/vector-index-embedded.md.
  const vectors = new SqliteVectorIndex(options.dataDir, { checkpoints: options.checkpoints });
  return {
    name: 'embedded',
    dataDir: options.dataDir,
    kv,
    queue,
    blobs: new FileBlobStore(join(options.dataDir, 'blobs')),
    connections: new LocalConnectionGateway(clock),
    signer: new FileSigner(join(options.dataDir, 'signing-keys.json')),
    secret: new FileSecret(join(options.dataDir, 'server-secret.key')),
    upstreamKeys: new EnvironmentUpstreamKeys(),
    vectors,
    clock,
    async close() {
      clearInterval(sweeper);
      await kv.drain();
      await vectors.close();
      await checkpointer?.stop();
      if (db.open) db.close();
    },
  };
}
