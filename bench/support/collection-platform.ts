/**
 * The local platform as the collections benchmark runs it: in the bench's process (as the vector
 * benchmark's HTTP row), on a fresh embedded engine, its organization's default embeddings route an
 * `openai-compatible` one pointing at the tests' fake embedder on loopback (test/helpers/fake-embedder.ts:
 * texts sharing words are close), and the workspace's vector database created on that route, as
 * `vector-db create` does. The knowledge queue's local consumer runs in the same process; the fake
 * embedder in a process of its own (fake-embedder-server.ts), as a remote upstream would.
 */
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { bootstrap } from '../../lambdas/local/bootstrap.js';
import { startPlatform } from '../../lambdas/local/platform.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { createVectorDatabase, type VectorDatabase } from '../../lambdas/vector/databases.js';
import type { Client } from '../../test/helpers/knowledge-calls.js';
import { makeTempDir, startServer, type ServerProcess } from './processes.js';

export interface CollectionPlatform {
  engine: EmbeddedEngine;
  embedder: ServerProcess;
  /** The AI API's URL and the organization's secret key. */
  client: Client;
  org: string;
  workspace: string;
  database: VectorDatabase;
  close(): Promise<void>;
}

export async function startCollectionPlatform(): Promise<CollectionPlatform> {
  const embedder = await startServer('fake embedder', 'bench/support/fake-embedder-server.ts', {}, /fake embedder at http:\S+\n/);
  const embedderUrl = /fake embedder at (http:\S+)/.exec(embedder.output())![1];
  const temp = makeTempDir('bench-collections-');
  const engine = createEmbeddedEngine({ dataDir: temp.path });
  try {
    const { credentials } = await bootstrap(engine, temp.path);
    await new ModelRoutes(engine.kv, () => engine.clock.now()).set(credentials.organization_id, {
      id: 'bench-embed',
      endpoint: '/v1/embeddings',
      provider: 'openai-compatible',
      base_url: embedderUrl,
      upstream_model: 'fake-embed',
      timeout_ms: 10_000,
      default: true,
    });
    const database = await createVectorDatabase(engine, credentials.workspace_id, 'bench-embed');
    // No access lines: the bench prints its own progress.
    if (!process.env.LOG_LEVEL) useSettings({ logLevel: 'silent' });
    const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
    return {
      engine,
      embedder,
      client: { url: platform.urls.ai, key: credentials.secret_key },
      org: credentials.organization_id,
      workspace: credentials.workspace_id,
      database,
      async close() {
        // The server's close closes the engine too.
        await platform.close();
        await embedder.stop();
        temp.remove();
      },
    };
  } catch (error) {
    await engine.close();
    await embedder.stop();
    temp.remove();
    throw error;
  }
}
