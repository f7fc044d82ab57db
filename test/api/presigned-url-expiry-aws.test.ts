/**
 * A presigned part URL that expired before its time (on AWS it dies with the session of the role that
 * signed it, possibly within minutes; docs/data/blobs.md, "What clients must do"): S3 refuses it, and
 * the client asks the platform again (GET /v1/uploads/{id} hands out fresh URLs) instead of failing the
 * upload. Over the upload routes as Lambda behind API Gateway runs them, DynamoDB (dynalite) and S3
 * (s3rver, which checks a presigned URL's time as S3 does: 403 AccessDenied "Request has expired").
 */
import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { useAwsAiFront } from '../helpers/aws-ai-front.js';
import { presignedUrlExpired } from '../helpers/presigned-parts.js';

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

const front = useAwsAiFront('presigned-expiry');
const { call } = front;

/** The URL as it would be had it been signed two hours ago: past its time, as one whose signing session ended. */
function aged(url: string): string {
  const u = new URL(url);
  const signedAt = Date.now() - 2 * 3600 * 1000;
  u.searchParams.set('X-Amz-Date', new Date(signedAt).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, ''));
  return u.toString();
}

/** Fresh URL of part `n`, as a client re-asks. */
const freshUrl = (id: string, n: number) => async () => {
  const { body } = await call('GET', `/v1/uploads/${id}`);
  return body.parts.find((p: { number: number }) => p.number === n).url as string;
};

describe('a presigned part URL that expired', () => {
  it('is refused by S3 as expired (403), which the client recognizes', async () => {
    const file = randomBytes(1024);
    const start = await call('POST', '/v1/uploads', { filename: 'a.bin', content_type: 'application/octet-stream', size: file.length, sha256: sha(file) });
    expect(start.status).toBe(201);
    const res = await fetch(aged(start.body.parts[0].url), { method: 'PUT', body: file });
    const text = await res.text();
    expect(res.status).toBe(403);
    expect(presignedUrlExpired(res.status, text)).toBe(true);
    // What S3 answers when the signing role's session ended first.
    expect(presignedUrlExpired(400, '<Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>')).toBe(true);
    // Other refusals are not expiry: asking again would not help.
    expect(presignedUrlExpired(403, '<Error><Code>SignatureDoesNotMatch</Code></Error>')).toBe(false);
    expect(presignedUrlExpired(400, '<Error><Code>BadDigest</Code></Error>')).toBe(false);
  });

  it('is asked for again: the part goes to a fresh URL and the upload completes', async () => {
    const file = randomBytes(64 * 1024);
    const start = await call('POST', '/v1/uploads', { filename: 'b.bin', content_type: 'application/octet-stream', size: file.length, sha256: sha(file) });
    expect(start.status).toBe(201);
    const before = front.gateway.invocations.length;
    await front.parts.send(aged(start.body.parts[0].url), file, freshUrl(start.body.id, 1));
    // One GET for the fresh URL: the re-ask went to the platform.
    expect(front.gateway.invocations.slice(before).map((i) => i.route)).toEqual(['ai.uploads.get']);
    const done = await call('POST', `/v1/uploads/${start.body.id}/complete`, {});
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ status: 'completed', parts_received: [1] });
  });

  it('is asked for again only when S3 says it expired: another refusal fails at once', async () => {
    const file = randomBytes(1024);
    const start = await call('POST', '/v1/uploads', { filename: 'c.bin', content_type: 'application/octet-stream', size: file.length, sha256: sha(file) });
    const before = front.gateway.invocations.length;
    // A credential S3 does not know: refused (403 InvalidAccessKeyId), not for its time.
    const url = new URL(start.body.parts[0].url);
    url.searchParams.set('X-Amz-Credential', url.searchParams.get('X-Amz-Credential')!.replace(/^[^/]+/, 'UNKNOWNKEY'));
    await expect(front.parts.send(url.toString(), file, freshUrl(start.body.id, 1))).rejects.toThrow(/part PUT to S3: 403 .*InvalidAccessKeyId/s);
    expect(front.gateway.invocations.length).toBe(before);
  });
});
