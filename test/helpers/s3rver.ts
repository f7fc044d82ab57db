/** An in-process s3rver with one bucket, for tests of the AWS blob adapter. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import S3rver from 's3rver';
import { S3Client } from '@aws-sdk/client-s3';

export interface S3rverBucket {
  endpoint: string;
  client: S3Client;
  bucket: string;
  /** S3 event notifications (ObjectCreated:Put and the like) as s3rver emits them: `{Records: [...]}`. */
  onEvent(listener: (event: { Records: { eventName: string; s3: { bucket: { name: string }; object: { key: string; size?: number } } }[] }) => void): void;
  close(): Promise<void>;
}

export async function startS3rver(bucket = 'platform-test'): Promise<S3rverBucket> {
  const directory = mkdtempSync(join(tmpdir(), 's3rver-'));
  const server = new S3rver({
    address: '127.0.0.1',
    port: 0,
    silent: true,
    directory,
    configureBuckets: [{ name: bucket }],
  });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  const client = new S3Client({
    endpoint,
    region: 'us-east-1',
    forcePathStyle: true,
    // s3rver accepts any SigV4 signature but knows only this key pair.
    credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    // s3rver does not understand aws-chunked bodies with checksum trailers (the SDK default for
    // streamed uploads since 3.729): it would store the chunk framing as object bytes.
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });

  return {
    endpoint,
    client,
    bucket,
    // S3rver is a Koa app (an EventEmitter); its typings leave that out.
    onEvent: (listener) => void (server as unknown as NodeJS.EventEmitter).on('event', listener),
    async close() {
      client.destroy(); // drops keep-alive sockets, which would otherwise hold the server open
      await server.close();
      rmSync(directory, { recursive: true, force: true });
    },
  };
}
