/**
 * The local server's close with a keep-alive connection whose last answer was streamed out (a file's
 * content, a blob download): the connection is dropped at once, not kept until the client's pool
 * lets it go (undici keeps one about a minute), which held every test's `close` past its timeout.
 */
import { expect, it } from 'vitest';
import { toFile } from 'openai';
import { startOpenAiWorld } from '../helpers/openai-compat.js';

it('closes within a second after a streamed download (8 MiB: still being written when the client has read it) on a kept-alive connection', async () => {
  const w = await startOpenAiWorld();
  const file = await w.client.files.create({ file: await toFile(Buffer.alloc(8 << 20, 97), 'big.txt'), purpose: 'user_data' });
  const res = await w.client.files.content(file.id);
  expect((await res.text()).length).toBe(8 << 20);
  const started = performance.now();
  await w.close();
  expect(performance.now() - started).toBeLessThan(1_000);
}, 30_000);
