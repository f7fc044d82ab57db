/**
 * A client's upload through presigned S3 part URLs, against s3rver (test/helpers/s3rver.ts): each part
 * a plain PUT of its bytes to its URL, no credential of ours. s3rver has no ListParts (it answers 405),
 * so `standInListParts` answers the blob store's listParts from what S3 answered each part PUT (its
 * ETag, in the adapter's `<etag>:<size>` form), a client's to a presigned URL or the store's own uploadPart; the adapter's own ListParts paging is tested on a
 * client mock (test/contract/blob.aws-mock.test.ts).
 */
import type { Engine } from '../../lambdas/engine/ports.js';

export interface PresignedParts {
  /**
   * PUTs `bytes` to the part URL and remembers S3's answer for listParts; throws unless S3 took it.
   * With `fresh`, a URL S3 calls expired is asked for again once, as a client does (putWithFreshUrl).
   */
  send(url: string, bytes: Uint8Array, fresh?: () => Promise<string>): Promise<void>;
}

/**
 * S3's refusal of a presigned URL past its time: `403 AccessDenied` "Request has expired", or `400
 * ExpiredToken` when the session of the role that signed it ended first, which on AWS can be minutes
 * after the route answered (docs/data/blobs.md, "What clients must do"). Nothing else is expiry.
 */
export function presignedUrlExpired(status: number, body: string): boolean {
  return (status === 403 && /<Code>AccessDenied<\/Code>\s*<Message>Request has expired</.test(body)) || (status === 400 && body.includes('<Code>ExpiredToken</Code>'));
}

/**
 * PUTs with `put(url)`; when S3 answers that the URL expired, asks `fresh()` for a new one (the
 * platform's GET of the upload, or its route again for a 307) and PUTs once more. Any other answer is
 * the caller's, as is a second expiry: a fresh URL that expires at once means something else is wrong.
 */
export async function putWithFreshUrl(url: string, put: (url: string) => Promise<Response>, fresh?: () => Promise<string>): Promise<{ res: Response; text: string; url: string }> {
  const res = await put(url);
  const text = await res.text();
  if (!fresh || !presignedUrlExpired(res.status, text)) return { res, text, url };
  const renewed = await fresh();
  const again = await put(renewed);
  return { res: again, text: await again.text(), url: renewed };
}

export function standInListParts(engine: Engine): PresignedParts {
  /** What S3 answered each part PUT, by S3's upload id. */
  const sent = new Map<string, Map<number, { partNumber: number; etag: string; size: number }>>();
  const s3UploadId = (storeUploadId: string) => storeUploadId.slice(storeUploadId.indexOf('.') + 1);
  const remember = (uploadId: string, part: { partNumber: number; etag: string; size: number }) => sent.set(uploadId, (sent.get(uploadId) ?? new Map()).set(part.partNumber, part));
  engine.blobs.listParts = async (_key, uploadId) => [...(sent.get(s3UploadId(uploadId))?.values() ?? [])].sort((a, b) => a.partNumber - b.partNumber);
  // Parts a function sends itself (POST /v1/files stores its form through the store's uploadPart).
  const uploadPart = engine.blobs.uploadPart.bind(engine.blobs);
  engine.blobs.uploadPart = async (key, uploadId, partNumber, body, size) => {
    const part = await uploadPart(key, uploadId, partNumber, body, size);
    remember(s3UploadId(uploadId), { partNumber, ...part });
    return part;
  };
  return {
    async send(first, bytes, fresh) {
      const { res, text, url } = await putWithFreshUrl(first, (to) => fetch(to, { method: 'PUT', body: bytes }), fresh);
      if (res.status !== 200) throw new Error(`part PUT to S3: ${res.status} ${text}`);
      const target = new URL(url);
      const uploadId = target.searchParams.get('uploadId')!;
      const partNumber = Number(target.searchParams.get('partNumber'));
      remember(uploadId, { partNumber, etag: `${res.headers.get('etag')!.replace(/"/g, '')}:${bytes.length}`, size: bytes.length });
    },
  };
}
