/**
 * Uploads on AWS (docs/ai/uploads.md, "On AWS"): the upload routes run as Lambda behind API Gateway
 * runs them (test/helpers/lambda-front.ts: buffered answers, 6 MB an invocation) over DynamoDB
 * (dynalite) and S3 (s3rver). The parts go to presigned S3 part URLs, never through a function; a
 * resumed client gets fresh URLs for the missing parts only; complete joins and checks them on S3.
 *
 * s3rver has no ListParts (it answers 405), so the store's listParts is answered here from what S3
 * answered each part PUT (its ETag, in the adapter's `<etag>:<size>` form); the adapter's own ListParts
 * paging is tested on a client mock (test/contract/blob.aws-mock.test.ts).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useAwsAiFront } from '../helpers/aws-ai-front.js';
import { PART_URL_SECONDS } from '../../lambdas/knowledge/uploads.js';

const MiB = 1024 * 1024;
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const op = () => `op-${randomUUID()}`;

const front = useAwsAiFront('ai-uploads-aws');
const { call } = front;

/** A part sent as a client sends it: a plain PUT of its bytes to the URL, no credential of ours. */
const sendPart = (url: string, bytes: Buffer): Promise<void> => front.parts.send(url, bytes);

describe('an upload on AWS', () => {
  const file = randomBytes(11 * MiB + 5);
  const cut = (n: number) => file.subarray((n - 1) * 5 * MiB, n * 5 * MiB);
  let id: string;

  it('answers presigned S3 part URLs, each taking exactly its part, working an hour', async () => {
    const before = front.gateway.invocations.length;
    const start = await call('POST', '/v1/uploads', { filename: 'talk.mp4', content_type: 'video/mp4', size: file.length, sha256: sha(file) });
    expect(start.status).toBe(201);
    id = start.body.id;
    expect(start.body).toMatchObject({ status: 'pending', part_size: 5 * MiB, part_count: 3, parts_received: [] });
    expect(start.body.parts.map((p: any) => [p.number, p.size, p.method])).toEqual([
      [1, 5 * MiB, 'PUT'],
      [2, 5 * MiB, 'PUT'],
      [3, MiB + 5, 'PUT'],
    ]);
    for (const part of start.body.parts) {
      const url = new URL(part.url);
      expect(url.origin).toBe(front.s3.endpoint);
      expect(url.searchParams.get('partNumber')).toBe(String(part.number));
      expect(url.searchParams.get('X-Amz-Expires')).toBe(String(PART_URL_SECONDS));
      expect(url.searchParams.get('X-Amz-SignedHeaders')).toContain('content-length');
    }
    expect(Date.parse(start.body.part_urls_expire_at)).toBeGreaterThan(Date.now() + (PART_URL_SECONDS - 60) * 1000);
    expect(front.gateway.invocations.slice(before).map((i) => i.route)).toEqual(['ai.uploads.create']);
  });

  it('is resumed: the parts go straight to S3; GET shows them and hands out fresh URLs for the missing one only', async () => {
    const { body: upload } = await call('GET', `/v1/uploads/${id}`);
    await sendPart(upload.parts[0].url, cut(1));
    await sendPart(upload.parts[2].url, cut(3));
    const later = await call('GET', `/v1/uploads/${id}`);
    expect(later.body).toMatchObject({ status: 'pending', parts_received: [1, 3] });
    expect(later.body.parts.map((p: any) => p.number)).toEqual([2]);
    await sendPart(later.body.parts[0].url, cut(2));
  });

  it('completes on S3: joined, the SHA-256 checked; no byte of the file passed through a function', async () => {
    const done = await call('POST', `/v1/uploads/${id}/complete`, {});
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ id, status: 'completed', parts_received: [1, 2, 3], parts: [], part_urls_expire_at: null });
    expect(Math.max(...front.gateway.invocations.map((i) => i.eventBytes))).toBeLessThan(64 * 1024);
  });

  it('bytes other than the announced ones: 400 hash_mismatch, the upload pending again with new URLs', async () => {
    const other = randomBytes(100);
    const start = await call('POST', '/v1/uploads', { filename: 'a.txt', content_type: 'text/plain', size: 100, sha256: sha(randomBytes(100)) });
    await sendPart(start.body.parts[0].url, other);
    const done = await call('POST', `/v1/uploads/${start.body.id}/complete`, {});
    expect([done.status, done.body.error.code]).toEqual([400, 'hash_mismatch']);
    const again = await call('GET', `/v1/uploads/${start.body.id}`);
    expect(again.body).toMatchObject({ status: 'pending', parts_received: [] });
    expect(again.body.parts[0].url).not.toBe(start.body.parts[0].url);
  });
});
