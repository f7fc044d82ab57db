/**
 * A client's upload through presigned S3 part URLs, against s3rver (test/helpers/s3rver.ts): each part
 * a plain PUT of its bytes to its URL, no credential of ours. s3rver has no ListParts (it answers 405),
 * so `standInListParts` answers the blob store's listParts from what S3 answered each part PUT (its
 * ETag, in the adapter's `<etag>:<size>` form); the adapter's own ListParts paging is tested on a
 * client mock (test/contract/blob.aws-mock.test.ts).
 */
import type { Engine } from '../../lambdas/engine/ports.js';

export interface PresignedParts {
  /** PUTs `bytes` to the part URL and remembers S3's answer for listParts; throws unless S3 took it. */
  send(url: string, bytes: Uint8Array): Promise<void>;
}

export function standInListParts(engine: Engine): PresignedParts {
  /** What S3 answered each part PUT, by S3's upload id. */
  const sent = new Map<string, Map<number, { partNumber: number; etag: string; size: number }>>();
  engine.blobs.listParts = async (_key, uploadId) => [...(sent.get(uploadId.slice(uploadId.indexOf('.') + 1))?.values() ?? [])].sort((a, b) => a.partNumber - b.partNumber);
  return {
    async send(url, bytes) {
      const res = await fetch(url, { method: 'PUT', body: bytes });
      if (res.status !== 200) throw new Error(`part PUT to S3: ${res.status} ${await res.text()}`);
      const target = new URL(url);
      const uploadId = target.searchParams.get('uploadId')!;
      const partNumber = Number(target.searchParams.get('partNumber'));
      const parts = sent.get(uploadId) ?? new Map();
      parts.set(partNumber, { partNumber, etag: `${res.headers.get('etag')!.replace(/"/g, '')}:${bytes.length}`, size: bytes.length });
      sent.set(uploadId, parts);
    },
  };
}
