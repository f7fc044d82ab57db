/**
 * A multipart complete on AWS whose SHA-256 check outlasts the call (issue 33, A3;
 * docs/decisions/upload-checks.md): the complete route runs as Lambda behind API Gateway runs it
 * (test/helpers/lambda-front.ts) over DynamoDB (dynalite) and S3 (s3rver), with its deadline
 * (UPLOAD_CHECK_WITHIN_MS) shortened to 10 ms, far less than reading 30 MiB back from S3 takes. The
 * complete answers 202 `verifying`; the upload-checks function, invoked with the SQS event Lambda
 * would give it, finishes the check: the upload reads completed and its bytes are kept, or, for bytes
 * other than the announced ones, the joined object is deleted unseen and the upload `failed`
 * `hash_mismatch`. Before the change the complete read the whole file inside the call (200 only).
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useAwsAiFront } from '../helpers/aws-ai-front.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { UPLOAD_CHECKS_QUEUE } from '../../lambdas/knowledge/uploads.js';
import { storedFileKey, uploadBytesKey, uploadKey } from '../../lambdas/knowledge/upload-keys.js';
import { handler as uploadChecks } from '../../lambdas/consumers/upload-checks.js';

const MiB = 1024 * 1024;
const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');
const op = () => `op-${randomUUID()}`;

beforeAll(() => useSettings({ uploadCheckWithinMs: 10 }));
afterAll(() => useSettings(undefined));
const front = useAwsAiFront('ai-uploads-checks-aws');
const { call } = front;

/** Starts an upload announcing `announced` and sends `sent` to its presigned part URLs. */
async function sendFile(announced: Buffer, sent: Buffer, id = op()) {
  const res = await fetch(`${front.gateway.url}/v1/uploads`, {
    method: 'POST',
    body: JSON.stringify({ filename: 'talk.mp4', content_type: 'video/mp4', size: announced.length, sha256: sha(announced) }),
    headers: { authorization: `Bearer ${front.key}`, 'x-operation-id': id, 'content-type': 'application/json' },
  });
  const upload = (await res.json()) as any;
  expect(res.status).toBe(201);
  for (const part of upload.parts) await front.parts.send(part.url, sent.subarray((part.number - 1) * upload.part_size, part.number * upload.part_size));
  return upload;
}

/** The check's message, received as the event source mapping receives it (it waits out the message's delay). */
async function checkEvent(): Promise<SQSEvent> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const [m] = await front.engine.queue.receive(UPLOAD_CHECKS_QUEUE, { max: 1, visibilitySeconds: 60 });
    if (m) {
      const attributes = { ApproximateReceiveCount: String(m.receiveCount), SentTimestamp: '0', SenderId: 'test', ApproximateFirstReceiveTimestamp: '0' };
      return { Records: [{ messageId: m.id, receiptHandle: m.receipt, body: m.body, attributes, messageAttributes: {}, md5OfBody: '', eventSource: 'aws:sqs', eventSourceARN: 'arn:aws:sqs:us-east-1:000000000000:upload-checks', awsRegion: 'us-east-1' }] };
    }
    if (Date.now() > deadline) throw new Error('no upload check was queued');
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Where the joined object waits on S3 until it is checked: the multipart upload's staging key (lambdas/engine/aws/blobs.ts). */
async function joinedKey(id: string): Promise<string> {
  const item = await front.engine.kv.get(uploadKey(front.org, id));
  return `.staging/${String(item!.engine_upload_id).split('.')[0]}`;
}

describe('a complete whose check outlasts its deadline, on AWS', () => {
  const file = randomBytes(30 * MiB + 7);

  it('answers 202 verifying at once; the upload-checks function completes it, and only then are its bytes kept', async () => {
    const upload = await sendFile(file, file);
    const before = front.gateway.invocations.length;
    const done = await call('POST', `/v1/uploads/${upload.id}/complete`, {});
    expect(done.status).toBe(202);
    expect(done.body).toMatchObject({ id: upload.id, status: 'verifying', parts_received: [1, 2, 3, 4, 5, 6, 7], parts: [], completed_at: null, status_url: `/v1/uploads/${upload.id}` });
    expect(done.body.poll_after_seconds).toBeGreaterThanOrEqual(1);
    expect(front.gateway.invocations.slice(before).map((i) => i.route)).toEqual(['ai.uploads.complete']);

    // Not yet visible: no stored file, nothing at the upload's key; the joined bytes wait on their staging key.
    const ws = (await front.engine.kv.get(uploadKey(front.org, upload.id)))!.workspace_id as string;
    expect(await front.engine.kv.get(storedFileKey(front.org, ws, sha(file)))).toBeUndefined();
    const gen = String((await front.engine.kv.get(uploadKey(front.org, upload.id)))!.gen);
    expect(await front.engine.blobs.head(uploadBytesKey(front.org, ws, sha(file), gen))).toBeUndefined();
    const joined = await joinedKey(upload.id);
    expect(await front.engine.blobs.head(joined)).toEqual({ size: file.length });
    // While it is checked: GET says so; a second complete answers the same 202; a part cannot change it.
    expect((await call('GET', `/v1/uploads/${upload.id}`)).body).toMatchObject({ status: 'verifying', parts: [] });
    expect((await call('POST', `/v1/uploads/${upload.id}/complete`, {})).status).toBe(202);

    const result = await uploadChecks(await checkEvent());
    expect(result).toEqual({ batchItemFailures: [] });
    const after = await call('GET', `/v1/uploads/${upload.id}`);
    expect(after.body).toMatchObject({ status: 'completed', parts_received: [1, 2, 3, 4, 5, 6, 7], parts: [], completed_at: expect.any(String) });
    expect(after.body.error).toBeUndefined();
    expect(await front.engine.kv.get(storedFileKey(front.org, ws, sha(file)))).toMatchObject({ gen, size: file.length });
    const kept = await front.engine.blobs.get(uploadBytesKey(front.org, ws, sha(file), gen));
    const hash = createHash('sha256');
    for await (const chunk of kept!.body) hash.update(chunk as Buffer);
    expect(hash.digest('hex')).toBe(sha(file));
    expect(await front.engine.blobs.head(joined)).toBeUndefined();
    // Complete again: the upload as it is.
    expect((await call('POST', `/v1/uploads/${upload.id}/complete`, {})).body).toMatchObject({ status: 'completed' });
  }, 60_000);

  it('bytes other than the announced ones: deleted unseen by the check, the upload failed hash_mismatch; a start again reopens it', async () => {
    const announced = randomBytes(file.length);
    const other = randomBytes(file.length);
    const id = op();
    const upload = await sendFile(announced, other, id);
    const done = await call('POST', `/v1/uploads/${id}/complete`, {});
    expect([done.status, done.body.status]).toEqual([202, 'verifying']);
    const joined = await joinedKey(id);
    const ws = (await front.engine.kv.get(uploadKey(front.org, id)))!.workspace_id as string;
    const gen = String((await front.engine.kv.get(uploadKey(front.org, id)))!.gen);

    expect(await uploadChecks(await checkEvent())).toEqual({ batchItemFailures: [] });
    const after = await call('GET', `/v1/uploads/${id}`);
    expect(after.body).toMatchObject({ status: 'failed', parts_received: [], parts: [], completed_at: null, error: { code: 'hash_mismatch' } });
    expect(after.body.error.message).toContain(sha(other));
    expect(await front.engine.blobs.head(joined)).toBeUndefined();
    expect(await front.engine.blobs.head(uploadBytesKey(front.org, ws, sha(announced), gen))).toBeUndefined();
    expect(await front.engine.kv.get(storedFileKey(front.org, ws, sha(announced)))).toBeUndefined();
    // Its complete answers the failure; a part is refused; the same start opens it again for the right bytes.
    const again = await call('POST', `/v1/uploads/${id}/complete`, {});
    expect([again.status, again.body.error.code]).toEqual([400, 'hash_mismatch']);
    const restart = await fetch(`${front.gateway.url}/v1/uploads`, {
      method: 'POST',
      body: JSON.stringify({ filename: 'talk.mp4', content_type: 'video/mp4', size: announced.length, sha256: sha(announced) }),
      headers: { authorization: `Bearer ${front.key}`, 'x-operation-id': id, 'content-type': 'application/json' },
    });
    expect(restart.status).toBe(201);
    expect((await restart.json()) as any).toMatchObject({ id, status: 'pending', parts_received: [] });
    expect(upload.parts[0].url).toBeDefined();
  }, 60_000);
});
