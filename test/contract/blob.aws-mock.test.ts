/**
 * What s3rver cannot show about the S3 blob adapter: AbortMultipartUpload (s3rver answers 405),
 * NoSuchUpload (s3rver accepts parts for any upload id), and the translation of throttling,
 * server and network errors. The S3 client is mocked.
 */
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListPartsCommand,
  NoSuchKey,
  NoSuchUpload,
  NotFound,
  DeleteObjectCommand,
  PutObjectCommand,
  S3Client,
  S3ServiceException,
  UploadPartCommand,
} from '@aws-sdk/client-s3';
import { S3BlobStore } from '../../lambdas/engine/aws/blobs.js';
import { EngineLimitError, EngineUnavailableError, InvalidPartError, UploadNotFoundError } from '../../lambdas/engine/errors.js';

const bucket = 'mock-bucket';
const s3 = mockClient(S3Client);
let blobs: S3BlobStore;

beforeEach(() => {
  s3.reset();
  blobs = new S3BlobStore(new S3Client({ region: 'us-east-1' }), bucket);
  s3.on(CreateMultipartUploadCommand).resolves({ UploadId: 'the-s3-upload' });
});
afterEach(() => s3.reset());

const serviceError = (name: string, status: number, extra: Record<string, unknown> = {}) =>
  Object.assign(
    new S3ServiceException({ name, $fault: status >= 500 ? 'server' : 'client', $metadata: { httpStatusCode: status }, message: name }),
    extra,
  );
const noSuchUpload = () => new NoSuchUpload({ message: 'The specified upload does not exist.', $metadata: { httpStatusCode: 404 } });

describe('S3BlobStore multipart on S3 (mocked)', () => {
  it('aborts with AbortMultipartUpload on the staging key of the upload', async () => {
    s3.on(AbortMultipartUploadCommand).resolves({});
    const uploadId = await blobs.createMultipart('files/a.bin');
    const created = s3.commandCalls(CreateMultipartUploadCommand)[0].args[0].input;
    expect(created.Bucket).toBe(bucket);
    expect(created.Key).toMatch(/^\.staging\/[0-9a-f]{32}$/);

    await blobs.abortMultipart('files/a.bin', uploadId);
    const calls = s3.commandCalls(AbortMultipartUploadCommand);
    expect(calls).toHaveLength(1);
    expect(calls[0].args[0].input).toEqual({ Bucket: bucket, Key: created.Key, UploadId: 'the-s3-upload' });
  });

  it('lists parts with ListParts page by page, each etag in the form complete takes; NoSuchUpload is UploadNotFoundError', async () => {
    const uploadId = await blobs.createMultipart('files/a.bin');
    s3.on(ListPartsCommand, { PartNumberMarker: undefined }).resolves({ Parts: [{ PartNumber: 1, ETag: '"e1"', Size: 5 * 1024 * 1024 }], IsTruncated: true, NextPartNumberMarker: '1' });
    s3.on(ListPartsCommand, { PartNumberMarker: '1' }).resolves({ Parts: [{ PartNumber: 2, ETag: '"e2"', Size: 10 }], IsTruncated: false });
    const parts = await blobs.listParts('files/a.bin', uploadId);
    expect(parts).toEqual([
      { partNumber: 1, etag: `e1:${5 * 1024 * 1024}`, size: 5 * 1024 * 1024 },
      { partNumber: 2, etag: 'e2:10', size: 10 },
    ]);
    const created = s3.commandCalls(CreateMultipartUploadCommand)[0].args[0].input;
    expect(s3.commandCalls(ListPartsCommand).map((c) => c.args[0].input)).toEqual([
      { Bucket: bucket, Key: created.Key, UploadId: 'the-s3-upload', PartNumberMarker: undefined },
      { Bucket: bucket, Key: created.Key, UploadId: 'the-s3-upload', PartNumberMarker: '1' },
    ]);
    s3.reset();
    s3.on(ListPartsCommand).rejects(noSuchUpload());
    await expect(blobs.listParts('files/a.bin', uploadId)).rejects.toBeInstanceOf(UploadNotFoundError);
  });

  it('translates NoSuchUpload into UploadNotFoundError on uploadPart, complete and abort', async () => {
    s3.on(UploadPartCommand).rejects(noSuchUpload());
    s3.on(CompleteMultipartUploadCommand).rejects(noSuchUpload());
    s3.on(AbortMultipartUploadCommand).rejects(noSuchUpload());
    const uploadId = await blobs.createMultipart('k');
    await expect(blobs.uploadPart('k', uploadId, 1, new Uint8Array(10))).rejects.toBeInstanceOf(UploadNotFoundError);
    await expect(blobs.completeMultipart('k', uploadId, [{ partNumber: 1, etag: 'e:10' }])).rejects.toBeInstanceOf(UploadNotFoundError);
    await expect(blobs.abortMultipart('k', uploadId)).rejects.toBeInstanceOf(UploadNotFoundError);
  });

  it('refuses a malformed upload id without calling S3', async () => {
    await expect(blobs.abortMultipart('k', 'not-ours')).rejects.toBeInstanceOf(UploadNotFoundError);
    await expect(blobs.uploadPart('k', 'not-ours', 1, new Uint8Array(1))).rejects.toBeInstanceOf(UploadNotFoundError);
    expect(s3.calls()).toHaveLength(0);
  });

  it('enforces part numbers and part sizes before calling S3', async () => {
    s3.on(UploadPartCommand).resolves({ ETag: '"abc"' });
    const uploadId = await blobs.createMultipart('k');
    await expect(blobs.uploadPart('k', uploadId, 0, new Uint8Array(1))).rejects.toBeInstanceOf(EngineLimitError);
    await expect(blobs.uploadPart('k', uploadId, 10_001, new Uint8Array(1))).rejects.toBeInstanceOf(EngineLimitError);
    expect(s3.commandCalls(UploadPartCommand)).toHaveLength(0);

    const small = await blobs.uploadPart('k', uploadId, 1, new Uint8Array(100));
    const last = await blobs.uploadPart('k', uploadId, 2, new Uint8Array(100));
    await expect(
      blobs.completeMultipart('k', uploadId, [
        { partNumber: 1, etag: small.etag },
        { partNumber: 2, etag: last.etag },
      ]),
    ).rejects.toBeInstanceOf(EngineLimitError);
    await expect(
      blobs.completeMultipart('k', uploadId, [
        { partNumber: 2, etag: last.etag },
        { partNumber: 1, etag: small.etag },
      ]),
    ).rejects.toBeInstanceOf(InvalidPartError); // S3's InvalidPartOrder
    expect(s3.commandCalls(CompleteMultipartUploadCommand)).toHaveLength(0);
  });

  it.each(['InvalidPart', 'InvalidPartOrder'])('translates %s into InvalidPartError', async (name) => {
    const refused = serviceError(name, 400);
    s3.on(CompleteMultipartUploadCommand).rejects(refused);
    const uploadId = await blobs.createMultipart('k');
    const err = await blobs.completeMultipart('k', uploadId, [{ partNumber: 1, etag: 'e:10' }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidPartError);
    expect((err as Error).cause).toBe(refused);
    expect(s3.commandCalls(CopyObjectCommand)).toHaveLength(0); // nothing joined, nothing copied to the key
  });

  it('translates EntityTooSmall into EngineLimitError', async () => {
    s3.on(CompleteMultipartUploadCommand).rejects(serviceError('EntityTooSmall', 400));
    const uploadId = await blobs.createMultipart('k');
    const err = await blobs.completeMultipart('k', uploadId, [{ partNumber: 1, etag: 'opaque' }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(EngineLimitError);
    expect((err as EngineLimitError).limit).toBe('multipart_part');
  });
});

describe('S3BlobStore error translation (mocked)', () => {
  it("checkJoined: a joined object another check took meanwhile (CopyObject's NoSuchKey) is UploadNotFoundError, as a check that finds nothing", async () => {
    const uploadId = await blobs.createMultipart('files/a.bin');
    const bytes = Buffer.from('joined bytes');
    const { createHash } = await import('node:crypto');
    s3.on(GetObjectCommand).callsFake(() => ({ Body: Readable.from([bytes]) }));
    s3.on(CopyObjectCommand).rejects(new NoSuchKey({ message: 'The specified key does not exist.', $metadata: { httpStatusCode: 404 } }));
    const expect_ = { size: bytes.length, sha256: createHash('sha256').update(bytes).digest('hex') };
    await expect(blobs.checkJoined('files/a.bin', uploadId, expect_)).rejects.toBeInstanceOf(UploadNotFoundError);
    expect(s3.commandCalls(DeleteObjectCommand)).toHaveLength(0);
  });

  it('answers undefined for NoSuchKey and NotFound', async () => {
    s3.on(GetObjectCommand).rejects(new NoSuchKey({ message: 'missing', $metadata: { httpStatusCode: 404 } }));
    s3.on(HeadObjectCommand).rejects(new NotFound({ message: 'missing', $metadata: { httpStatusCode: 404 } }));
    expect(await blobs.get('k')).toBeUndefined();
    expect(await blobs.head('k')).toBeUndefined();
  });

  it.each([
    ['SlowDown (503)', serviceError('SlowDown', 503)],
    ['ThrottlingException', serviceError('ThrottlingException', 400, { $retryable: { throttling: true } })],
    ['InternalError (500)', serviceError('InternalError', 500)],
    ['an unnamed 503', serviceError('Unknown', 503)],
    ['a refused connection', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' })],
    ['a reset connection', Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })],
    ['a timeout', Object.assign(new Error('timed out'), { name: 'TimeoutError' })],
  ])('translates %s into EngineUnavailableError', async (_label, error) => {
    s3.on(PutObjectCommand).rejects(error);
    s3.on(GetObjectCommand).rejects(error);
    s3.on(HeadObjectCommand).rejects(error);
    s3.on(UploadPartCommand).rejects(error);
    await expect(blobs.put('k', new Uint8Array(3))).rejects.toBeInstanceOf(EngineUnavailableError);
    await expect(blobs.get('k')).rejects.toBeInstanceOf(EngineUnavailableError);
    await expect(blobs.head('k')).rejects.toBeInstanceOf(EngineUnavailableError);
    const uploadId = await blobs.createMultipart('k');
    await expect(blobs.uploadPart('k', uploadId, 1, new Uint8Array(3))).rejects.toBeInstanceOf(EngineUnavailableError);
  });

  /** 4 MiB in 64 KiB chunks: more than the pipes buffer, so an unread body would block. */
  const body = () => Readable.from(Array.from({ length: 64 }, () => Buffer.alloc(64 * 1024, 1)));

  it('fails (does not hang) when S3 refuses a streamed PutObject, and drops the staging key', async () => {
    s3.on(PutObjectCommand).rejects(serviceError('SlowDown', 503));
    await expect(blobs.put('k', body(), { size: 4 * 1024 * 1024 })).rejects.toBeInstanceOf(EngineUnavailableError);
    const staged = s3.commandCalls(PutObjectCommand)[0].args[0].input.Key;
    expect(staged).toMatch(/^\.staging\//);
    expect(s3.commandCalls(DeleteObjectCommand).map((c) => c.args[0].input.Key)).toEqual([staged]);
  });

  it('fails when S3 refuses a part of a staged multipart upload, and aborts that upload', async () => {
    s3.on(UploadPartCommand).rejects(serviceError('SlowDown', 503));
    s3.on(AbortMultipartUploadCommand).resolves({});
    const big = Readable.from(Array.from({ length: 160 }, () => Buffer.alloc(64 * 1024, 2))); // 10 MiB, no size given
    await expect(blobs.put('k', big)).rejects.toBeInstanceOf(EngineUnavailableError);
    expect(s3.commandCalls(AbortMultipartUploadCommand)).toHaveLength(1);
    expect(s3.commandCalls(CompleteMultipartUploadCommand)).toHaveLength(0);
  });

  it('passes other errors through untranslated', async () => {
    const denied = serviceError('AccessDenied', 403);
    s3.on(HeadObjectCommand).rejects(denied);
    await expect(blobs.head('k')).rejects.toBe(denied);
  });
});
