/**
 * The OpenAI compatibility routes' crafted ids on the engine they run on in AWS (DynamoDB on dynalite,
 * behind the Lambda front): a key DynamoDB refuses (a sort key over 1,024 bytes) must never be asked
 * for, or the route answers 500 there while the local engine, which has no such bound, answers 404.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { useAwsAiFront } from '../helpers/aws-ai-front.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';

const front = useAwsAiFront('openai-compat-attack-aws');
const call = (method: string, path: string, body?: object) => front.call(method, path, body);
let embedder: FakeEmbedder;

// A vector store needs the workspace's vector database, over an embeddings route.
beforeAll(async () => {
  embedder = await startFakeEmbedder();
  await new ModelRoutes(front.engine.kv, () => Date.now()).set(front.org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
  await createVectorDatabase(front.engine, front.workspace, 'emb');
});
afterAll(async () => {
  await embedder?.close();
});

it('a vector store file id of 1,100 characters (or of characters no file id has) is 404 on every route of a file, never a 500', async () => {
  const vs = await call('POST', '/v1/vector_stores', { name: 'long ids' });
  expect(vs.status, JSON.stringify(vs.body)).toBe(200);
  for (const fileId of ['f'.repeat(1100), encodeURIComponent('é'.repeat(300))]) {
    for (const [method, path, body] of [
      ['GET', `/v1/vector_stores/${vs.body.id}/files/${fileId}`, undefined],
      ['POST', `/v1/vector_stores/${vs.body.id}/files/${fileId}`, { attributes: { a: 'b' } }],
      ['GET', `/v1/vector_stores/${vs.body.id}/files/${fileId}/content`, undefined],
      ['DELETE', `/v1/vector_stores/${vs.body.id}/files/${fileId}`, undefined],
    ] as const) {
      const r = await call(method, path, body);
      expect([r.status, r.body.error?.code], `${method} ${path.slice(0, 80)}: ${JSON.stringify(r.body)}`).toEqual([404, 'item_not_found']);
    }
  }
  const list = await call('GET', `/v1/vector_stores/${vs.body.id}/files?after=${'f'.repeat(200)}`);
  expect([list.status, list.body.error?.code]).toEqual([400, 'invalid_body']);
});
