/**
 * Snapshot files of the vector indexes, one directory of them beside vectors.db. A snapshot is two
 * files of one stem `<index name>.<index id>.<sequence>`: `.view` (the entries as the view held them
 * at that sequence: ids, vectors, filterable metadata) and `.hnsw` (the graph over exactly those). The
 * id keeps a deleted and recreated index from loading the old one's files; the sequence says which is
 * newest and where the change log is replayed from. Each file is written to a temporary name, synced,
 * then renamed, the `.hnsw` last: a snapshot counts only once both are there, so a process killed
 * mid-write leaves only temporary files. A snapshot that still fails to load is deleted and the index
 * read from SQLite instead (the snapshot is derived, never the only copy).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface Snapshot {
  /** The graph file. */
  graph: string;
  /** The entries file. */
  view: string;
  seq: number;
}

const TEMP_PREFIX = '.tmp-';
/** A temporary file this old belongs to a writer that died. */
const STALE_TEMP_MS = 10 * 60_000;

function syncFile(file: string) {
  const fd = openSync(file, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export class SnapshotFiles {
  constructor(private readonly dir: string) {}

  /** The newest whole snapshot of the index, if any. */
  newest(name: string, indexId: number): Snapshot | undefined {
    let best: Snapshot | undefined;
    for (const s of this.list(name, indexId)) if (!best || s.seq > best.seq) best = s;
    return best;
  }

  /**
   * Writes a snapshot through `write(graphFile, viewFile)` (temporary names), then makes it the newest
   * by renaming, and removes the older ones. The snapshot, or undefined when `write` declined.
   */
  async write(name: string, indexId: number, seq: number, write: (graphFile: string, viewFile: string) => Promise<boolean>): Promise<Snapshot | undefined> {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const temp = join(this.dir, `${TEMP_PREFIX}${process.pid}-${Date.now()}-${name}.${indexId}`);
    const temps = { graph: `${temp}.hnsw`, view: `${temp}.view` };
    try {
      if (!(await write(temps.graph, temps.view))) return undefined;
      const stem = join(this.dir, `${name}.${indexId}.${seq}`);
      const snapshot = { graph: `${stem}.hnsw`, view: `${stem}.view`, seq };
      syncFile(temps.view);
      syncFile(temps.graph);
      renameSync(temps.view, snapshot.view);
      renameSync(temps.graph, snapshot.graph);
      for (const s of this.list(name, indexId)) if (s.seq < seq) this.removeOne(s);
      return snapshot;
    } finally {
      rmSync(temps.graph, { force: true });
      rmSync(temps.view, { force: true });
    }
  }

  /** Removes every snapshot of the index (deleted), or the one given (it failed to load). */
  remove(name: string, indexId: number, only?: Snapshot): void {
    if (only) return this.removeOne(only);
    const prefix = `${name}.${indexId}.`;
    for (const entry of this.entries()) if (entry.startsWith(prefix)) rmSync(join(this.dir, entry), { force: true });
  }

  /** Removes temporary files left by writers that died mid-write. */
  sweepTemporaries(): void {
    for (const entry of this.entries()) {
      if (!entry.startsWith(TEMP_PREFIX)) continue;
      const file = join(this.dir, entry);
      try {
        if (Date.now() - statSync(file).mtimeMs > STALE_TEMP_MS) rmSync(file, { force: true });
      } catch {
        // Renamed or removed meanwhile by its writer.
      }
    }
  }

  private removeOne(s: Snapshot) {
    // The graph first: without it the snapshot no longer counts, whatever happens next.
    rmSync(s.graph, { force: true });
    rmSync(s.view, { force: true });
  }

  private list(name: string, indexId: number): Snapshot[] {
    const prefix = `${name}.${indexId}.`;
    const entries = this.entries();
    const names = new Set(entries);
    const out: Snapshot[] = [];
    for (const entry of entries) {
      if (!entry.startsWith(prefix) || !entry.endsWith('.hnsw')) continue;
      const stem = entry.slice(0, -'.hnsw'.length);
      const seq = Number(stem.slice(prefix.length));
      if (Number.isSafeInteger(seq) && names.has(`${stem}.view`)) out.push({ graph: join(this.dir, entry), view: join(this.dir, `${stem}.view`), seq });
    }
    return out;
  }

  private entries(): string[] {
    try {
      return readdirSync(this.dir);
    } catch {
      return [];
    }
  }
}
