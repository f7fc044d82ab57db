/**
 * Expired uploads are swept without any new upload (docs/decisions/ai-uploads.md, "Expiry"): the local
 * runtime's workers run the sweep on their timer (lambdas/local/queue-workers.ts), as the scheduled
 * function does on AWS. On a clock the test moves: once keep_source_hours have passed, a completed
 * upload's bytes and an unfinished one's parts go with no request to the platform.
 */
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { postWithOperation } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';
import { systemClock } from '../../lambdas/engine/clock.js';
import type { Clock } from '../../lambdas/engine/ports.js';
import { UploadNotFoundError } from '../../lambdas/engine/errors.js';
import { storedFileKey, uploadBytesKey, uploadKey } from '../../lambdas/knowledge/upload-keys.js';

const MIB = 1024 * 1024;
/** Real time plus what the test adds: the workers' timer still runs in real time. */
let offsetMs = 0;
const clock: Clock = { now: () => systemClock.now() + offsetMs, sleep: systemClock.sleep };

let p: TestPlatform;
let key: string;
let org: string;

const sha = (bytes: Buffer) => createHash('sha256').update(bytes).digest('hex');
const start = (bytes: Buffer, size = bytes.length) =>
  postWithOperation(p.urls.ai, key, '/v1/uploads', `op-${randomUUID()}`, { filename: 'talk.mp4', content_type: 'video/mp4', size, sha256: sha(bytes), keep_source_hours: 1 });
const putPart = (url: string, bytes: Buffer) => fetch(url, { method: 'PUT', body: bytes, headers: { authorization: `Bearer ${key}`, 'x-operation-id': `op-${randomUUID()}` } });

beforeAll(async () => {
  p = await startTestPlatform({ clock });
  key = p.credentials.secret_key;
  org = p.credentials.organization_id;
});

afterAll(async () => {
  await p?.close();
});

it('removes an expired upload\'s bytes and an unfinished one\'s parts with no new upload', async () => {
  const bytes = randomBytes(1000);
  const done = (await start(bytes)).body;
  expect((await putPart(done.parts[0].url, bytes)).status).toBe(200);
  expect((await postWithOperation(p.urls.ai, key, `/v1/uploads/${done.id}/complete`, `op-${randomUUID()}`, {})).body.status).toBe('completed');
  const file = randomBytes(7 * MIB);
  const open = (await start(file)).body;
  expect((await putPart(open.parts[0].url, file.subarray(0, open.parts[0].size))).status).toBe(200);

  const item = (await p.engine.kv.get(uploadKey(org, done.id)))!;
  const ws = String(item.workspace_id);
  const bytesKey = uploadBytesKey(org, ws, done.sha256, String(item.gen));
  const openItem = (await p.engine.kv.get(uploadKey(org, open.id)))!;
  const parts = () => p.engine.blobs.listParts(uploadBytesKey(org, ws, open.sha256, String(openItem.gen)), String(openItem.engine_upload_id));
  expect(await p.engine.blobs.head(bytesKey)).toBeDefined();
  expect(await parts()).toHaveLength(1);

  offsetMs += 3600 * 1000 + 1000;
  const partsGone = () => parts().then(() => false, (error) => error instanceof UploadNotFoundError);
  await waitFor('the sweep to remove the expired bytes and parts', async () => !(await p.engine.blobs.head(bytesKey)) && (await partsGone()), 20_000, 200);
  expect(await p.engine.kv.get(storedFileKey(org, ws, done.sha256))).toBeUndefined();
}, 60_000);
