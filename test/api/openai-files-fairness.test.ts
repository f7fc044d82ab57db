/**
 * One organization's files.create forms never take another's (docs/decisions/openai-files.md): each
 * organization spools at most MAX_SPOOLS_PER_ORGANIZATION forms at once in a process, and a form that
 * stops sending is refused after FILE_FORM_IDLE_MS, freeing its slot. Before, four stalled forms of one
 * tenant made every tenant's files.create 429 for Node's 300 s request timeout.
 */
import http from 'node:http';
import { toFile } from 'openai';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { MAX_SPOOLS_PER_ORGANIZATION } from '../../lambdas/ai/openai-compat/multipart.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { startOpenAiWorld, type OpenAiWorld } from '../helpers/openai-compat.js';

const IDLE_MS = 1_500;
let w: OpenAiWorld;

beforeAll(async () => {
  useSettings({ fileFormIdleMs: IDLE_MS });
  w = await startOpenAiWorld();
});
afterAll(async () => {
  await w?.close();
  useSettings(undefined);
});

/** A form that sends its first part and the file part's start, then nothing: resolves with its answer. */
function stalledForm(key: string): { answer: Promise<{ status: number; body: any }>; opened: Promise<void> } {
  const url = new URL(`${w.p.urls.ai}/v1/files`);
  let opened!: () => void;
  const openedP = new Promise<void>((r) => (opened = r));
  const answer = new Promise<{ status: number; body: any }>((resolve, reject) => {
    const req = http.request(url, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'multipart/form-data; boundary=stall', 'content-length': String(1 << 20) } }, (res) => {
      let text = '';
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.write('--stall\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nassistants\r\n--stall\r\nContent-Disposition: form-data; name="file"; filename="slow.bin"\r\n\r\nfirst bytes', () => setTimeout(opened, 200));
  });
  return { answer, opened: openedP };
}

const create = async (client = w.client) => client.files.create({ file: await toFile(Buffer.from('hello'), 'hello.txt'), purpose: 'user_data' }, { maxRetries: 0 });

it("stalled forms of one organization hold its own slots only, and lose them once idle", async () => {
  const key = w.p.credentials.secret_key;
  const stalled = Array.from({ length: MAX_SPOOLS_PER_ORGANIZATION }, () => stalledForm(key));
  await Promise.all(stalled.map((s) => s.opened));
  // This organization's next form waits for a slot of its own…
  const refused = await create().catch((e) => e);
  expect([refused.status, refused.code]).toEqual([429, 'rate_limited']);
  // …another organization's is stored at once.
  const other = await w.otherOrganization();
  expect(await create(other.client)).toMatchObject({ object: 'file', filename: 'hello.txt' });
  // The stalled forms are refused after FILE_FORM_IDLE_MS without bytes, and their slots are free again.
  for (const s of stalled) expect(await s.answer).toMatchObject({ status: 400, body: { error: { code: 'invalid_body' } } });
  expect(await create()).toMatchObject({ object: 'file', filename: 'hello.txt' });
}, 30_000);
