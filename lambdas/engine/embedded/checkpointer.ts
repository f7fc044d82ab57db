/**
 * WAL checkpoints off the request path. SQLite's automatic checkpoint runs inside the commit that
 * crosses 1,000 WAL pages, on the committing thread, and syncs the database file: a request landing on
 * that commit waited milliseconds (the p99 of `npm run bench -- ai`). Instead each process turns the
 * automatic checkpoint off on its connection and runs PASSIVE checkpoints from a worker thread with its
 * own connection, which never blocks the writers (a checkpoint that finds another process's under way
 * just skips a round). A crash loses nothing: the WAL is the durable log either way.
 */
import { Worker } from 'node:worker_threads';

const EVERY_MS = 1000;

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 0');
const timer = setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch { /* busy: another checkpoint runs; next round */ }
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
