/**
 * The embedded VectorIndex: SQLite (`vectors.db` in the data directory, WAL) is the source of truth;
 * each process keeps an in-memory view per index (vector-view.ts: vectors, postings, HNSW graph)
 * derived from it. docs/decisions/vector-index-embedded.md.
 *
 * - A write is acknowledged once committed in SQLite; every write also appends to a change log
 *   (`vector_changes`, one sequence for all indexes). SIGKILL can lose only derived state.
 * - Before each query the process applies the changes after its view's sequence, in the same read
 *   transaction as the search and the payload reads, so a put through one worker is found by the next
 *   query in any other, and a batch is seen whole.
 * - A process opens an index from its newest snapshot (the entries and the graph over them, at a
 *   sequence) and replays the changes after it; with no usable snapshot it reads the entries from
 *   SQLite and queues every one for the graph: the first query answers by exact scan while the graph
 *   builds in the background.
 * - Snapshots: a process whose graph has caught up and seen no new change for QUIET_MS writes one when
 *   SNAPSHOT_AFTER changes came since the newest, holding a lease in SQLite so one process at a time
 *   does; the change log up to it is then pruned (a view older than that reloads).
 */
import Database from 'better-sqlite3';
import hnswlib from 'hnswlib-node';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { EngineError } from '../errors.js';
import { VECTOR_BATCH_MAX, VECTOR_LIST_MAX, VECTOR_TOP_K_MAX, type VectorEntry, type VectorFilter, type VectorHit, type VectorIndex, type VectorListed, type VectorMetadata } from '../ports.js';
import { GroupCommit } from './group-commit.js';
import { startCheckpointer, WAL_SIZE_LIMIT, type Checkpointer } from './checkpointer.js';
import { IndexView } from './vector-view.js';
import { checkVectorEntry, checkVectorFilter } from '../adapter-kit/vector-checks.js';
import { SnapshotFiles } from './vector-snapshots.js';

const require = createRequire(import.meta.url);
const INDEX_NAME = /^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$/;
const MAX_DIMENSIONS = 4096;
/** A graph is worth a snapshot once this many changes came since the newest one. */
const SNAPSHOT_AFTER = 1000;
/** How long an index must see no new change before its snapshot is written. */
const QUIET_MS = 5000;
/** A snapshot writer's lease: past it another process may write one. */
const LEASE_MS = 120_000;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS vector_indexes (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL UNIQUE,
  dimensions INTEGER NOT NULL,
  pruned_seq INTEGER NOT NULL DEFAULT 0,
  snapshot_lease_until INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS vector_entries (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  index_id INTEGER NOT NULL,
  key TEXT NOT NULL,
  vector BLOB NOT NULL,
  filterable TEXT NOT NULL,
  payload TEXT NOT NULL,
  UNIQUE (index_id, key)
);
CREATE TABLE IF NOT EXISTS vector_changes (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  index_id INTEGER NOT NULL,
  entry_id INTEGER NOT NULL,
  added INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS vector_changes_by_index ON vector_changes (index_id, seq);
`;

interface IndexRow {
  id: number;
  dimensions: number;
  pruned_seq: number;
}
interface ChangeRow {
  seq: number;
  entry_id: number;
  added: number;
  vector: Buffer | null;
  filterable: string | null;
}

export interface VectorIndexOptions {
  /** Quiet time before a snapshot (tests shorten it). */
  quietMs?: number;
  /** Changes since the newest snapshot that make a new one worth writing. */
  snapshotAfter?: number;
  /** Candidates up to which a query scans exactly instead of walking the graph (vector-view.ts SCAN_MAX). */
  scanMax?: number;
  /** 'thread' (the local server): WAL checkpoints off the request path, as for platform.db (checkpointer.ts). */
  checkpoints?: 'auto' | 'thread';
}

/** The vector as stored: unit length, so inner product is cosine similarity. */
function normalized(vector: Float32Array, dimensions: number, what: string): Float32Array {
  if (vector.length !== dimensions) throw new EngineError(`${what} has ${vector.length} dimensions, the index ${dimensions}`);
  let sum = 0;
  for (let i = 0; i < vector.length; i++) {
    if (!Number.isFinite(vector[i])) throw new EngineError(`${what} has a component that is not finite`);
    sum += vector[i] * vector[i];
  }
  if (sum === 0) throw new EngineError(`${what} is the zero vector: it has no direction`);
  const scale = 1 / Math.sqrt(sum);
  return vector.map((x) => x * scale);
}

/** A view of the blob's floats (the view copies them into its own array), copied only when unaligned. */
const asVector = (blob: Buffer) =>
  blob.byteOffset % 4 === 0
    ? new Float32Array(blob.buffer, blob.byteOffset, blob.byteLength / 4)
    : new Float32Array(blob.buffer.slice(blob.byteOffset, blob.byteOffset + blob.byteLength));

export class SqliteVectorIndex implements VectorIndex {
  private opened:
    | { db: Database.Database; writer: GroupCommit; statements: ReturnType<typeof prepare>; read: <T>(fn: () => T) => T; checkpointer?: Checkpointer }
    | undefined;
  private readonly views = new Map<string, Promise<IndexView>>();
  private readonly snapshots: SnapshotFiles;
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly writing = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    private readonly dataDir: string,
    private readonly options: VectorIndexOptions = {},
  ) {
    this.snapshots = new SnapshotFiles(join(dataDir, 'vector-snapshots'));
  }

  async createIndex(index: string, dimensions: number): Promise<void> {
    if (!INDEX_NAME.test(index)) throw new EngineError(`invalid vector index name: ${JSON.stringify(index)}`);
    if (!Number.isInteger(dimensions) || dimensions < 1 || dimensions > MAX_DIMENSIONS) throw new EngineError(`invalid dimensions: ${dimensions}`);
    const { writer, statements } = this.store();
    await writer.run(() => {
      const row = statements.index.get(index) as IndexRow | undefined;
      if (row && row.dimensions !== dimensions) throw new EngineError(`vector index ${index} has ${row.dimensions} dimensions, not ${dimensions}`);
      if (!row) statements.createIndex.run(index, dimensions);
    });
  }

  async deleteIndex(index: string): Promise<void> {
    const { writer, statements } = this.store();
    const row = await writer.run(() => {
      const found = statements.index.get(index) as IndexRow | undefined;
      if (found) {
        statements.deleteEntries.run(found.id);
        statements.deleteChanges.run(found.id);
        statements.deleteIndex.run(found.id);
      }
      return found;
    });
    if (row) this.snapshots.remove(index, row.id);
    await this.forget(index);
  }

  async put(index: string, entries: VectorEntry[]): Promise<void> {
    if (entries.length > VECTOR_BATCH_MAX) throw new EngineError(`at most ${VECTOR_BATCH_MAX} entries a put, not ${entries.length}`);
    const { writer, statements } = this.store();
    const row = this.indexRow(index);
    const rows = entries.map((e, i) => {
      checkVectorEntry(e);
      const vector = normalized(e.vector, row.dimensions, `entry ${i}`);
      return { key: e.key, vector: Buffer.from(vector.buffer, vector.byteOffset, vector.byteLength), filterable: JSON.stringify(e.filterable), payload: e.payload };
    });
    await writer.run(() => {
      const current = this.indexRow(index);
      if (current.id !== row.id) throw new EngineError(`vector index ${index} was deleted`);
      for (const r of rows) {
        const old = statements.entryId.get(row.id, r.key) as number | undefined;
        if (old !== undefined) {
          statements.deleteEntry.run(old);
          statements.change.run(row.id, old, 0);
        }
        const id = Number(statements.insertEntry.run(row.id, r.key, r.vector, r.filterable, r.payload).lastInsertRowid);
        statements.change.run(row.id, id, 1);
      }
    });
    this.refreshLoaded(index);
  }

  async delete(index: string, keys: string[]): Promise<void> {
    if (keys.length > VECTOR_BATCH_MAX) throw new EngineError(`at most ${VECTOR_BATCH_MAX} keys a delete, not ${keys.length}`);
    const { writer, statements } = this.store();
    // A missing index has none of the keys (S3 Vectors' NotFound is taken the same way).
    const row = statements.index.get(index) as IndexRow | undefined;
    if (!row || keys.length === 0) return;
    await writer.run(() => {
      for (const key of keys) {
        const old = statements.entryId.get(row.id, key) as number | undefined;
        if (old === undefined) continue;
        statements.deleteEntry.run(old);
        statements.change.run(row.id, old, 0);
      }
    });
    this.refreshLoaded(index);
  }

  async query(index: string, query: { vector: Float32Array; topK: number; filter?: VectorFilter }): Promise<VectorHit[]> {
    const { topK, filter } = query;
    if (!Number.isInteger(topK) || topK < 1 || topK > VECTOR_TOP_K_MAX) throw new EngineError(`topK is 1 to ${VECTOR_TOP_K_MAX}, not ${topK}`);
    checkVectorFilter(filter);
    const { read, statements } = this.store();
    for (;;) {
      const view = await this.view(index);
      const answer = read(() => {
        const row = statements.index.get(index) as IndexRow | undefined;
        if (!row) throw new EngineError(`no vector index ${index}`);
        if (row.id !== view.indexId || !this.applyChanges(view, row)) return undefined;
        const vector = normalized(query.vector, view.dimensions, 'the query vector');
        return view.search(vector, topK, filter).flatMap(({ id, score }) => {
          const entry = statements.entry.get(id) as { key: string; payload: string } | undefined;
          return entry ? [{ key: entry.key, score, payload: entry.payload }] : [];
        });
      });
      if (answer) return answer;
      // Deleted and recreated, or the log was pruned past this view: open it afresh.
      await this.forget(index);
    }
  }

  /** In key order; the cursor is the last key listed (base64url), so a page goes on after it whatever was written meanwhile. */
  async list(index: string, page: { limit: number; cursor?: string }): Promise<{ entries: VectorListed[]; cursor?: string }> {
    const { limit } = page;
    if (!Number.isInteger(limit) || limit < 1 || limit > VECTOR_LIST_MAX) throw new EngineError(`a listing takes 1 to ${VECTOR_LIST_MAX} entries a page, not ${limit}`);
    const { statements } = this.store();
    const row = statements.index.get(index) as IndexRow | undefined;
    if (!row) return { entries: [] };
    const after = page.cursor === undefined ? '' : Buffer.from(page.cursor, 'base64url').toString('utf8');
    const rows = statements.listEntries.all(row.id, after, limit) as { key: string; filterable: string }[];
    const entries = rows.map((r) => ({ key: r.key, filterable: JSON.parse(r.filterable) as VectorMetadata }));
    return rows.length < limit ? { entries } : { entries, cursor: Buffer.from(rows[rows.length - 1].key, 'utf8').toString('base64url') };
  }

  /** Resolves once this process's graph of the index holds every entry (the benchmark counts ingest by it; tests wait on it). */
  async caughtUp(index: string): Promise<void> {
    const view = await this.view(index);
    this.store().read(() => this.applyChanges(view, this.indexRow(index)));
    view.scheduleCatchUp();
    await view.caughtUp();
  }

  /** What this process holds of the index (tests, benchmark). */
  async stats(index: string): Promise<{ entries: number; inGraph: number; pending: number; seq: number }> {
    const view = await this.view(index);
    return { entries: view.size, inGraph: view.inGraph, pending: view.pending, seq: view.seq };
  }

  /**
   * Writes a snapshot of the index now if this process's graph is whole and no other process holds
   * the lease; the quiet timer calls it. The snapshot's graph file, or undefined when nothing was written.
   */
  async snapshot(index: string): Promise<string | undefined> {
    const view = await this.view(index);
    const { writer, statements } = this.store();
    if (view.pending > 0 || view.size === 0 || this.closed) return undefined;
    const now = Date.now();
    const leaseUntil = now + LEASE_MS;
    const leased = await writer.run(() => statements.takeLease.run(leaseUntil, view.indexId, now).changes === 1);
    if (!leased) return undefined;
    const seq = view.seq;
    const work = this.snapshots.write(index, view.indexId, seq, (graphFile, viewFile) => view.writeSnapshot(graphFile, viewFile));
    this.writing.add(work);
    try {
      const written = await work;
      if (!written) return undefined;
      // Changes the snapshot covers are no longer needed by a view that starts from it.
      await writer.run(() => {
        statements.pruneChanges.run(view.indexId, seq);
        statements.setPruned.run(seq, view.indexId);
      });
      // Deleted meanwhile: the file belongs to no index.
      const row = statements.index.get(index) as IndexRow | undefined;
      if (row?.id !== view.indexId) this.snapshots.remove(index, view.indexId);
      return written.graph;
    } finally {
      this.writing.delete(work);
      if (this.opened?.db.open) await writer.run(() => statements.releaseLease.run(view.indexId, leaseUntil)).catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.allSettled([...this.writing]);
    for (const pending of this.views.values()) void pending.then((v) => v.close(), () => undefined);
    this.views.clear();
    if (this.opened) {
      await this.opened.writer.drain();
      await this.opened.checkpointer?.stop();
      if (this.opened.db.open) this.opened.db.close();
    }
  }

  /** Opened at first use, so an engine that never touches vectors never creates the file. */
  private store() {
    if (this.closed) throw new EngineError('the vector index is closed');
    if (!this.opened) {
      mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
      const file = join(this.dataDir, 'vectors.db');
      const db = new Database(file);
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.pragma('busy_timeout = 5000');
      db.exec(SCHEMA);
      // As the engine's main database: past setup a write waits for another process's lock in the
      // group commit, without blocking the event loop (group-commit.ts).
      db.pragma('busy_timeout = 0');
      let checkpointer: Checkpointer | undefined;
      if (this.options.checkpoints === 'thread') {
        db.pragma('wal_autocheckpoint = 0');
        db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT}`);
        checkpointer = startCheckpointer(file, require.resolve('better-sqlite3'));
      }
      // One read transaction: what it reads is one state of the file, whatever other processes commit.
      const inTransaction = db.transaction((fn: () => unknown) => fn());
      this.opened = { db, writer: new GroupCommit(db), statements: prepare(db), read: <T>(fn: () => T) => inTransaction(fn) as T, checkpointer };
      this.snapshots.sweepTemporaries();
    }
    return this.opened;
  }

  private indexRow(index: string): IndexRow {
    const row = this.store().statements.index.get(index) as IndexRow | undefined;
    if (!row) throw new EngineError(`no vector index ${index}`);
    return row;
  }

  private view(index: string): Promise<IndexView> {
    let view = this.views.get(index);
    if (!view) {
      view = this.load(index);
      this.views.set(index, view);
      view.catch(() => this.views.get(index) === view && this.views.delete(index));
    }
    return view;
  }

  private async forget(index: string) {
    const view = this.views.get(index);
    this.views.delete(index);
    if (view) (await view.catch(() => undefined))?.close();
  }

  /**
   * The newest snapshot (its entries and graph) plus the changes after it; with no usable snapshot, the
   * entries read from SQLite, every one queued for the graph.
   */
  private async load(index: string): Promise<IndexView> {
    const { read, statements } = this.store();
    const row = this.indexRow(index);
    let graph: InstanceType<typeof hnswlib.HierarchicalNSW> | undefined;
    let entries: Buffer | undefined;
    const snapshot = this.snapshots.newest(index, row.id);
    if (snapshot) {
      try {
        graph = new hnswlib.HierarchicalNSW('ip', row.dimensions);
        [, entries] = await Promise.all([graph.readIndex(snapshot.graph, true), readFile(snapshot.view)]);
        if (graph.getNumDimensions() !== row.dimensions) throw new Error('dimensions differ');
      } catch {
        graph = entries = undefined;
        this.snapshots.remove(index, row.id, snapshot);
      }
    }
    const view = new IndexView(row.id, row.dimensions, () => this.quietThenSnapshot(index, view), this.options.scanMax);
    let restored = false;
    read(() => {
      const now = statements.index.get(index) as IndexRow | undefined;
      if (now?.id !== row.id) throw new EngineError(`vector index ${index} was deleted`);
      // The log still reaches back to the snapshot (a newer one may have pruned it meanwhile).
      if (entries && snapshot && now.pruned_seq <= snapshot.seq) {
        try {
          view.restore(entries);
          view.seq = snapshot.seq;
          restored = true;
        } catch {
          graph = undefined;
          this.snapshots.remove(index, row.id, snapshot);
        }
      }
      if (restored) {
        this.applyChanges(view, now);
        return;
      }
      view.reserve(statements.count.get(row.id) as number);
      for (const e of statements.entries.iterate(row.id) as Iterable<{ id: number; vector: Buffer; filterable: string }>) {
        view.add(e.id, asVector(e.vector), JSON.parse(e.filterable) as VectorMetadata);
      }
      view.seq = Math.max(now.pruned_seq, (statements.lastSeq.get(row.id) as number | null) ?? 0);
    });
    // Its labels still held are in it; those gone since are marked deleted; the rest stay queued.
    if (graph) view.attachGraph(graph);
    view.scheduleCatchUp();
    return view;
  }

  /** Applies the changes after the view's sequence; false when the log no longer reaches back to it. */
  private applyChanges(view: IndexView, row: IndexRow): boolean {
    if (view.seq < row.pruned_seq) return false;
    const { statements } = this.store();
    let any = false;
    for (const c of statements.changes.iterate(row.id, view.seq) as Iterable<ChangeRow>) {
      // An added entry already gone again has its removal later in the log.
      if (c.added) {
        if (c.vector) view.add(c.entry_id, asVector(c.vector), JSON.parse(c.filterable!) as VectorMetadata);
      } else view.remove(c.entry_id);
      view.seq = c.seq;
      any = true;
    }
    if (any) view.scheduleCatchUp();
    return true;
  }

  /** After a write, this process's view (if open) takes the changes, so its graph catches up now. */
  private refreshLoaded(index: string) {
    const pending = this.views.get(index);
    if (!pending) return;
    void pending
      .then((view) => {
        if (!this.closed) this.catchUpWithLog(index, view);
      })
      .catch(() => undefined);
  }

  private catchUpWithLog(index: string, view: IndexView) {
    const { read, statements } = this.store();
    read(() => {
      const row = statements.index.get(index) as IndexRow | undefined;
      if (row?.id === view.indexId) this.applyChanges(view, row);
    });
  }

  private quietThenSnapshot(index: string, view: IndexView) {
    if (this.closed) return;
    const after = this.options.snapshotAfter ?? SNAPSHOT_AFTER;
    const newest = this.snapshots.newest(index, view.indexId)?.seq ?? 0;
    if (view.seq - newest < after) return;
    const seq = view.seq;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      if (this.closed || this.views.get(index) === undefined) return;
      // Still quiet: nothing new since the graph caught up, in this process or any other.
      this.catchUpWithLog(index, view);
      if (view.seq !== seq) return;
      void this.snapshot(index).catch(() => undefined);
    }, this.options.quietMs ?? QUIET_MS);
    timer.unref();
    this.timers.add(timer);
  }
}

function prepare(db: Database.Database) {
  return {
    index: db.prepare('SELECT id, dimensions, pruned_seq FROM vector_indexes WHERE name = ?'),
    createIndex: db.prepare('INSERT INTO vector_indexes (name, dimensions) VALUES (?, ?)'),
    deleteIndex: db.prepare('DELETE FROM vector_indexes WHERE id = ?'),
    deleteEntries: db.prepare('DELETE FROM vector_entries WHERE index_id = ?'),
    deleteChanges: db.prepare('DELETE FROM vector_changes WHERE index_id = ?'),
    entryId: db.prepare('SELECT id FROM vector_entries WHERE index_id = ? AND key = ?').pluck(),
    entry: db.prepare('SELECT key, payload FROM vector_entries WHERE id = ?'),
    entries: db.prepare('SELECT id, vector, filterable FROM vector_entries WHERE index_id = ? ORDER BY id'),
    listEntries: db.prepare('SELECT key, filterable FROM vector_entries WHERE index_id = ? AND key > ? ORDER BY key LIMIT ?'),
    insertEntry: db.prepare('INSERT INTO vector_entries (index_id, key, vector, filterable, payload) VALUES (?, ?, ?, ?, ?)'),
    deleteEntry: db.prepare('DELETE FROM vector_entries WHERE id = ?'),
    change: db.prepare('INSERT INTO vector_changes (index_id, entry_id, added) VALUES (?, ?, ?)'),
    count: db.prepare('SELECT count(*) FROM vector_entries WHERE index_id = ?').pluck(),
    lastSeq: db.prepare('SELECT max(seq) FROM vector_changes WHERE index_id = ?').pluck(),
    changes: db.prepare(
      `SELECT c.seq, c.entry_id, c.added, e.vector, e.filterable FROM vector_changes c
       LEFT JOIN vector_entries e ON c.added = 1 AND e.id = c.entry_id
       WHERE c.index_id = ? AND c.seq > ? ORDER BY c.seq`,
    ),
    pruneChanges: db.prepare('DELETE FROM vector_changes WHERE index_id = ? AND seq <= ?'),
    setPruned: db.prepare('UPDATE vector_indexes SET pruned_seq = max(pruned_seq, ?) WHERE id = ?'),
    takeLease: db.prepare('UPDATE vector_indexes SET snapshot_lease_until = ? WHERE id = ? AND snapshot_lease_until < ?'),
    // Only the lease this process took: one that lapsed meanwhile may be another process's now.
    releaseLease: db.prepare('UPDATE vector_indexes SET snapshot_lease_until = 0 WHERE id = ? AND snapshot_lease_until = ?'),
  };
}
