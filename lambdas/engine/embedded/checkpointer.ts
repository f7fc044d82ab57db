/**
 * WAL checkpoints off the request path. SQLite's automatic checkpoint runs inside the commit that
 * crosses 1,000 WAL pages, on the committing thread, and syncs the database file: a request landing on
 * that commit waited milliseconds (the p99 of `npm run bench -- ai`). Instead each process turns the
 * automatic checkpoint off on its connection and runs PASSIVE checkpoints from a worker thread with its
 * own connection, which never blocks the writers (a checkpoint that finds another process's under way
 * just skips a round). A crash loses nothing: the WAL is the durable log either way.
 *
 * A PASSIVE checkpoint alone never lets the log start over under steady writes: the WAL is rewound only
 * by a writer that finds every frame copied, and new frames always arrive while a checkpoint syncs. The
 * log then grows without end (170 MB in 25 s of `npm run bench -- ai`), and every page read searches
 * more of its index. So a round that left fewer than RESTART_FRAMES frames uncopied follows with a
 * RESTART checkpoint, which copies those few, waits for no one (busy_timeout 0: it gives up when a
 * writer or an old reader is active, and the next round tries again) and makes the next write start the
 * log from its beginning; the writers it holds off for that short copy and sync wait in the group
 * commit without blocking their event loop. journal_size_limit then keeps the file itself small.
 */
import { Worker } from 'node:worker_threads';

const EVERY_MS = 1000;
/** At most this many frames (4 KB each) left to copy: the RESTART that follows is short. */
const RESTART_FRAMES = 2000;
/** The WAL file is cut back to this many bytes when the log starts over. */
export const WAL_SIZE_LIMIT = 64 * 1024 * 1024;

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 0');
db.pragma('journal_size_limit = ${WAL_SIZE_LIMIT}');
const timer = setInterval(() => {
  try {
    const [{ busy, log, checkpointed }] = db.pragma('wal_checkpoint(PASSIVE)');
    if (!busy && log - checkpointed < ${RESTART_FRAMES}) db.pragma('wal_checkpoint(RESTART)');
  } catch { /* busy: another checkpoint runs; next round */ }
}, ${EVERY_MS});
parentPort.on('message', () => { clearInterval(timer); try { db.pragma('wal_checkpoint(PASSIVE)'); } catch {} db.close(); parentPort.close(); });
`;

export interface Checkpointer {
  stop(): Promise<void>;
}

/** Starts checkpointing the database at `path` (its connection in this thread must have `wal_autocheckpoint = 0`). */
export function startCheckpointer(path: string, driver: string): Checkpointer {
  const worker = new Worker(WORKER, { eval: true, workerData: { path, driver } });
  worker.unref();
  // A checkpointer that fails (the file went away in a test) must not take the process with it.
  worker.on('error', () => undefined);
  return {
    stop: () =>
      new Promise<void>((resolve) => {
        worker.once('exit', () => resolve());
        worker.postMessage('stop');
        setTimeout(() => void worker.terminate().then(() => resolve()), 2000).unref();
      }),
  };
}
