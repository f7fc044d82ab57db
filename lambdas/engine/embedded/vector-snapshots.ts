/**
 * Snapshot files of the vector indexes' HNSW graphs, one directory of them beside vectors.db. A file is
 * `<index name>.<index id>.<sequence>.hnsw`: the id keeps a deleted and recreated index from loading
 * the old one's graph, the sequence says which is newest. Written to a temporary name, synced, then
 * renamed, so a process killed mid-write leaves only a temporary file; a file that still fails to load
 * is deleted and the index rebuilt from SQLite (the graph is derived, never the only copy).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join } from 'node:path';

export interface Snapshot {
  file: string;
  seq: number;
}

const TEMP_PREFIX = '.tmp-';
/** A temporary file this old belongs to a writer that died. */
const STALE_TEMP_MS = 10 * 60_000;

export class SnapshotFiles {
  constructor(private readonly dir: string) {}

  /** The newest snapshot of the index, if any. */
  newest(name: string, indexId: number): Snapshot | undefined {
    let best: Snapshot | undefined;
    for (const s of this.list(name, indexId)) if (!best || s.seq > best.seq) best = s;
    return best;
  }

  /**
   * Writes a snapshot through `write(tempFile)`, then makes it the newest by renaming, and removes the
   * older ones. Returns the file, or undefined when `write` declined (wrote nothing).
   */
  async write(name: string, indexId: number, seq: number, write: (file: string) => Promise<boolean>): Promise<string | undefined> {
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    const temp = join(this.dir, `${TEMP_PREFIX}${process.pid}-${Date.now()}-${name}.${indexId}`);
    try {
      if (!(await write(temp))) return undefined;
      const fd = openSync(temp, 'r');
      try {
        fsyncSync(fd);
      } finally {
        closeSync(fd);
      }
      const file = join(this.dir, `${name}.${indexId}.${seq}.hnsw`);
      renameSync(temp, file);
      for (const s of this.list(name, indexId)) if (s.seq < seq) rmSync(s.file, { force: true });
      return file;
    } finally {
      rmSync(temp, { force: true });
    }
  }

  /** Removes every snapshot of the index (deleted, or a file that failed to load). */
  remove(name: string, indexId: number, only?: string): void {
    for (const s of this.list(name, indexId)) if (!only || s.file === only) rmSync(s.file, { force: true });
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

  private list(name: string, indexId: number): Snapshot[] {
    const prefix = `${name}.${indexId}.`;
    const out: Snapshot[] = [];
    for (const entry of this.entries()) {
      if (!entry.startsWith(prefix) || !entry.endsWith('.hnsw')) continue;
      const seq = Number(entry.slice(prefix.length, -'.hnsw'.length));
      if (Number.isSafeInteger(seq)) out.push({ file: join(this.dir, entry), seq });
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
