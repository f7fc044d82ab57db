import { expect } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { SqliteVectorIndex } from '../../lambdas/engine/embedded/vectors.js';
import type { VectorIndex } from '../../lambdas/engine/ports.js';
import { vectorIndexContract } from './vector-index-contract.js';

vectorIndexContract('embedded (SQLite + hnswlib-node)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'vectors-'));
  const engine = createEmbeddedEngine({ dataDir: dir });
  return {
    vectors: engine.vectors,
    cleanup: async () => {
      await engine.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

/**
 * The contract's indexes are small, so the default plan scans them exactly. With no exact-scan
 * threshold every query takes the graph path: once as the entries arrive (graph and tail merged
 * while the graph catches up), once with the graph whole before each query.
 */
for (const wait of [false, true]) {
  vectorIndexContract(`embedded, graph path${wait ? ', graph caught up' : ', graph catching up'}`, async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vectors-'));
    const store = new SqliteVectorIndex(dir, { scanMax: 0 });
    const vectors: VectorIndex = wait
      ? {
          createIndex: (i, d) => store.createIndex(i, d),
          deleteIndex: (i) => store.deleteIndex(i),
          put: (i, e) => store.put(i, e),
          delete: (i, k) => store.delete(i, k),
          list: (i, p) => store.list(i, p),
          query: async (i, q) => {
            await store.caughtUp(i);
            expect((await store.stats(i)).pending).toBe(0);
            return store.query(i, q);
          },
        }
      : store;
    return {
      vectors,
      cleanup: async () => {
        await store.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  });
}
