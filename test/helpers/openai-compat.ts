/**
 * The OpenAI compatibility tests' world (issue 38): the local platform with a fake embedder (route
 * `emb`, the workspace's vector database) and a fake chat upstream (route `chat`), the official SDK
 * pointed at it unchanged, and a second organization for cross-tenant cases.
 */
import OpenAI from 'openai';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import { startFakeEmbedder, type FakeEmbedder } from './fake-embedder.js';
import { startFakeOpenAi, type FakeOpenAi } from './fake-openai.js';
import { startTestPlatform, type TestPlatform } from './platform.js';

export interface OpenAiWorld {
  p: TestPlatform;
  embedder: FakeEmbedder;
  upstream: FakeOpenAi;
  /** The SDK over the platform's AI API with the dev secret key. */
  client: OpenAI;
  /** The SDK for any other key (another organization's, an application's). */
  clientFor(key: string, options?: Partial<ConstructorParameters<typeof OpenAI>[0]>): OpenAI;
  tenants: Tenants;
  /** A second organization with a workspace, its vector database and a secret key. */
  otherOrganization(): Promise<{ organizationId: string; key: string; client: OpenAI }>;
  close(): Promise<void>;
}

/** Routes and a vector database in `organizationId`'s workspace `workspaceId` over the fakes. */
async function setUpAi(p: TestPlatform, embedder: FakeEmbedder, upstream: FakeOpenAi, organizationId: string, workspaceId: string) {
  const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
  await routes.set(organizationId, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 2_000, default: true });
  await routes.set(organizationId, { id: 'chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: upstream.baseUrl, upstream_model: 'gpt-fake', default: true });
  await createVectorDatabase(p.engine, workspaceId, 'emb');
}

export async function startOpenAiWorld(): Promise<OpenAiWorld> {
  const p = await startTestPlatform();
  const embedder = await startFakeEmbedder();
  const upstream = await startFakeOpenAi();
  await setUpAi(p, embedder, upstream, p.credentials.organization_id, p.credentials.workspace_id);
  const tenants = new Tenants(p.engine.kv, () => p.engine.clock.now());
  // organization/project null: OPENAI_ORG_ID in a developer's environment must not name another tenant.
  const clientFor = (key: string, options: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}) =>
    new OpenAI({ apiKey: key, baseURL: `${p.urls.ai}/v1`, organization: null, project: null, maxRetries: 2, ...options });
  return {
    p,
    embedder,
    upstream,
    client: clientFor(p.credentials.secret_key),
    clientFor,
    tenants,
    async otherOrganization() {
      const org = await tenants.createOrganization('other org');
      const ws = await tenants.createWorkspace(org.id, 'w');
      await setUpAi(p, embedder, upstream, org.id, ws.id);
      const { key } = await tenants.createSecretKey(org.id);
      return { organizationId: org.id, key, client: clientFor(key) };
    },
    async close() {
      await upstream.close();
      await embedder.close();
      await p.close();
    },
  };
}
