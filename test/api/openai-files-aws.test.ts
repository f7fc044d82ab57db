/**
 * OpenAI's Files API on AWS (docs/ai/openai-compatibility.md, "Files"; docs/decisions/openai-files.md):
 * the routes as Lambda behind API Gateway runs them (test/helpers/lambda-front.ts: bodies whole in
 * the event, 6 MB an invocation) over DynamoDB (dynalite) and S3 (s3rver), through the official SDK.
 * A form within the function's inline body is a file; one over it is 413 naming /v1/uploads; a file
 * made through /v1/uploads (parts straight to S3) is served by files.content as a 307 to S3.
 */
import { createHash, randomBytes } from 'node:crypto';
import OpenAI, { toFile } from 'openai';
import { describe, expect, it } from 'vitest';
import { LAMBDA_MAX_BODY_BYTES } from '../../lambdas/http/event.js';
import { useAwsAiFront } from '../helpers/aws-ai-front.js';

const MiB = 1024 * 1024;
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

const front = useAwsAiFront('openai-files-aws');
const sdk = () => new OpenAI({ apiKey: front.key, baseURL: `${front.gateway.url}/v1`, organization: null, project: null, maxRetries: 0 });

describe('files on AWS', () => {
  it('a file within the inline body: created, retrieved, its content read back', async () => {
    const bytes = randomBytes(MiB);
    const file = await sdk().files.create({ file: await toFile(bytes, 'small.bin'), purpose: 'user_data' });
    expect(file).toMatchObject({ object: 'file', bytes: MiB, filename: 'small.bin', status: 'processed' });
    expect((await front.call('GET', `/v1/uploads/${file.id}`)).body).toMatchObject({ status: 'completed', sha256: sha(bytes) });
    const back = Buffer.from(await (await sdk().files.content(file.id)).arrayBuffer());
    expect(back.equals(bytes)).toBe(true);
  });

  it('a form over the inline body: 413 request_too_large naming /v1/uploads, not retried', async () => {
    const error = await sdk()
      .files.create({ file: await toFile(randomBytes(LAMBDA_MAX_BODY_BYTES + 1000), 'big.bin'), purpose: 'user_data' })
      .catch((e) => e);
    expect(error.status).toBe(413);
    expect(error.error).toMatchObject({ code: 'request_too_large' });
    expect(error.error.message).toContain('/v1/uploads');
  });

  it('a larger file through /v1/uploads is a file: retrieve, and content as a 307 to S3 the SDK follows', async () => {
    const bytes = randomBytes(6 * MiB);
    const start = await front.call('POST', '/v1/uploads', { filename: 'large.bin', content_type: 'application/octet-stream', size: bytes.length, sha256: sha(bytes) });
    expect(start.status).toBe(201);
    for (const part of start.body.parts) await front.parts.send(part.url, bytes.subarray((part.number - 1) * start.body.part_size, (part.number - 1) * start.body.part_size + part.size));
    expect((await front.call('POST', `/v1/uploads/${start.body.id}/complete`, {})).status).toBe(200);
    expect(await sdk().files.retrieve(start.body.id)).toMatchObject({ id: start.body.id, bytes: bytes.length, purpose: 'assistants', status: 'processed' });
    const redirect = await fetch(`${front.gateway.url}/v1/files/${start.body.id}/content`, { headers: { authorization: `Bearer ${front.key}` }, redirect: 'manual' });
    expect(redirect.status).toBe(307);
    expect(new URL(redirect.headers.get('location')!).origin).toBe(front.s3.endpoint);
    const back = Buffer.from(await (await sdk().files.content(start.body.id)).arrayBuffer());
    expect(back.equals(bytes)).toBe(true);
  });
});
