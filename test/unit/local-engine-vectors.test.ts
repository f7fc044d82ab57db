/**
 * Which vector index `ENGINE=aws npm start` serves over (lambdas/local/engine.ts): S3 Vectors when
 * VECTOR_BUCKET_NAME names a vector bucket, otherwise the embedded engine's (S3 Vectors has no
 * emulator). Every S3VectorsClient is mocked here (test/helpers/s3vectors-mock.ts), so a call that
 * reaches S3 Vectors shows in the mock's calls; DynamoDB and S3 are never called.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { S3VectorsClient } from '@aws-sdk/client-s3vectors';
import { loadSettings } from '../../lambdas/shared/settings.js';
import { openLocalEngine } from '../../lambdas/local/engine.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { mockS3Vectors, type S3VectorsMock } from '../helpers/s3vectors-mock.js';

let mock: S3VectorsMock;
let engine: Engine | undefined;
const dir = mkdtempSync(join(tmpdir(), 'local-engine-vectors-'));
const AWS_ENV = { ENGINE: 'aws', TABLE_NAME: 'platform', BUCKET_NAME: 'blobs', DATA_DIR: dir, AWS_REGION: 'us-east-1', AWS_ACCESS_KEY_ID: 'x', AWS_SECRET_ACCESS_KEY: 'y' };

beforeAll(() => {
  mock = mockS3Vectors(S3VectorsClient, { buckets: ['local-vectors'] });
});
afterEach(async () => {
  await engine?.close();
  engine = undefined;
  mock.reset();
});
afterAll(() => {
  mock.restore();
  rmSync(dir, { recursive: true, force: true });
});

const roundTrip = async (e: Engine) => {
  await e.vectors.createIndex('local-one', 2);
  await e.vectors.put('local-one', [{ key: 'k', vector: Float32Array.from([1, 0]), filterable: {}, payload: 'p' }]);
  return e.vectors.query('local-one', { vector: Float32Array.from([1, 0]), topK: 1 });
};

describe('ENGINE=aws npm start', () => {
  it('serves vectors from S3 Vectors when VECTOR_BUCKET_NAME is set', async () => {
    engine = await openLocalEngine('auto', loadSettings({ ...AWS_ENV, VECTOR_BUCKET_NAME: 'local-vectors' }));
    expect(await roundTrip(engine)).toEqual([{ key: 'k', score: expect.closeTo(1, 6), payload: 'p' }]);
    expect(mock.calls().map((c) => c.command)).toEqual(['CreateIndex', 'PutVectors', 'QueryVectors']);
    expect(mock.calls()[0].input.vectorBucketName).toBe('local-vectors');
  });

  it("keeps the embedded engine's vectors without it", async () => {
    engine = await openLocalEngine('auto', loadSettings(AWS_ENV));
    expect(await roundTrip(engine)).toEqual([{ key: 'k', score: expect.closeTo(1, 6), payload: 'p' }]);
    expect(mock.calls()).toEqual([]);
  });
});
