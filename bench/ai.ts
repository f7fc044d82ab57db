/**
 * The AI gateway's overhead (issue 11): latency through the AI API minus the direct latency to the
 * same loopback upstream, both measured in the same run, p50 and p99, for
 *
 *   chat        POST /v1/chat/completions, non-streamed: the whole answer;
 *   chat TTFB   the same, `stream: true`: time to the first byte of the body;
 *   embeddings  POST /v1/embeddings, two inputs;
 *
 * each sequentially (one request at a time) and at 50 concurrent calls. The upstream
 * (support/model-upstream.ts) is a process of its own, as a model server is: a node:http server
 * answering fixed bytes, at once in the sequential phase and, in the concurrent one, after a model time
 * this client draws for each call between 50 and 150 ms and writes into the request (a model takes
 * time, and not always the same: 50 calls in flight then offer about 500 calls a second, a load the
 * gateway serves, and do not all come back in the same millisecond, which would measure how a burst of
 * 50 queues instead of what the gateway adds). Every latency is measured minus its call's model time:
 * otherwise the figures would be percentiles of a 100 ms wide spread, whose median moves by a
 * millisecond from one sample of 2,500 calls to the next, more than the overhead measured. The
 * upstream's cost is the same on both paths, so the difference is the gateway: one more hop each way
 * (HTTP in and out of the gateway's process), credentials, route, validation, the idempotency record
 * (every call carries its own X-Operation-Id, as clients do), limits, usage, the upstream request.
 * Every path uses keep-alive connections from this process. Each round measures direct, bare proxy
 * (below) and gateway, in reverse order on even rounds; each figure is the median over rounds, and the
 * verdict takes the worst round.
 *
 * A third path shows this machine's floor: a bare proxy (support/bare-proxy.ts, its own process) that
 * only pipes bytes to the same upstream and back. Its overhead is the hop alone under the same load
 * (sockets, processes woken on two shared vCPUs); the gateway's overhead minus it is what the
 * gateway's own work adds. The verdict is on the gateway's overhead, floor included.
 *
 * Targets: p50 overhead at most 1 ms, p99 at most 3 ms (published on localhost: Bifrost 0.44 ms,
 * Portkey 2.37 ms, LiteLLM 4.34 ms).
 * Warm-up: V8 takes about 10,000 calls through the gateway to optimize its path (measured: in four
 * back-to-back runs of 3,000 sequential chat calls after 1,000 warm-up ones, the platform's CPU a call
 * went 1,357 → 1,107 → 967 → 810 µs, and its compiler threads from 210 µs a call to none), so the
 * gateway gets 1,000 × BENCH_WARMUP_S calls of each kind first (the direct and bare proxy paths, a
 * few functions, 1,000); otherwise round 1 measures the JIT.
 * Knobs: BENCH_ROUNDS (3), BENCH_WARMUP_S (5), BENCH_AI_KINDS (chat,ttfb,embeddings), BENCH_AI_REQUESTS
 * (sequential requests per target, 1000), BENCH_AI_CONCURRENT_S (seconds of the 50-concurrent phase, 5),
 * BENCH_PROFILE_DIR (CPU profile of the platform), BENCH_PLATFORM_NODE_ARGS (node flags for it).
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadSettings } from './support/env.js';
import { median } from './support/load.js';
import { groupCpuSeconds, makeTempDir, runScript, startServer } from './support/processes.js';
import { startLocalPlatform } from './support/platform.js';
import { fmt } from './support/table.js';
import type { Benchmark, BenchReport } from './support/types.js';

const TARGET_P50_MS = 1;
const TARGET_P99_MS = 3;
const CONCURRENCY = 50;

/** The concurrent phase's model time, drawn per call: 50 to 150 ms. */
const MODEL_MS = { min: 50, max: 150 };
/** What the upstream reads a call's model time from (none: it answers at once). */
const delayed = (text: string, delayMs: number) => (delayMs ? `${text} bench-delay-ms=${delayMs}` : text);
const CHAT_BODY = (model: string, delayMs: number) => JSON.stringify({ model, messages: [{ role: 'user', content: delayed('Say hello.', delayMs) }] });
const STREAM_BODY = (model: string, delayMs: number) => JSON.stringify({ model, messages: [{ role: 'user', content: delayed('Say hello.', delayMs) }], stream: true });
const EMBED_BODY = (model: string, delayMs: number) => JSON.stringify({ model, input: [delayed('first text', delayMs), 'second text'] });

type Kind = 'chat' | 'ttfb' | 'embeddings';
/** BENCH_AI_KINDS (comma-separated) runs some of them only, for a quicker look; the verdict needs all. */
const KINDS: Kind[] = (['chat', 'ttfb', 'embeddings'] as const).filter((k) => !process.env.BENCH_AI_KINDS || process.env.BENCH_AI_KINDS.split(',').includes(k));
type Mode = 'sequential' | 'concurrent';
type Via = 'direct' | 'bare' | 'gateway';
/** Each round runs the three in this order, or in reverse on even rounds. */
const VIAS: Via[] = ['direct', 'bare', 'gateway'];
const MODES: Mode[] = ['sequential', 'concurrent'];

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

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

export const benchmark: Benchmark = {
  name: 'ai',
  title: 'AI gateway overhead: through the AI API minus direct to the same loopback upstream',
  async run(progress): Promise<BenchReport> {
    const { rounds, warmup, profileDir } = loadSettings();
    const requests = Number(process.env.BENCH_AI_REQUESTS ?? 1000);
    const concurrentSeconds = Number(process.env.BENCH_AI_CONCURRENT_S ?? 5);
    const temp = makeTempDir('bench-ai-');
    const upstream = await startServer('model upstream', 'bench/support/model-upstream.ts', {}, /upstream http:\S+\n/);
    const origin = /upstream (http:\S+)/.exec(upstream.output())![1];
    const bare = await startServer('bare proxy', 'bench/support/bare-proxy.ts', { UPSTREAM: origin }, /bare proxy http:\S+\n/);
    const bareOrigin = /bare proxy (http:\S+)/.exec(bare.output())![1];
    let platform: Awaited<ReturnType<typeof startLocalPlatform>> | undefined;
    try {
      platform = await startLocalPlatform(temp.path, profileDir);
      const aiUrl = platform.aiUrl;
      const env = { DATA_DIR: platform.dataDir, LOG_LEVEL: 'silent' };
      const org = platform.credentials.organization_id;
      const base = `${origin}/v1`;
      const routeId = (kind: Kind) => (kind === 'embeddings' ? 'bench-embed' : 'bench-chat');
      runScript('bin/admin.ts', ['route', 'set', '--org', org, '--id', 'bench-chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', base, '--model', 'bench-model'], env);
      runScript('bin/admin.ts', ['route', 'set', '--org', org, '--id', 'bench-embed', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', base, '--model', 'bench-embed'], env);
      // Routes are cached MODEL_ROUTES_CACHE_MS (1 s) per process.
      await new Promise((r) => setTimeout(r, 1200));

      const agent = new http.Agent({ keepAlive: true, maxSockets: CONCURRENCY + 8 });
      const auth = { authorization: `Bearer ${platform.credentials.secret_key}` };
      /** A call of `kind` by `via`; resolves with its latency minus its model time. */
      const target = (kind: Kind, via: Via, mode: Mode = 'sequential') => {
        const path = kind === 'embeddings' ? '/embeddings' : '/chat/completions';
        const url = new URL(via === 'direct' ? `${base}${path}` : via === 'bare' ? `${bareOrigin}/v1${path}` : `${aiUrl}/v1${path}`);
        const model = via === 'gateway' ? routeId(kind) : 'bench-model';
        const bodyOf = kind === 'chat' ? CHAT_BODY : kind === 'ttfb' ? STREAM_BODY : EMBED_BODY;
        const headers = (): Record<string, string> => (via !== 'gateway' ? (kind === 'ttfb' ? { 'x-bench-stream': '1' } : {}) : { ...auth, 'x-operation-id': `bench-${randomUUID()}` });
        return async () => {
          const delayMs = mode === 'sequential' ? 0 : MODEL_MS.min + Math.floor(Math.random() * (MODEL_MS.max - MODEL_MS.min + 1));
          return (await timedPost(agent, url, headers(), bodyOf(model, delayMs), kind === 'ttfb')) - delayMs;
        };
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

      // Warm-up: every path and kind (JIT, connections, caches); the gateway's JIT needs many more calls.
      for (const kind of KINDS) for (const via of VIAS) await sequential(target(kind, via), via === 'gateway' ? 1000 * warmup : 1000);

      type Row = { p50: number; p99: number; cpuUs?: number };
      /** CPU µs a call of the process group serving `via` (the gateway's or the bare proxy's), read from /proc. */
      const cpuOf = (via: Via) => (via === 'gateway' ? platform!.server.pgid : via === 'bare' ? bare.pgid : undefined);
      const cpuSeconds = (pgid: number | undefined) => {
        const c = pgid === undefined ? undefined : groupCpuSeconds(pgid);
        return c ? c.user + c.system : NaN;
      };
      const results: Record<string, Record<Via, Row[]>> = {};
      // The gateway's measured windows, for a profile of one phase (profile-summary.ts).
      const phases: { name: string; startUs: number; endUs: number }[] = [];
      for (let round = 1; round <= rounds; round++) {
        for (const kind of KINDS) {
          for (const mode of MODES) {
            const key = `${kind} ${mode}`;
            results[key] ??= { direct: [], bare: [], gateway: [] };
            for (const via of round % 2 ? VIAS : [...VIAS].reverse()) {
              const startUs = monotonicUs();
              const cpu0 = cpuSeconds(cpuOf(via));
              const latencies = mode === 'sequential' ? await sequential(target(kind, via, mode), requests) : await concurrent(target(kind, via, mode), concurrentSeconds);
              const cpuUs = ((cpuSeconds(cpuOf(via)) - cpu0) * 1e6) / latencies.length;
              if (via === 'gateway') phases.push({ name: key.replace(' ', '-'), startUs, endUs: monotonicUs() });
              results[key][via].push({ p50: percentile(latencies, 50), p99: percentile(latencies, 99), cpuUs });
            }
            const d = results[key].direct.at(-1)!;
            const b = results[key].bare.at(-1)!;
            const g = results[key].gateway.at(-1)!;
            progress(
              `round ${round}/${rounds} ${key.padEnd(22)} direct ${fmt(d.p50)} / ${fmt(d.p99)}   bare proxy ${fmt(b.p50)} / ${fmt(b.p99)}   gateway ${fmt(g.p50)} / ${fmt(g.p99)} ms (p50 / p99)   overhead: gateway ${fmt(g.p50 - d.p50)} / ${fmt(g.p99 - d.p99)}, bare proxy ${fmt(b.p50 - d.p50)} / ${fmt(b.p99 - d.p99)} ms   CPU a call: gateway ${fmt(g.cpuUs!, 0)}, bare proxy ${fmt(b.cpuUs!, 0)} µs`,
            );
          }
        }
      }

      let worstP50 = -Infinity;
      let worstP99 = -Infinity;
      const rows = Object.entries(results).map(([key, r]) => {
        const over50 = r.gateway.map((g, i) => g.p50 - r.direct[i].p50);
        const over99 = r.gateway.map((g, i) => g.p99 - r.direct[i].p99);
        const floor = r.bare.map((b, i) => `${fmt(b.p50 - r.direct[i].p50)} / ${fmt(b.p99 - r.direct[i].p99)}`);
        worstP50 = Math.max(worstP50, ...over50);
        worstP99 = Math.max(worstP99, ...over99);
        return [
          key,
          `${fmt(median(r.direct.map((x) => x.p50)))} / ${fmt(median(r.direct.map((x) => x.p99)))}`,
          `${fmt(median(r.bare.map((x) => x.p50)))} / ${fmt(median(r.bare.map((x) => x.p99)))}`,
          `${fmt(median(r.gateway.map((x) => x.p50)))} / ${fmt(median(r.gateway.map((x) => x.p99)))}`,
          over50.map((x) => fmt(x)).join(', '),
          over99.map((x) => fmt(x)).join(', '),
          floor.join(', '),
          `${fmt(median(r.gateway.map((x) => x.cpuUs!)), 0)} / ${fmt(median(r.bare.map((x) => x.cpuUs!)), 0)}`,
        ];
      });
      if (profileDir) mkdirSync(profileDir, { recursive: true }), writeFileSync(join(profileDir, 'ai-phases.json'), JSON.stringify(phases));
      const pass = KINDS.length === 3 && worstP50 <= TARGET_P50_MS && worstP99 <= TARGET_P99_MS;
      return {
        tables: [
          {
            title: `latency (ms): direct to the upstream and through the AI API, ${requests} sequential requests (upstream answers at once) or ${concurrentSeconds} s at ${CONCURRENCY} concurrent (upstream answers after a model time of 50 to 150 ms, taken out of each latency), medians of ${rounds} rounds; overhead per round`,
            headers: ['call', 'direct p50 / p99', 'bare proxy p50 / p99', 'gateway p50 / p99', 'gateway overhead p50 per round', 'gateway overhead p99 per round', 'bare proxy overhead p50 / p99 per round', 'CPU µs a call: gateway / bare proxy'],
            rows,
          },
        ],
        notes: [
          'Overhead = percentile through the gateway (or the bare proxy) minus the direct percentile in the same round. Every round must meet the targets.',
          "The bare proxy only pipes bytes: its overhead is this machine's floor for one more hop under the same load.",
        ],
        verdict: { pass, summary: `overhead p50 ${fmt(worstP50)} ms worst (<= ${TARGET_P50_MS}), p99 ${fmt(worstP99)} ms worst (<= ${TARGET_P99_MS})` },
      };
    } finally {
      // Writing a long run's CPU profile takes seconds: more than the default grace before SIGKILL.
      await platform?.server.stop(profileDir ? 30_000 : undefined);
      await bare.stop();
      await upstream.stop();
      temp.remove();
    }
  },
};
