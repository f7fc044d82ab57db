/**
 * The embedded engine's one writer: every write of a process (key-value items and queue messages
 * alike, they share one SQLite file) that arrives while the event loop is busy is applied in ONE
 * SQLite transaction on the next turn, each inside its own savepoint: each is still all-or-nothing and
 * sees the ones queued before it, a failing one rolls back alone, and none is acknowledged before the
 * commit that holds it. Under load this turns many COMMITs into one, and, with several worker
 * processes on one file, many takes of the write lock into one: a process waiting for the lock is
 * blocked in SQLite's busy handler, so every take avoided is latency saved for all its requests.
 */
import type Database from 'better-sqlite3';
import { performance } from 'node:perf_hooks';
import { EngineUnavailableError } from '../errors.js';

/** How long a group waits for another process's write lock before failing (503), as busy_timeout did. */
const BUSY_WAIT_MS = 5000;
/** Tries on the next turns before waiting a millisecond between them. */
const BUSY_SPIN_TRIES = 8;

interface Pending {
  run: () => unknown;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}

export class GroupCommit {
  private pending: Pending[] = [];
  private readonly atomically;
  private busySince: number | undefined;
  private busyTries = 0;

  constructor(private readonly db: Database.Database) {
    this.atomically = db.transaction((fn: () => unknown) => fn());
  }

  /** Runs `write` in the next group's transaction; resolves with its result once that commits. */
  run<T>(write: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.pending.push({ run: write, resolve: resolve as (value: unknown) => void, reject });
      if (this.pending.length === 1) setImmediate(() => this.commitPending());
    });
  }

  private commitPending(): void {
    const group = this.pending;
    this.pending = [];
    if (!this.db.open) {
      for (const w of group) w.reject(new Error('the database is closed'));
      return;
    }
    const outcomes: { ok: boolean; value: unknown }[] = [];
    try {
      this.atomically.immediate(() => {
        for (const w of group) {
          try {
            // A transaction function called inside a transaction runs in a savepoint.
            outcomes.push({ ok: true, value: this.atomically(w.run) });
          } catch (error) {
            outcomes.push({ ok: false, value: error });
          }
        }
      });
    } catch (error) {
      const code = (error as { code?: string }).code;
      // Nothing of the group is committed: it may run again once the lock is free.
      if (code === 'SQLITE_BUSY' && this.waitForLock(group)) return;
      // The whole group failed to commit; a database busy beyond BUSY_WAIT_MS is a 503, not a bug.
      const failure = code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' ? new EngineUnavailableError(`database busy (${code})`) : error;
      for (const w of group) w.reject(failure);
      return;
    }
    this.busySince = undefined;
    this.busyTries = 0;
    group.forEach((w, i) => (outcomes[i].ok ? w.resolve(outcomes[i].value) : w.reject(outcomes[i].value)));
  }

  /**
   * Another process holds the write lock (the connection's busy_timeout is 0, see createEmbeddedEngine):
   * instead of sleeping in SQLite's busy handler, which stops this process's event loop for 1, 2, 5,
   * 10... ms at a time, the group waits here without blocking and tries again on the next turns (then
   * every millisecond), joined by the writes that arrive meanwhile. True while it waits; past
   * BUSY_WAIT_MS false: the group fails as the busy handler's timeout would have.
   */
  private waitForLock(group: Pending[]): boolean {
    this.busySince ??= performance.now();
    if (performance.now() - this.busySince >= BUSY_WAIT_MS) return false;
    this.pending = group.concat(this.pending);
    this.busyTries++;
    if (this.busyTries <= BUSY_SPIN_TRIES) setImmediate(() => this.commitPending());
    else setTimeout(() => this.commitPending(), 1);
    return true;
  }

  /** Resolves once every write queued so far is committed (for a clean shutdown). */
  async drain(): Promise<void> {
    // A group waiting for the lock stays pending until it commits or gives up.
    while (this.pending.length) await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
