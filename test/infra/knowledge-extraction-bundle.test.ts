/**
 * The knowledge function's bundle is its own extraction child (lambdas/knowledge/extraction-pool.ts):
 * on Lambda the consumer forks the bundle it runs from with the child flag. Built as the stack builds
 * it, copied alone into an empty folder, forked as the pool forks it: it answers a document's sections
 * and chunks, and a file's failure, over IPC.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { fork, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildBundles } from '../helpers/lambda-bundles.js';
import { bundleDefines } from '../../lib/function-defaults.js';

const dir = mkdtempSync(join(tmpdir(), 'extraction-bundle-'));
let child: ChildProcess;

beforeAll(async () => {
  // The knowledge function's defines (lib/knowledge-items.ts): its environment names the table, the blob
  // bucket, the vector bucket and the queues, and it keeps the upstream keys' port.
  const environment = { TABLE_NAME: 't', BUCKET_NAME: 'b', VECTOR_BUCKET_NAME: 'v', QUEUE_URLS: '{}' };
  const entry = 'lambdas/consumers/knowledge-items.ts';
  const bundles = await buildBundles([{ key: 'knowledge-items', entry, define: bundleDefines(environment, { upstreamKeys: true }) }], join(dir, 'out'));
  // Alone in an empty folder, as Lambda holds it.
  const file = join(dir, 'task', 'index.mjs');
  mkdirSync(join(dir, 'task'));
  copyFileSync(bundles.get('knowledge-items')!.file, file);
  child = fork(file, ['--knowledge-extraction-child'], { cwd: join(dir, 'task'), serialization: 'advanced', stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { PATH: process.env.PATH ?? '/usr/bin', AWS_REGION: 'us-east-1', ...environment } });
  await new Promise<void>((resolve, reject) => {
    child.once('message', (m) => (m === 'ready' ? resolve() : reject(new Error(`first message ${JSON.stringify(m)}`))));
    child.once('exit', (code) => reject(new Error(`the bundle exited (${code})`)));
  });
}, 60_000);

afterAll(() => {
  child?.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

const ask = (job: { bytes: Uint8Array; contentType: string; filename: string }) =>
  new Promise<any>((resolve) => {
    child.once('message', resolve);
    child.send(job);
  });

it('answers a document with its sections and chunks', async () => {
  const answer = await ask({ bytes: new TextEncoder().encode('# Title\n\nSome words under the title.\n'), contentType: 'text/markdown', filename: 'a.md' });
  expect(answer.ok.sections).toEqual([{ text: 'Title\n\nSome words under the title.', locator: 'heading=Title' }]);
  expect(answer.ok.chunks).toHaveLength(1);
  expect(answer.ok.chunks[0]).toMatchObject({ chunk_id: 'chk_000000', locator: 'heading=Title' });
});

it("answers a file's failure, and goes on serving", async () => {
  expect(await ask({ bytes: new Uint8Array([0x25, 0x50, 0x44, 0x46, 0x2d, 0x31, 0x2e, 0x37, 0x0a, 0xff, 0x00]), contentType: 'application/pdf', filename: 'x.pdf' })).toEqual({ ok: { failed: 'parse_error' } });
  const again = await ask({ bytes: new TextEncoder().encode('plain words'), contentType: 'text/plain', filename: 'a.txt' });
  expect(again.ok.sections).toEqual([{ text: 'plain words', locator: 'line=1' }]);
});
