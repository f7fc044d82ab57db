import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ListObjectsV2Command } from '@aws-sdk/client-s3';
import { S3BlobStore } from '../../lambdas/engine/aws/blobs.js';
import { startS3rver, type S3rverBucket } from '../helpers/s3rver.js';
import { blobContract } from './blob-contract.js';

let s3: S3rverBucket;
beforeAll(async () => {
  s3 = await startS3rver();
});
afterAll(async () => s3?.close());

blobContract(
  'aws (S3 adapter on s3rver)',
  async () => ({
    blobs: new S3BlobStore(s3.client, s3.bucket),
    cleanup: async () => {},
  }),
  // s3rver answers AbortMultipartUpload with 405 MethodNotAllowed, and completes a multipart upload
  // whatever the listed etags: abort and InvalidPart are covered in blob.aws-mock.test.ts.
  { abortMultipart: false, partEtags: false, listParts: false },
);

describe('S3 adapter on s3rver', () => {
  // Runs after the contract above (tests in a file run in order): every staging object is gone.
  // Zero-byte ones are s3rver's doing: when a PutObject is aborted (a body shorter than its
  // expected size, or a failing body), s3rver still opens the object's file, asynchronously, after
  // the connection is gone and possibly after the adapter deleted the staging key. Real S3 keeps
  // nothing of an aborted PutObject.
  it('leaves no staging objects behind', async () => {
    const listed = await s3.client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: '.staging/' }));
    expect((listed.Contents ?? []).filter((o) => (o.Size ?? 0) > 0)).toEqual([]);
  });
});
