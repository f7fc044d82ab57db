/**
 * The AI gateway's overhead (issue 11): latency through the AI API minus the direct latency to the
 * same loopback upstream, both measured in the same run, p50 and p99, for
 *
 *   chat        POST /v1/chat/completions, non-streamed: the whole answer;
 *   chat TTFB   the same, `stream: true`: time to the first byte of the body;
 *   embeddings  POST /v1/embeddings, two inputs;
 *
 * each sequentially (one request at a time) and at 50 concurrent calls. The upstream is a node:http
 * server in this process answering fixed bytes, at once in the sequential phase and after a random
 * 50 to 150 ms in the concurrent one (a model takes time, and not always the same: 50 calls in flight
 * then offer about 500 calls a second, a load the gateway serves, and do not all come back in the same
 * millisecond, which would measure how a burst of 50 queues instead of what the gateway adds). Its
 * cost is the same on both paths, so the difference is the gateway: HTTP, credentials, route, validation, the idempotency record (every call
 * carries its own X-Operation-Id, as clients do), limits, usage, the upstream request. Both paths use
 * keep-alive connections from this process. Rounds alternate direct and gateway; each figure is the
 * median over rounds, and the verdict takes the worst round.
 *
 * Targets: p50 overhead at most 1 ms, p99 at most 3 ms (published on localhost: Bifrost 0.44 ms,
 * Portkey 2.37 ms, LiteLLM 4.34 ms).
 * Knobs: BENCH_ROUNDS (3), BENCH_WARMUP_S (5: warm-up requests = 200 × that, capped), BENCH_AI_REQUESTS
 * (sequential requests per target, 1000), BENCH_AI_CONCURRENT_S (seconds of the 50-concurrent phase, 5).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { loadSettings } from './support/env.js';
import { median } from './support/load.js';
import { makeTempDir, runScript } from './support/processes.js';
import { startLocalPlatform } from './support/platform.js';
import { fmt } from './support/table.js';
import type { Benchmark, BenchReport } from './support/types.js';

const TARGET_P50_MS = 1;
const TARGET_P99_MS = 3;
const CONCURRENCY = 50;
/** The concurrent phase's upstream answers after CONCURRENT_UPSTREAM_DELAY_MS ± CONCURRENT_UPSTREAM_JITTER_MS (uniform). */
const CONCURRENT_UPSTREAM_DELAY_MS = 100;
const CONCURRENT_UPSTREAM_JITTER_MS = 50;

const COMPLETION = JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1_700_000_000, model: 'bench-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the bench upstream.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
});
const CHUNK = (content: string) => `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench-model', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const STREAM = `${CHUNK('Hello')}${CHUNK(' there')}data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench-model', choices: [], usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } })}\n\ndata: [DONE]\n\n`;
const EMBEDDINGS = JSON.stringify({ object: 'list', model: 'bench-embed', data: [0, 1].map((index) => ({ object: 'embedding', index, embedding: Array.from({ length: 16 }, (_, i) => i / 16) })), usage: { prompt_tokens: 4, total_tokens: 4 } });

const CHAT_BODY = JSON.stringify({ model: 'bench-chat', messages: [{ role: 'user', content: 'Say hello.' }] });
const STREAM_BODY = JSON.stringify({ model: 'bench-chat', messages: [{ role: 'user', content: 'Say hello.' }], stream: true });
const EMBED_BODY = JSON.stringify({ model: 'bench-embed', input: ['first text', 'second text'] });

type Kind = 'chat' | 'ttfb' | 'embeddings';
const KINDS: Kind[] = ['chat', 'ttfb', 'embeddings'];

/** One POST; resolves with ms to the whole answer, or to the first body byte for `ttfb`. */
function timedPost(agent: http.Agent, url: URL, headers: Record<string, string>, body: string, firstByte: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return reject(new Error(`${url.pathname}: status ${res.statusCode}`));
      }
      let first: number | undefined;
      res.on('data', () => (first ??= performance.now() - t0));
      res.on('end', () => resolve(firstByte ? first ?? performance.now() - t0 : performance.now() - t0));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
}

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

export const benchmark: Benchmark = {
  name: 'ai',
  title: 'AI gateway overhead: through the AI API minus direct to the same loopback upstream',
  async run(progress): Promise<BenchReport> {
    const { rounds, warmup } = loadSettings();
    const requests = Number(process.env.BENCH_AI_REQUESTS ?? 1000);
    const concurrentSeconds = Number(process.env.BENCH_AI_CONCURRENT_S ?? 5);
    const temp = makeTempDir('bench-ai-');
    let upstreamDelayMs = 0;
    const upstream = http.createServer((req, res) => {
      req.resume();
      req.on('end', async () => {
        if (upstreamDelayMs) await new Promise((r) => setTimeout(r, upstreamDelayMs + (Math.random() * 2 - 1) * CONCURRENT_UPSTREAM_JITTER_MS));
        if (req.url?.endsWith('/embeddings')) return res.writeHead(200, { 'content-type': 'application/json' }).end(EMBEDDINGS);
        let streamed = false;
        // The request body is not parsed: the path and a marker header decide, as fast as a server can answer.
        if (req.headers.accept === 'text/event-stream' || req.headers['x-bench-stream'] === '1') streamed = true;
        if (streamed) return res.writeHead(200, { 'content-type': 'text/event-stream' }).end(STREAM);
        res.writeHead(200, { 'content-type': 'application/json' }).end(COMPLETION);
      });
    });
    upstream.keepAliveTimeout = 65_000;
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}/v1`;
    const platform = await startLocalPlatform(temp.path);
    try {
      const env = { DATA_DIR: platform.dataDir, LOG_LEVEL: 'silent' };
      const org = platform.credentials.organization_id;
      runScript('bin/admin.ts', ['route', 'set', '--org', org, '--id', 'bench-chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', base, '--model', 'bench-model'], env);
      runScript('bin/admin.ts', ['route', 'set', '--org', org, '--id', 'bench-embed', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', base, '--model', 'bench-embed'], env);
      // Routes are cached MODEL_ROUTES_CACHE_MS (1 s) per process.
      await new Promise((r) => setTimeout(r, 1200));

      const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY + 8 });
      const auth = { authorization: `Bearer ${platform.credentials.secret_key}` };
      const target = (kind: Kind, via: 'direct' | 'gateway') => {
        const path = kind === 'embeddings' ? '/embeddings' : '/chat/completions';
        const url = new URL(via === 'direct' ? `${base}${path}` : `${platform.aiUrl}/v1${path}`);
        const body = kind === 'chat' ? CHAT_BODY : kind === 'ttfb' ? STREAM_BODY : EMBED_BODY;
        const headers = (): Record<string, string> => (via === 'direct' ? (kind === 'ttfb' ? { 'x-bench-stream': '1' } : {}) : { ...auth, 'x-operation-id': `bench-${randomUUID()}` });
        return () => timedPost(agent, url, headers(), body, kind === 'ttfb');
      };
      const sequential = async (send: () => Promise<number>, n: number) => {
        const out: number[] = [];
        for (let i = 0; i < n; i++) out.push(await send());
        return out;
      };
      const concurrent = async (send: () => Promise<number>, seconds: number) => {
        const out: number[] = [];
        const until = performance.now() + seconds * 1000;
        await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
          while (performance.now() < until) out.push(await send());
        }));
        return out;
      };

      // Warm-up: both paths, every kind (JIT, connections, caches).
      for (const kind of KINDS) for (const via of ['direct', 'gateway'] as const) await sequential(target(kind, via), Math.min(1000, 200 * warmup));

      type Row = { p50: number; p99: number };
      const results: Record<string, { direct: Row[]; gateway: Row[] }> = {};
      for (let round = 1; round <= rounds; round++) {
        for (const kind of KINDS) {
          for (const mode of ['sequential', 'concurrent'] as const) {
            const key = `${kind} ${mode}`;
            results[key] ??= { direct: [], gateway: [] };
            for (const via of round % 2 ? (['direct', 'gateway'] as const) : (['gateway', 'direct'] as const)) {
              upstreamDelayMs = mode === 'sequential' ? 0 : CONCURRENT_UPSTREAM_DELAY_MS;
              const latencies = mode === 'sequential' ? await sequential(target(kind, via), requests) : await concurrent(target(kind, via), concurrentSeconds);
              results[key][via].push({ p50: percentile(latencies, 50), p99: percentile(latencies, 99) });
            }
            const d = results[key].direct.at(-1)!;
            const g = results[key].gateway.at(-1)!;
            progress(`round ${round}/${rounds} ${key.padEnd(22)} direct p50 ${fmt(d.p50)} / p99 ${fmt(d.p99)} ms   gateway p50 ${fmt(g.p50)} / p99 ${fmt(g.p99)} ms   overhead p50 ${fmt(g.p50 - d.p50)} / p99 ${fmt(g.p99 - d.p99)} ms`);
          }
        }
      }

      let worstP50 = -Infinity;
      let worstP99 = -Infinity;
      const rows = Object.entries(results).map(([key, r]) => {
        const over50 = r.gateway.map((g, i) => g.p50 - r.direct[i].p50);
        const over99 = r.gateway.map((g, i) => g.p99 - r.direct[i].p99);
        worstP50 = Math.max(worstP50, ...over50);
        worstP99 = Math.max(worstP99, ...over99);
        return [
          key,
          `${fmt(median(r.direct.map((x) => x.p50)))} / ${fmt(median(r.direct.map((x) => x.p99)))}`,
          `${fmt(median(r.gateway.map((x) => x.p50)))} / ${fmt(median(r.gateway.map((x) => x.p99)))}`,
          over50.map(fmt).join(', '),
          over99.map(fmt).join(', '),
        ];
      });
      const pass = worstP50 <= TARGET_P50_MS && worstP99 <= TARGET_P99_MS;
      return {
        tables: [
          {
            title: `latency (ms): direct to the upstream and through the AI API, ${requests} sequential requests (upstream answers at once) or ${concurrentSeconds} s at ${CONCURRENCY} concurrent (upstream answers after ${CONCURRENT_UPSTREAM_DELAY_MS} ± ${CONCURRENT_UPSTREAM_JITTER_MS} ms), medians of ${rounds} rounds; overhead per round`,
            headers: ['call', 'direct p50 / p99', 'gateway p50 / p99', 'overhead p50 per round', 'overhead p99 per round'],
            rows,
          },
        ],
        notes: ['Overhead = gateway percentile minus direct percentile in the same round. Every round must meet the targets.'],
        verdict: { pass, summary: `overhead p50 ${fmt(worstP50)} ms worst (<= ${TARGET_P50_MS}), p99 ${fmt(worstP99)} ms worst (<= ${TARGET_P99_MS})` },
      };
    } finally {
      await platform.server.stop();
      await new Promise((r) => upstream.close(r));
      temp.remove();
    }
  },
};
