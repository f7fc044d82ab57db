/**
 * The platform's own paths as rows of the vector benchmark (bench/vector.ts): a workspace's vector
 * database on a fresh embedded engine (created as `vector-db create` does, its embeddings route
 * pointed at the bench's loopback embedder), the data set's passages ingested through the ledger
 * (`commitPassages` in the `shared` scope, calls of 100 passages: the most an ingest call takes), then
 *   platform (no HTTP)  `searchVectors`: the index search plus the ledger's visibility reads;
 *   platform (HTTP)     `POST /v1/vector/query` on the real local server over the same engine, through
 *                       a keep-alive node:http agent; the query text `q<i>` is embedded by the loopback
 *                       embedder into the data set's query vector i: one embeddings call a query that
 *                       the library rows do not make.
 * Every platform query carries the scope filter (searchVectors adds it), so these rows take no `all`.
 * Ingest counts as done when the engine's graph holds every entry, as the adapter row's does.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { bootstrap } from '../../lambdas/local/bootstrap.js';
import { startPlatform, type RunningPlatform } from '../../lambdas/local/platform.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { createVectorDatabase, type VectorDatabase } from '../../lambdas/vector/databases.js';
import { commitPassages } from '../../lambdas/vector/ledger.js';
import { parseIngestRequest } from '../../lambdas/vector/passages.js';
import { searchVectors } from '../../lambdas/vector/query.js';
import { makeTempDir } from './processes.js';
import { fmt, fmtInt } from './table.js';
import { FILTERS, K, type FilterName, type IngestFigures, type VectorDataSet, type VectorSubject } from './vector-data.js';
import { startQueryEmbedder, type QueryEmbedder } from './vector-embedder.js';
import { settledSnapshot, type SnapshotOrigin } from './vector-snapshot.js';

/** Passages an ingest call takes at most (the API's limit); the platform's ingest row commits this many at a time. */
const PER_CALL = 100;
const PLATFORM_FILTERS: readonly FilterName[] = ['none', 'p10', 'p1'];

export interface PlatformIngestFigures extends IngestFigures {
  /** Seconds the commits took (the graph caught up later). */
  commitS?: number;
  snapshot?: SnapshotOrigin;
  /** Per filter, per query: ms in the index search, ms in the store's reads (heads, passage and document items), ms in all. */
  breakdown?: Partial<Record<FilterName, { index: number[]; store: number[]; total: number[] }>>;
}

/**
 * The engine as searchVectors sees it, timing its index searches and store reads: where a query's
 * time goes (the rest is parsing payloads and the visibility checks).
 */
function timedEngine(engine: EmbeddedEngine, spent: { index: number; store: number }): EmbeddedEngine {
  const timed =
    <A extends unknown[], R>(fn: (...args: A) => Promise<R>, into: 'index' | 'store') =>
    async (...args: A): Promise<R> => {
      const started = performance.now();
      try {
        return await fn(...args);
      } finally {
        spent[into] += performance.now() - started;
      }
    };
  const kv = Object.create(engine.kv) as EmbeddedEngine['kv'];
  kv.get = timed(engine.kv.get.bind(engine.kv), 'store');
  kv.getMany = timed(engine.kv.getMany.bind(engine.kv), 'store');
  const vectors = Object.create(engine.vectors) as EmbeddedEngine['vectors'];
  vectors.query = timed(engine.vectors.query.bind(engine.vectors), 'index');
  return { ...engine, kv, vectors };
}

export interface PlatformHttpFigures {
  /** Embeddings calls the loopback embedder answered during the HTTP row's queries. */
  embeddingsCalls?: number;
}

interface Shared {
  temp: ReturnType<typeof makeTempDir>;
  engine: EmbeddedEngine;
  /** The same engine, timing what searchVectors asks of it. */
  timed: EmbeddedEngine;
  spent: { index: number; store: number };
  database: VectorDatabase;
  embedder: QueryEmbedder;
  secretKey: string;
  platform?: RunningPlatform;
}

const position = (id: string) => Number(id.slice(1));

/** One keep-alive POST: status and body text. */
function post(agent: http.Agent, url: URL, headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

/** The two platform rows, sharing one engine and database: the first builds them, the second starts the server on them. */
export function platformSubjects(): { direct: VectorSubject & PlatformIngestFigures; overHttp: VectorSubject & PlatformHttpFigures } {
  let shared: Shared | undefined;
  let data: VectorDataSet;
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      if (!shared) return;
      // The server's close closes the engine too.
      if (shared.platform) await shared.platform.close();
      else await shared.engine.close();
      await shared.embedder.close();
      shared.temp.remove();
    })());

  const direct: VectorSubject & PlatformIngestFigures = {
    name: 'platform (no HTTP)',
    filters: PLATFORM_FILTERS,
    async setup(d, progress) {
      data = d;
      const temp = makeTempDir('bench-vector-platform-');
      const engine = createEmbeddedEngine({ dataDir: temp.path });
      const embedder = await startQueryEmbedder(d);
      const { credentials } = await bootstrap(engine, temp.path);
      await new ModelRoutes(engine.kv, () => engine.clock.now()).set(credentials.organization_id, {
        id: 'bench-embed',
        endpoint: '/v1/embeddings',
        provider: 'openai-compatible',
        base_url: embedder.baseUrl,
        upstream_model: 'bench-latent',
        timeout_ms: 10_000,
        default: true,
      });
      const database = await createVectorDatabase(engine, credentials.workspace_id, 'bench-embed');
      const spent = { index: 0, store: 0 };
      shared = { temp, engine, timed: timedEngine(engine, spent), spent, database, embedder, secretKey: credentials.secret_key };
      const started = performance.now();
      for (let from = 0; from < d.n; from += PER_CALL) {
        const documents = [];
        for (let i = from; i < Math.min(d.n, from + PER_CALL); i++) documents.push({ id: `p${i}`, text: `passage ${i}`, metadata: { tag: d.filterable(i).tag } });
        // The ingest route's own parse (skips, bytes, text hashes); the vectors stand in for its embeddings call.
        const { passages } = parseIngestRequest({ scope: 'shared', documents });
        await commitPassages(engine, database, 'shared', 'shared', passages.map((p) => ({ ...p, vector: d.vector(from + p.index) })));
        if (from === 0) await searchVectors(engine, database, { credentialId: 'bench' }, 'shared', d.query(0), K); // opens this process's view
        if (from % 20_000 === 20_000 - PER_CALL) progress(`platform: ${fmtInt(from + PER_CALL)} committed, ${fmtInt((await engine.vectors.stats(database.index)).inGraph)} in the graph`);
      }
      direct.commitS = (performance.now() - started) / 1000;
      await engine.vectors.caughtUp(database.index);
      direct.buildS = (performance.now() - started) / 1000;
      direct.insertsPerS = d.n / direct.buildS;
      progress(`platform: commits of ${PER_CALL} took ${fmt(direct.commitS)} s, the graph was whole after ${fmt(direct.buildS)} s`);
      direct.snapshot = await settledSnapshot(engine, temp.path, database.index);
    },
    async query(i, filter) {
      const { spent } = shared!;
      spent.index = spent.store = 0;
      const started = performance.now();
      const matches = await searchVectors(shared!.timed, shared!.database, { credentialId: 'bench' }, 'shared', data.query(i), K, FILTERS[filter]);
      const into = ((direct.breakdown ??= {})[filter] ??= { index: [], store: [], total: [] });
      into.total.push(performance.now() - started);
      into.index.push(spent.index);
      into.store.push(spent.store);
      return matches.map((m) => position(m.id));
    },
    close,
  };

  let agent: http.Agent;
  let url: URL;
  let embeddingsBefore = 0;
  const overHttp: VectorSubject & PlatformHttpFigures = {
    name: 'platform (HTTP)',
    filters: PLATFORM_FILTERS,
    async setup() {
      if (!shared) throw new Error('the HTTP row runs on the database the no-HTTP row built: list that one first');
      // No access lines: the bench prints its own progress.
      if (!process.env.LOG_LEVEL) useSettings({ logLevel: 'silent' });
      shared.platform = await startPlatform({ engine: shared.engine, ports: { ai: 0, data: 0, events: 0 } });
      url = new URL('/v1/vector/query', shared.platform.urls.ai);
      agent = new http.Agent({ keepAlive: true, maxSockets: 4 });
      embeddingsBefore = shared.embedder.calls;
    },
    async query(i, filter) {
      const body = JSON.stringify({ mode: 'shared', query: `q${i}`, top_k: K, filter: FILTERS[filter] });
      const answer = await post(agent, url, { authorization: `Bearer ${shared!.secretKey}`, 'x-operation-id': `bench-${randomUUID()}` }, body);
      if (answer.status !== 200) throw new Error(`POST /v1/vector/query: ${answer.status} ${answer.text.slice(0, 300)}`);
      overHttp.embeddingsCalls = shared!.embedder.calls - embeddingsBefore;
      return (JSON.parse(answer.text) as { matches: { id: string }[] }).matches.map((m) => position(m.id));
    },
    async close() {
      agent?.destroy();
      await close();
    },
  };
  return { direct, overHttp };
}
