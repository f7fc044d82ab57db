import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { FileBlobStore } from '../../lambdas/engine/embedded/blobs.js';
import { EngineError, UploadNotFoundError } from '../../lambdas/engine/errors.js';
import { blobContract } from './blob-contract.js';

blobContract(
  'embedded (files on disk)',
  async () => {
    const dir = mkdtempSync(join(tmpdir(), 'blobs-'));
    return {
      blobs: new FileBlobStore(dir),
      cleanup: async () => rmSync(dir, { recursive: true, force: true }),
    };
  },
  { abortMultipart: true, partEtags: true, listParts: true },
);

describe('FileBlobStore specifics', () => {
  const withStore = async (fn: (blobs: FileBlobStore, dir: string) => Promise<void>) => {
    const dir = mkdtempSync(join(tmpdir(), 'blobs-'));
    try {
      await fn(new FileBlobStore(dir), dir);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };

  it('refuses keys with "." or ".." segments and empty keys', () =>
    withStore(async (blobs) => {
      for (const key of ['../x', 'a/../../x', 'a/./b', '..', '']) {
        await expect(blobs.put(key, new Uint8Array([1]))).rejects.toBeInstanceOf(EngineError);
        await expect(blobs.head(key)).rejects.toBeInstanceOf(EngineError);
      }
    }));

  it('leaves no temp files behind, after success or mismatch', () =>
    withStore(async (blobs, dir) => {
      await blobs.put('a/b', new Uint8Array([1, 2, 3]));
      await expect(blobs.put('a/c', new Uint8Array([1, 2, 3]), { size: 2 })).rejects.toThrow();
      expect(readdirSync(join(dir, 'tmp'))).toEqual([]);
    }));

  it('forgets a completed upload id, as S3 does', () =>
    withStore(async (blobs) => {
      const uploadId = await blobs.createMultipart('k');
      const { etag } = await blobs.uploadPart('k', uploadId, 1, new Uint8Array([1]));
      await blobs.completeMultipart('k', uploadId, [{ partNumber: 1, etag }]);
      await expect(blobs.completeMultipart('k', uploadId, [{ partNumber: 1, etag }])).rejects.toBeInstanceOf(UploadNotFoundError);
      await expect(blobs.uploadPart('k', uploadId, 2, new Uint8Array([1]))).rejects.toBeInstanceOf(UploadNotFoundError);
    }));

  it('answers UploadNotFoundError when the key is not the upload\'s', () =>
    withStore(async (blobs) => {
      const uploadId = await blobs.createMultipart('k');
      await expect(blobs.uploadPart('other', uploadId, 1, new Uint8Array([1]))).rejects.toBeInstanceOf(UploadNotFoundError);
    }));
});
