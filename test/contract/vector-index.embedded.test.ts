/**
 * What the embedded vector index promises beyond the port's contract: several processes over one
 * data directory, nothing acknowledged lost on SIGKILL, snapshots for a fast start (and a torn one
 * ignored), the graph built off the request path while new entries are still found, and a full
 * top-k however the graph walk ends.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteVectorIndex } from '../../lambdas/engine/embedded/vectors.js';
import type { VectorEntry } from '../../lambdas/engine/ports.js';
import { seededRandom } from './vector-index-contract.js';

const ROOT = join(import.meta.dirname, '..', '..');
const dirs: string[] = [];
const opened: SqliteVectorIndex[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((v) => v.close()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function dataDir() {
  const dir = mkdtempSync(join(tmpdir(), 'vectors-'));
  dirs.push(dir);
  return dir;
}
function open(dir: string, options?: ConstructorParameters<typeof SqliteVectorIndex>[1]) {
  const v = new SqliteVectorIndex(dir, options);
  opened.push(v);
  return v;
}

function vectorsOf(seed: number, n: number, dims: number): Float32Array[] {
  const r = seededRandom(seed);
  return Array.from({ length: n }, () => Float32Array.from({ length: dims }, () => r() * 2 - 1));
}
const entries = (vectors: Float32Array[], from = 0, filterable = (_i: number) => ({})): VectorEntry[] =>
  vectors.map((vector, i) => ({ key: `k${from + i}`, vector, filterable: filterable(from + i), payload: `p${from + i}` }));
async function putAll(v: SqliteVectorIndex, index: string, all: VectorEntry[]) {
  for (let i = 0; i < all.length; i += 500) await v.put(index, all.slice(i, i + 500));
}
function exactKeys(all: VectorEntry[], query: Float32Array, k: number, keep: (e: VectorEntry) => boolean = () => true) {
  const norm = (v: Float32Array) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  const score = (v: Float32Array) => v.reduce((s, x, i) => s + x * query[i], 0) / norm(v);
  return all.filter(keep).map((e) => ({ key: e.key, s: score(e.vector) })).sort((a, b) => b.s - a.s).slice(0, k).map((h) => h.key);
}
const keys = (hits: { key: string }[]) => hits.map((h) => h.key);

describe('embedded vector index: several processes over one directory', () => {
  it('a write through one instance is seen by the next query of another: put, replace, delete, deleteIndex', async () => {
    const dir = dataDir();
    const a = open(dir);
    const b = open(dir);
    const [v1, v2, q] = vectorsOf(1, 3, 8);
    await a.createIndex('shared', 8);
    expect(await b.query('shared', { vector: q, topK: 5 })).toEqual([]); // b's view is open from here on
    await a.put('shared', [{ key: 'x', vector: v1, filterable: { tag: 'old' }, payload: 'one' }]);
    expect(await b.query('shared', { vector: v1, topK: 5 })).toMatchObject([{ key: 'x', payload: 'one' }]);
    await a.put('shared', [{ key: 'x', vector: v2, filterable: { tag: 'new' }, payload: 'two' }]);
    expect(await b.query('shared', { vector: v2, topK: 5, filter: { tag: 'new' } })).toMatchObject([{ key: 'x', payload: 'two' }]);
    expect(await b.query('shared', { vector: v2, topK: 5, filter: { tag: 'old' } })).toEqual([]);
    await a.delete('shared', ['x']);
    expect(await b.query('shared', { vector: v2, topK: 5 })).toEqual([]);
    await a.deleteIndex('shared');
    await expect(b.query('shared', { vector: q, topK: 5 })).rejects.toThrow(/no vector index/);
    await a.createIndex('shared', 4);
    await a.put('shared', [{ key: 'y', vector: new Float32Array([1, 0, 0, 0]), filterable: {}, payload: '' }]);
    expect(keys(await b.query('shared', { vector: new Float32Array([1, 1, 0, 0]), topK: 5 }))).toEqual(['y']);
  });

  it('loses nothing acknowledged when the writing process is killed (SIGKILL), and another process finds it meanwhile', async () => {
    const dir = dataDir();
    const reader = open(dir);
    await reader.createIndex('killed', 16);
    const script = `
      const { SqliteVectorIndex } = await import(${JSON.stringify(join(ROOT, 'lambdas/engine/embedded/vectors.ts'))});
      const v = new SqliteVectorIndex(${JSON.stringify(dir)});
      let seed = 7;
      const r = () => { seed = (seed * 16807) % 2147483647; return seed / 2147483647 - 0.5; };
      for (let batch = 0; ; batch++) {
        const entries = Array.from({ length: 50 }, (_, i) => ({ key: 'b' + batch + '-' + i, vector: Float32Array.from({ length: 16 }, r), filterable: { batch }, payload: 'x' }));
        await v.put('killed', entries);
        process.stdout.write('acked ' + batch + '\\n');
      }`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let acked = -1;
    let asked = false;
    let errors = '';
    child.stderr.on('data', (d) => (errors += d));
    const seenWhileWriting = new Promise<boolean>((resolve, reject) => {
      child.on('exit', () => reject(new Error(`the writer exited: ${errors}`)));
      child.stdout.on('data', (d: Buffer) => {
        for (const m of d.toString().matchAll(/acked (\d+)/g)) acked = Math.max(acked, Number(m[1]));
        if (acked >= 3 && !asked) {
          asked = true;
          // While the writer runs: batch 3 is found by this process's next query.
          void reader.query('killed', { vector: Float32Array.from({ length: 16 }, () => 1), topK: 100, filter: { batch: 3 } }).then((hits) => resolve(hits.length === 50), reject);
        }
      });
    });
    expect(await seenWhileWriting).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const exited = new Promise((resolve) => child.on('exit', resolve));
    child.kill('SIGKILL');
    await exited;
    expect(errors).toBe('');
    expect(acked).toBeGreaterThan(3);
    const after = open(dir);
    for (let batch = 0; batch <= acked; batch++) {
      const hits = await after.query('killed', { vector: Float32Array.from({ length: 16 }, () => 1), topK: 100, filter: { batch } });
      expect(hits.length, `batch ${batch}`).toBe(50);
    }
  }, 60_000);
});

describe('embedded vector index: the graph', () => {
  it('finds new entries at once while the graph catches up in slices, without long stalls of the event loop', async () => {
    const dir = dataDir();
    const v = open(dir);
    await v.createIndex('ingest', 384);
    const all = entries(vectorsOf(2, 2500, 384));
    await putAll(v, 'ingest', all.slice(0, 2000));
    await v.caughtUp('ingest');
    // The most CPU time spent between two ticks of a 1 ms timer: how long the event loop was held at
    // once (CPU time, not wall time, so a busy machine that takes the CPU away does not count).
    const cpuMs = () => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    };
    let last = cpuMs();
    let longest = 0;
    const probe = setInterval(() => {
      const now = cpuMs();
      longest = Math.max(longest, now - last);
      last = now;
    }, 1);
    try {
      const started = performance.now();
      await v.put('ingest', all.slice(2000));
      const putMs = performance.now() - started;
      // Not yet in the graph, already found: the tail is scanned exactly.
      expect((await v.stats('ingest')).pending).toBeGreaterThan(0);
      for (const i of [2000, 2250, 2499]) expect(keys(await v.query('ingest', { vector: all[i].vector, topK: 1 }))).toEqual([`k${i}`]);
      await v.caughtUp('ingest');
      await new Promise((resolve) => setTimeout(resolve, 5));
      expect(await v.stats('ingest')).toMatchObject({ entries: 2500, inGraph: 2500, pending: 0 });
      // 500 graph inserts at once hold the loop 120-340 ms here; in slices, no turn is long.
      expect(putMs).toBeLessThan(1000);
      expect(longest).toBeLessThan(75);
    } finally {
      clearInterval(probe);
    }
  }, 60_000);

  it('a rare filter on the graph path (its callback) still returns the exact top-k', async () => {
    const dir = dataDir();
    const v = open(dir, { scanMax: 0 });
    await v.createIndex('rare', 8);
    const rare = new Set([11, 1234, 2500, 3333, 4100, 5555, 6001, 7007, 8080, 9000, 9998, 4242]);
    const all = entries(vectorsOf(3, 10_000, 8), 0, (i) => ({ kind: rare.has(i) ? 'rare' : 'common' }));
    await putAll(v, 'rare', all);
    await v.caughtUp('rare');
    for (const query of vectorsOf(4, 5, 8)) {
      const hits = await v.query('rare', { vector: query, topK: 10, filter: { kind: 'rare' } });
      expect(keys(hits)).toEqual(exactKeys(all, query, 10, (e) => e.filterable.kind === 'rare'));
    }
  }, 60_000);
});

describe('embedded vector index: churn', () => {
  it('reuses the graph places of removed entries and grows it when none is left, answering exactly throughout', async () => {
    const v = open(dataDir(), { scanMax: 0 });
    await v.createIndex('churn', 8);
    const first = entries(vectorsOf(20, 1500, 8));
    await putAll(v, 'churn', first);
    await v.caughtUp('churn');
    await v.delete('churn', first.slice(0, 500).map((e) => e.key));
    await v.delete('churn', first.slice(500, 1000).map((e) => e.key));
    const second = entries(vectorsOf(21, 2500, 8), 1500);
    await putAll(v, 'churn', second);
    await v.caughtUp('churn');
    expect(await v.stats('churn')).toMatchObject({ entries: 3000, inGraph: 3000, pending: 0 });
    const live = [...first.slice(1000), ...second];
    for (const query of vectorsOf(22, 5, 8)) expect(keys(await v.query('churn', { vector: query, topK: 10 }))).toEqual(exactKeys(live, query, 10));
  }, 60_000);
});

describe('embedded vector index: snapshots and restarts', () => {
  const snapshotFiles = (dir: string) => (existsSync(join(dir, 'vector-snapshots')) ? readdirSync(join(dir, 'vector-snapshots')) : []);

  it('starts from the newest snapshot plus the changes after it', async () => {
    const dir = dataDir();
    const first = open(dir);
    await first.createIndex('restart', 16);
    const all = entries(vectorsOf(5, 3000, 16));
    await putAll(first, 'restart', all);
    await first.caughtUp('restart');
    const file = await first.snapshot('restart');
    expect(file).toBeDefined();
    expect(snapshotFiles(dir)).toHaveLength(2); // entries and graph
    // After the snapshot: one entry replaced, one deleted, one added.
    const added = entries(vectorsOf(6, 1, 16), 3000);
    await first.put('restart', [{ ...all[10], vector: all[20].vector.map((x) => -x), payload: 'replaced' }, ...added]);
    await first.delete('restart', ['k11']);
    await first.close();

    const second = open(dir);
    const stats = await second.stats('restart');
    expect(stats.entries).toBe(3000);
    expect(stats.inGraph).toBeGreaterThanOrEqual(2998); // from the file, not rebuilt
    expect(stats.pending).toBeLessThanOrEqual(2);
    const final = [...all.filter((e) => e.key !== 'k11' && e.key !== 'k10'), { ...all[10], vector: all[20].vector.map((x) => -x) }, ...added];
    for (const query of [...vectorsOf(7, 3, 16), all[11].vector, all[10].vector]) {
      expect(keys(await second.query('restart', { vector: query, topK: 10 }))).toEqual(exactKeys(final, query, 10));
    }
    expect(await second.query('restart', { vector: all[20].vector.map((x) => -x), topK: 1 })).toMatchObject([{ key: 'k10', payload: 'replaced' }]);
  }, 60_000);

  it('ignores a torn snapshot: answers from SQLite and rebuilds', async () => {
    const dir = dataDir();
    const first = open(dir);
    await first.createIndex('torn', 8);
    const all = entries(vectorsOf(8, 600, 8));
    await putAll(first, 'torn', all);
    await first.caughtUp('torn');
    const file = (await first.snapshot('torn'))!;
    await first.close();
    // A newer snapshot cut short, as a crash of the machine between write and sync might leave.
    const torn = file.replace(/\.(\d+)\.hnsw$/, (_m, seq) => `.${Number(seq) + 1}`);
    writeFileSync(`${torn}.hnsw`, Buffer.alloc(100, 7));
    writeFileSync(`${torn}.view`, Buffer.alloc(100, 7));
    const second = open(dir);
    const query = vectorsOf(9, 1, 8)[0];
    expect(keys(await second.query('torn', { vector: query, topK: 10 }))).toEqual(exactKeys(all, query, 10));
    const stem = file.split('/').at(-1)!.replace(/\.hnsw$/, '');
    expect(snapshotFiles(dir).sort()).toEqual([`${stem}.hnsw`, `${stem}.view`]);

    // A whole graph beside a view file cut short: also ignored.
    await second.close();
    writeFileSync(`${file.replace(/\.hnsw$/, '')}.view`, Buffer.alloc(100, 7));
    const third = open(dir);
    expect(keys(await third.query('torn', { vector: query, topK: 10 }))).toEqual(exactKeys(all, query, 10));
    expect(snapshotFiles(dir)).toEqual([]);
  });

  it('with no snapshot, the first query answers by exact scan while the graph builds', async () => {
    const dir = dataDir();
    const first = open(dir);
    await first.createIndex('cold', 8);
    const all = entries(vectorsOf(10, 2000, 8));
    await putAll(first, 'cold', all);
    await first.close();
    const second = open(dir, { scanMax: 0 });
    const query = vectorsOf(11, 1, 8)[0];
    expect(keys(await second.query('cold', { vector: query, topK: 10 }))).toEqual(exactKeys(all, query, 10));
    expect((await second.stats('cold')).pending).toBeGreaterThan(0);
    await second.caughtUp('cold');
    expect(await second.stats('cold')).toMatchObject({ inGraph: 2000, pending: 0 });
  });

  it('writes a snapshot once ingest goes quiet, one process at a time, and prunes the change log; a view behind it reloads', async () => {
    const dir = dataDir();
    const writer = open(dir, { quietMs: 50, snapshotAfter: 100 });
    const behind = open(dir, { quietMs: 60_000 });
    await writer.createIndex('quiet', 8);
    const all = entries(vectorsOf(12, 400, 8));
    await writer.put('quiet', all.slice(0, 200));
    const query = vectorsOf(13, 1, 8)[0];
    await behind.query('quiet', { vector: query, topK: 5 }); // its view stops at the first 200
    await writer.put('quiet', all.slice(200));
    await writer.query('quiet', { vector: query, topK: 5 });
    await writer.caughtUp('quiet');
    for (let i = 0; i < 250 && snapshotFiles(dir).filter((f) => f.endsWith('.hnsw')).length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(snapshotFiles(dir).filter((f) => f.endsWith('.hnsw'))).toHaveLength(1);
    expect(snapshotFiles(dir).filter((f) => f.endsWith('.view'))).toHaveLength(1);
    // The log behind the snapshot is gone: the view that stopped before it opens afresh, and is right.
    expect(keys(await behind.query('quiet', { vector: query, topK: 10 }))).toEqual(exactKeys(all, query, 10));
    expect((await behind.stats('quiet')).entries).toBe(400);

    // One writer at a time: while another process holds the lease, no snapshot; once it lapses, one.
    await behind.caughtUp('quiet');
    const db = new Database(join(dir, 'vectors.db'));
    try {
      db.prepare('UPDATE vector_indexes SET snapshot_lease_until = ? WHERE name = ?').run(Date.now() + 60_000, 'quiet');
      expect(await behind.snapshot('quiet')).toBeUndefined();
      db.prepare('UPDATE vector_indexes SET snapshot_lease_until = ? WHERE name = ?').run(Date.now() - 1, 'quiet');
      expect(await behind.snapshot('quiet')).toBeDefined();
      // Released after writing: the next writer need not wait for it to lapse.
      expect(db.prepare('SELECT snapshot_lease_until FROM vector_indexes WHERE name = ?').pluck().get('quiet')).toBe(0);
    } finally {
      db.close();
    }
  });

  it('deleteIndex removes its snapshots; the rest of its state goes with its rows', async () => {
    const dir = dataDir();
    const v = open(dir);
    await v.createIndex('gone', 8);
    await v.put('gone', entries(vectorsOf(15, 50, 8)));
    await v.caughtUp('gone');
    expect(await v.snapshot('gone')).toBeDefined();
    await v.deleteIndex('gone');
    expect(snapshotFiles(dir).filter((f) => !f.startsWith('.'))).toEqual([]);
    await expect(v.query('gone', { vector: new Float32Array(8).fill(1), topK: 1 })).rejects.toThrow();
  });
});

describe('embedded vector index: checks', () => {
  it('refuses a vector of other dimensions, a zero or non-finite vector, a bad key, a bad topK and a bad index name', async () => {
    const v = open(dataDir());
    await v.createIndex('checks', 4);
    const put = (vector: Float32Array, key = 'k') => v.put('checks', [{ key, vector, filterable: {}, payload: '' }]);
    await expect(put(new Float32Array(3).fill(1))).rejects.toThrow(/dimensions/);
    await expect(put(new Float32Array(4))).rejects.toThrow(/zero vector/);
    await expect(put(Float32Array.from([1, NaN, 0, 0]))).rejects.toThrow(/finite/);
    await expect(put(new Float32Array(4).fill(1), '')).rejects.toThrow(/key/);
    await expect(put(new Float32Array(4).fill(1), 'é'.repeat(513))).rejects.toThrow(/key/);
    await expect(v.query('checks', { vector: new Float32Array(4).fill(1), topK: 0 })).rejects.toThrow(/topK/);
    await expect(v.query('checks', { vector: new Float32Array(4).fill(1), topK: 101 })).rejects.toThrow(/topK/);
    await expect(v.query('nothing-here', { vector: new Float32Array(4).fill(1), topK: 1 })).rejects.toThrow(/no vector index/);
    for (const name of ['ab', 'Upper', 'under_score', '-lead', 'x'.repeat(64), '../up']) await expect(v.createIndex(name, 4)).rejects.toThrow(/name/);
  });

  it('holds entries and filters to the port\'s limits, as S3 Vectors does', async () => {
    const v = open(dataDir());
    await v.createIndex('limits', 4);
    const vector = new Float32Array(4).fill(1);
    const put = (filterable: Record<string, unknown>, payload = '') => v.put('limits', [{ key: 'k', vector, filterable: filterable as never, payload }]);
    await put(Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`k${i}`, 'x'])), 'é'.repeat(16 * 1024 - 1));
    await expect(put(Object.fromEntries(Array.from({ length: 41 }, (_, i) => [`k${i}`, 'x'])))).rejects.toThrow(/filterable metadata keys/);
    await expect(put({ big: 'x'.repeat(2048) })).rejects.toThrow(/over the limit of 2048/);
    await expect(put({}, 'é'.repeat(16 * 1024))).rejects.toThrow(/payload/);
    // Escapes count, as S3 Vectors counts them: 6,000 control characters are 36 KB as JSON.
    await expect(put({}, '\u0001'.repeat(6000))).rejects.toThrow(/payload is 36002 bytes as a JSON string/);
    await expect(put({ n: Number.NaN })).rejects.toThrow(/finite/);
    await expect(put({ nested: { a: 1 } })).rejects.toThrow(/not a string/);
    await expect(put({ list: ['a', 1] })).rejects.toThrow(/not a string/);
    const query = (filter: unknown) => v.query('limits', { vector, topK: 1, filter: filter as never });
    expect(await query({ k0: { $in: Array.from({ length: 20 }, (_, i) => `v${i}`) } })).toEqual([]);
    await expect(query({ k0: { $in: Array.from({ length: 21 }, (_, i) => `v${i}`) } })).rejects.toThrow(/\$in/);
    await expect(query({ k0: { $in: [] } })).rejects.toThrow(/\$in/);
  });
});
