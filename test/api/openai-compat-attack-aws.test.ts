/**
 * The OpenAI compatibility routes' crafted ids on the engine they run on in AWS (DynamoDB on dynalite,
 * behind the Lambda front): a key DynamoDB refuses (a sort key over 1,024 bytes) must never be asked
 * for, or the route answers 500 there while the local engine, which has no such bound, answers 404.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Engine } from '../../lambdas/engine/ports.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { startLambdaFront, type LambdaFront } from '../helpers/lambda-front.js';
import { startFakeEmbedder, type FakeEmbedder } from '../helpers/fake-embedder.js';

let engine: Engine;
let gateway: LambdaFront;
let key: string;
let embedder: FakeEmbedder;

beforeAll(async () => {
  process.env.LOG_LEVEL = 'silent';
  embedder = await startFakeEmbedder();
  engine = (await startAwsDataEngine('openai-compat-attack-aws')).engine;
  useEngine(engine);
  const tenants = new Tenants(engine.kv, () => Date.now());
  const org = (await tenants.createOrganization('compat')).id;
  const workspace = (await tenants.createWorkspace(org, 'main')).id;
  await new ModelRoutes(engine.kv, () => Date.now()).set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
  await createVectorDatabase(engine, workspace, 'emb');
  key = (await tenants.createSecretKey(org)).key;
  gateway = await startLambdaFront('ai');
}, 60_000);

afterAll(async () => {
  await gateway?.close();
  await engine?.close();
  await embedder?.close();
});

async function call(method: string, path: string, body?: object) {
  const res = await fetch(gateway.url + path, { method, body: body && JSON.stringify(body), headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) } });
  return { status: res.status, body: (await res.json()) as any };
}

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
