/**
 * What knowledge jobs' tests share: an organization's default routes pointed at the fake upstreams
 * (embeddings, a transcription route priced by the minute, a chat route priced by the token) with
 * its workspace's vector database, and waiting for a job to end through its status route.
 */
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { createVectorDatabase } from '../../lambdas/vector/databases.js';
import type { FakeEmbedder } from './fake-embedder.js';
import type { FakeKnowledgeChat } from './fake-knowledge-chat.js';
import type { FakeTranscriber } from './fake-transcriber.js';
import { call, type Client } from './knowledge-calls.js';
import { waitFor } from './wait.js';

export interface JobUpstreams {
  embedder: FakeEmbedder;
  transcriber: FakeTranscriber;
  chat: FakeKnowledgeChat;
}

/** Routes `emb`, `whisper` (USD a minute: `perMinute`, 0.006) and `gpt` ($2.50 / $10 a million tokens), each the default of its endpoint, and the vector database. */
export async function setJobRoutes(engine: Engine, org: string, workspace: string, up: JobUpstreams, prices: { embeddingsPerMtok?: number; perMinute?: number } = {}): Promise<void> {
  const routes = new ModelRoutes(engine.kv, () => engine.clock.now());
  const embPrice = prices.embeddingsPerMtok === undefined ? {} : { price_in_per_mtok: prices.embeddingsPerMtok };
  await routes.set(org, { id: 'emb', endpoint: '/v1/embeddings', provider: 'openai-compatible', base_url: up.embedder.baseUrl, upstream_model: 'fake-embed', timeout_ms: 5_000, default: true, ...embPrice });
  await routes.set(org, { id: 'whisper', endpoint: '/v1/audio/transcriptions', provider: 'openai-compatible', base_url: up.transcriber.baseUrl, upstream_model: 'whisper-1', timeout_ms: 20_000, default: true, price_per_minute: prices.perMinute ?? 0.006 });
  await routes.set(org, { id: 'gpt', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: up.chat.baseUrl, upstream_model: 'gpt-fake', timeout_ms: 20_000, default: true, price_in_per_mtok: 2.5, price_out_per_mtok: 10 });
  await createVectorDatabase(engine, workspace, 'emb');
}

/** The job once `completed`, `failed` or `cancelled`, read through GET /v1/knowledge/jobs/{id}. */
export async function settledJob(c: Client, id: string, timeoutMs = 30_000): Promise<any> {
  let job: any;
  await waitFor(
    `job ${id} to end`,
    async () => {
      job = (await call(c, 'GET', `/v1/knowledge/jobs/${id}`)).body;
      return ['completed', 'failed', 'cancelled'].includes(job?.status);
    },
    timeoutMs,
    100,
  );
  return job;
}
