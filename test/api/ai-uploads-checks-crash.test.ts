/**
 * The attack pass repeated on the upload checks (issue 33, A3): `npm start` killed (SIGKILL, every
 * process at once) right after a complete answered 202 `verifying`, before the check's message was
 * received. The message is in the store, so the restarted server's background receiver finishes the
 * check: the upload is completed, its bytes kept, and a new complete answers 200.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { crashLocalProcess, startLocalProcess, useLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { postWithOperation } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';

const MIB = 1024 * 1024;
const used = useLocalProcess('upload-checks-crash-', { UPLOAD_CHECK_WITHIN_MS: '0' });
let restarted: LocalProcess | undefined;

afterAll(async () => {
  if (restarted) await crashLocalProcess(restarted);
});

const op = () => `op-${randomUUID()}`;
const auth = () => ({ authorization: `Bearer ${used.key}` });

describe('a server killed between the 202 and the check', () => {
  it('finishes the check once started again on the same data', async () => {
    const file = randomBytes(6 * MIB + 3);
    const ai = used.local.urls.ai;
    const started = await postWithOperation(ai, used.key, '/v1/uploads', op(), { filename: 'crash.bin', content_type: 'application/octet-stream', size: file.length, sha256: createHash('sha256').update(file).digest('hex') });
    expect(started.status).toBe(201);
    const upload = started.body;
    for (const part of upload.parts) {
      const res = await fetch(part.url, { method: 'PUT', body: file.subarray((part.number - 1) * upload.part_size, part.number * upload.part_size), headers: { ...auth(), 'x-operation-id': op() } });
      expect(res.status).toBe(200);
    }
    const done = await postWithOperation(ai, used.key, `/v1/uploads/${upload.id}/complete`, op(), {});
    expect([done.status, done.body.status]).toEqual([202, 'verifying']);
    // The message waits 2 s past the call's deadline: nothing has received it yet.
    await crashLocalProcess(used.local);

    restarted = await startLocalProcess({ DATA_DIR: used.dataDir, LOG_LEVEL: 'warn', UPLOAD_CHECK_WITHIN_MS: '0' });
    const get = async () => (await (await fetch(`${restarted!.urls.ai}/v1/uploads/${upload.id}`, { headers: auth() })).json()) as any;
    expect((await get()).status).toBe('verifying');
    let now: any;
    await waitFor('the check after the restart', async () => (now = await get()).status !== 'verifying', 30_000, 200);
    expect(now).toMatchObject({ status: 'completed', completed_at: expect.any(String) });
    const again = await postWithOperation(restarted.urls.ai, used.key, `/v1/uploads/${upload.id}/complete`, op(), {});
    expect([again.status, again.body.status]).toEqual([200, 'completed']);
  }, 120_000);
});
