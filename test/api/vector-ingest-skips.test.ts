/**
 * The attack pass repeated on the `invalid_metadata` skips that name their key (issue 33, C8): what a
 * skip echoes of the client's body stays bounded, so an ingest's answer is still kept under its
 * X-Operation-Id (an item is at most 400 KB) and a retry replays it rather than running the ingest again.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';
import { postWithOperation } from '../helpers/ai-calls.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { createVectorDatabase, readDatabase } from '../../lambdas/vector/databases.js';

let p: TestPlatform;
let embedder: FakeEmbedder;
let key: string;
const op = () => `op-${randomUUID()}`;
const ingest = (body: object, id = op()) => postWithOperation(p.urls.ai, key, '/v1/vector/ingest', id, body);

beforeAll(async () => {
  p = await startTestPlatform();
  embedder = await startFakeEmbedder();
  key = p.credentials.secret_key;
  const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
  await routes.set(p.credentials.organization_id, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
  await createVectorDatabase(p.engine, p.credentials.workspace_id, 'emb');
});

afterAll(async () => {
  await embedder?.close();
  await p?.close();
});

describe('an invalid_metadata skip of an over-long key', () => {
  it('names the metadata, not the 48,000-character key, in param; the answer of 99 such skips is kept and replayed', async () => {
    const long = (i: number) => `${i}-`.padEnd(48_000, 'k');
    const documents = [
      { id: 'fine', text: 'a passage that is stored' },
      ...Array.from({ length: 99 }, (_, i) => ({ id: `long-${i}`, text: 'x', metadata: { [long(i)]: 'v' } })),
    ];
    const id = op();
    const first = await ingest({ scope: 'shared', documents }, id);
    expect(first.status).toBe(200);
    expect(first.body.ingested).toBe(1);
    expect(first.body.skipped).toHaveLength(99);
    // Kept: the same id again replays the answer (before, 99 keys in param made it ~4.8 MB, never kept, and the ingest ran again).
    const again = await ingest({ scope: 'shared', documents }, id);
    expect([again.status, again.headers['x-idempotent-replay'], again.text === first.text]).toEqual([200, 'true', true]);
    expect((await readDatabase(p.engine, p.credentials.workspace_id))!.passages).toBe(1);

    expect(first.body.skipped[0]).toEqual({ index: 1, id: 'long-0', reason: 'invalid_metadata', message: expect.stringContaining('is 48000 characters; a key is 1 to 64'), param: 'documents.1.metadata' });
    // The message quotes the key shortened; nothing of a skip is as long as the key.
    for (const s of first.body.skipped) expect(JSON.stringify(s).length).toBeLessThan(400);
  }, 60_000);
});
