/**
 * The scheduled sweeps of AI uploads and of knowledge collections (lambdas/consumers/uploads-sweep.ts,
 * collections-sweep.ts) over the embedded engine: due entries that keep failing stay due, and a full
 * batch of them must not hold up the entries behind them: a run continues after the last entry each
 * batch read, and ends once nothing more is due.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { sweepUploads, UPLOADS_SWEEP } from '../../lambdas/consumers/uploads-sweep.js';
import { COLLECTIONS_SWEEP, sweepCollections } from '../../lambdas/consumers/collections-sweep.js';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { sweepKey, SWEEP_PARTITION } from '../../lambdas/knowledge/upload-keys.js';
import { collectionSweepKey, COLLECTION_SWEEP_PARTITION } from '../../lambdas/knowledge/collection-keys.js';

const clock = new ManualClock(Date.UTC(2026, 10, 27, 12));
let dataDir: string;
let engine: EmbeddedEngine;

beforeAll(() => {
  dataDir = mkdtempSync(join(tmpdir(), 'sweeps-'));
  engine = createEmbeddedEngine({ dataDir, clock });
});

afterAll(async () => {
  await engine?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

it('uploads: sweeps the entries behind a full batch of failing ones in the same run', async () => {
  const now = Math.floor(clock.now() / 1000);
  const failing = UPLOADS_SWEEP.batch;
  // The oldest: their abort fails every time (not "no such upload"), so they stay due.
  const abort = engine.blobs.abortMultipart.bind(engine.blobs);
  engine.blobs.abortMultipart = async (key, uploadId) => {
    if (uploadId.startsWith('failing-')) throw new Error('blob store unavailable');
    return abort(key, uploadId);
  };
  for (let i = 0; i < failing; i++) await engine.kv.put({ ...sweepKey(now - 100, `parts#org_1#bad-${String(i).padStart(3, '0')}#g${i}`), blob_key: 'ai-uploads/x', engine_upload_id: `failing-${i}` });
  // Due later: their multipart uploads are long gone (the sweep takes that as done).
  for (let i = 0; i < 20; i++) await engine.kv.put({ ...sweepKey(now - 10, `parts#org_1#good-${i}#g${i}`), blob_key: 'ai-uploads/y', engine_upload_id: `gone-${i}` });

  const started = Date.now();
  expect(await sweepUploads(engine, 20_000)).toBe(failing + 20);
  // Ended because nothing more was due, not because its budget ran out.
  expect(Date.now() - started).toBeLessThan(10_000);
  const left = (await engine.kv.query({ pk: SWEEP_PARTITION })).items.map((i) => String(i.sk));
  expect(left).toHaveLength(failing);
  expect(left.every((sk) => sk.includes('#bad-'))).toBe(true);
}, 30_000);

it('collections: sweeps the entries behind a full batch of failing ones in the same run', async () => {
  const now = Math.floor(clock.now() / 1000);
  const failing = COLLECTIONS_SWEEP.batch;
  // The oldest: local_vectors collections whose index removal fails every time, so they stay due.
  const deleteIndex = engine.vectors.deleteIndex.bind(engine.vectors);
  engine.vectors.deleteIndex = async (index) => {
    if (index.startsWith('kcv-bad')) throw new Error('vector store unavailable');
    return deleteIndex(index);
  };
  for (let i = 0; i < failing; i++) {
    await engine.kv.put({ ...collectionSweepKey(now - 100, 'org_1', 'ws_1', `col_bad${String(i).padStart(3, '0')}`), mode: 'local_vectors', vector_database_id: null, index: `kcv-bad${i}` });
  }
  for (let i = 0; i < 20; i++) await engine.kv.put({ ...collectionSweepKey(now - 10, 'org_1', 'ws_1', `col_good${i}`), mode: 'download', vector_database_id: null, index: null });

  const started = Date.now();
  expect(await sweepCollections(engine, 20_000)).toBe(failing + 20);
  // Ended because nothing more was due, not because its budget ran out.
  expect(Date.now() - started).toBeLessThan(10_000);
  const left = (await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items.map((i) => String(i.sk));
  expect(left).toHaveLength(failing);
  expect(left.every((sk) => sk.includes('#col_bad'))).toBe(true);
}, 30_000);
