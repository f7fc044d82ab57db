/**
 * The AI gateway's overhead, beside Portkey's open-source gateway as a peer:
 * latency through a gateway minus the direct latency to the same loopback upstream, all measured in
 * the same run, for
 *
 *   chat        POST /v1/chat/completions, non-streamed: the whole answer;
 *   chat TTFB   the same, `stream: true`: time to the first byte of the body;
 *   embeddings  POST /v1/embeddings, two inputs;
 *
 * each in three phases:
 *
 *   sequential  one request at a time, the upstream answers at once: p50 / p99 and CPU a call;
 *   concurrent  50 calls in flight, the upstream answers after a model time (below): p50 / p99 and CPU a call;
 *   throughput  50 calls in flight, the upstream answers at once: calls a second (what the path can
 *               serve on this machine: with a model time, 50 calls in flight offer only about 500 a
 *               second, which every path serves, so calls/s there would measure the offer).
 *
 * The upstream (support/model-upstream.ts) is a process of its own, as a model server is: a node:http
 * server answering fixed bytes, at once or, in the concurrent phase, after a model time this client
 * draws for each call between 50 and 150 ms and writes into the request (a model takes time, and not
 * always the same: the calls do not all come back in the same millisecond, which would measure how a
 * burst of 50 queues instead of what the gateway adds). Every latency is measured minus its call's
 * model time: otherwise the figures would be percentiles of a 100 ms wide spread, whose median moves
 * by a millisecond from one sample of 2,500 calls to the next, more than the overhead measured. The
 * upstream's cost is the same on every path, so the difference is the gateway: one more hop each way,
 * and for the platform credentials, route, validation, the idempotency record (every call carries its
 * own X-Operation-Id, as clients do), limits, usage, the upstream request. Every path uses keep-alive
 * connections from this process, the same client code and the same bodies.
 *
 * The four paths, measured in this order in each round and in reverse order on even rounds:
 *   direct   the upstream itself (the "bare upstream" overheads are measured over);
 *   bare     a bare proxy (support/bare-proxy.ts, its own process) that only pipes bytes to the
 *            upstream and back: this machine's floor for one more hop under the same load;
 *   gateway  the platform's AI API (`bin/local.ts`, as `npm start` runs it, one worker);
 *   portkey  Portkey's open-source gateway (`@portkey-ai/gateway`, pinned in package.json; its hono
 *            packages pinned by `overrides` to the versions of Portkey's own lockfile for 1.15.2, as
 *            its Docker image ships: with newer @hono/node-server every non-streamed call but chat
 *            fails with `TypeError: immutable`, Portkey-AI/gateway#1389), started as
 *            `node node_modules/@portkey-ai/gateway/build/start-server.js --port=N --headless`, one
 *            process, and routed per call by the headers `x-portkey-provider: openai` and
 *            `x-portkey-custom-host: <upstream>/v1`, the client's Authorization passed through. It
 *            asks the upstream for any type; the upstream streams on `"stream":true` in the body.
 * CPU a call is read from /proc for the process groups of the gateway, Portkey and the bare proxy.
 *
 * Targets, in every round, for each kind:
 *   [1] sequential overhead over direct: the gateway's p50 <= 0.5 x Portkey's, p99 <= Portkey's;
 *   [2] throughput at 50 concurrent: the gateway's calls/s >= 4 x Portkey's;
 *   [3] the gateway's CPU a call <= 2.5 x the bare proxy's, sequentially and at 50 concurrent (the
 *       concurrent phase; the throughput phase's CPU a call is shown too);
 * and for chat, against this machine's floor for one more hop (the bare proxy, same round):
 *   [4] sequential overhead over direct: the gateway's p50 <= 2 x the bare proxy's;
 *   [5] throughput at 50 concurrent: the gateway's calls/s >= 0.5 x the bare proxy's.
 * Each round prints its targets with their figures, ratio and PASS or FAIL; the verdict is PASS only
 * if every counted round meets all of them ([1] to [3] for all three kinds, [4] and [5] for chat).
 *
 * Quiet rounds only: the whole machine's busy time during a round (/proc/stat) minus the CPU of the
 * processes under test (upstream, bare proxy, platform, Portkey) and of this bench's process group is
 * what other processes used. Over 10 % of the machine, the round is not counted and is run again, up
 * to 3 times; the report says how many rounds were repeated. If a round is still noisy after that,
 * its quietest run is kept, marked noisy, and the verdict is FAIL (not a valid run), whatever the figures.
 *
 * Warm-up: V8 takes about 10,000 calls through a gateway to optimize its path (measured: in four
 * back-to-back runs of 3,000 sequential chat calls after 1,000 warm-up ones, the platform's CPU a call
 * went 1,357 → 1,107 → 967 → 810 µs, and its compiler threads from 210 µs a call to none), so the
 * gateway and Portkey get 1,000 × BENCH_WARMUP_S calls of each kind first (the direct and bare proxy
 * paths, a few functions, 1,000); otherwise round 1 measures the JIT.
 * Knobs: BENCH_ROUNDS (3), BENCH_WARMUP_S (5), BENCH_AI_KINDS (chat,ttfb,embeddings), BENCH_AI_REQUESTS
 * (sequential requests per path, 1000), BENCH_AI_CONCURRENT_S (seconds of the 50-concurrent phase, 5),
 * BENCH_AI_THROUGHPUT_S (seconds of the throughput phase, as BENCH_AI_CONCURRENT_S), BENCH_AI_NOISE_PCT
 * (share of the machine other processes may use in a counted round, 10), BENCH_AI_NOISE_REPEATS (runs
 * again of a noisy round, at most, 3; 0: none), BENCH_PROFILE_DIR (CPU profile of the platform; its
 * measured windows go to ai-phases.json for support/profile-summary.ts), BENCH_PLATFORM_NODE_ARGS
 * (node flags for the platform). Full run: `BENCH_QUIET_LOAD=1 npm run bench -- ai` on a quiet machine.
 */
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { envNumber, loadSettings } from './support/env.js';
import { median } from './support/load.js';
import { clockTicks, freePort, groupCpuSeconds, machineCpu, makeTempDir, processGroupOf, ROOT, runScript, startServer, type ServerProcess } from './support/processes.js';
import { startLocalPlatform } from './support/platform.js';
import { fmt, fmtInt } from './support/table.js';
import type { Benchmark, BenchReport } from './support/types.js';

const CONCURRENCY = 50;
/** The targets: the gateway against Portkey and the bare proxy, measured in the same round. */
const TARGET = { p50VsPortkey: 0.5, p99VsPortkey: 1, throughputVsPortkey: 4, cpuVsBare: 2.5, p50VsBare: 2, throughputVsBare: 0.5 };
/** The kinds held to the floor targets [4] and [5]. */
const FLOOR_KINDS: readonly Kind[] = ['chat'];
const PORTKEY_SERVER = join(ROOT, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js');

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
type Mode = 'sequential' | 'concurrent' | 'throughput';
type Via = 'direct' | 'bare' | 'gateway' | 'portkey';
/** Each round runs the four in this order, or in reverse on even rounds. */
const VIAS: Via[] = ['direct', 'bare', 'gateway', 'portkey'];
const MODES: Mode[] = ['sequential', 'concurrent', 'throughput'];
const VIA_NAME: Record<Via, string> = { direct: 'direct', bare: 'bare proxy', gateway: 'gateway', portkey: 'Portkey' };

/** One POST; resolves with ms to the whole answer, or to the first body byte for `ttfb`. */
function timedPost(agent: http.Agent, url: URL, headers: Record<string, string>, body: string, firstByte: boolean): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume();
        return reject(new Error(`${url.origin}${url.pathname}: status ${res.statusCode}`));
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

/** One POST for the check before the warm-up: status, content type and body. */
function post(agent: http.Agent, url: URL, headers: Record<string, string>, body: string): Promise<{ status: number; type: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers: { ...headers, 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), text }));
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

type Row = { p50: number; p99: number; /** CPU µs a call of the path's process group (NaN for direct). */ cpuUs: number; /** Calls a second. */ rate: number };
/** One round's figures: `${kind} ${mode}` → path → row. */
type RoundRows = Record<string, Record<Via, Row>>;
interface Round {
  rows: RoundRows;
  /** Share of the whole machine other processes used during the round (undefined without /proc). */
  others?: number;
  /** Runs of this round, the kept one included. */
  runs: number;
  /** Still over the noise limit after the repeats: kept, but the run is not valid. */
  noisy: boolean;
}
interface KindTargets {
  kind: Kind;
  over: { gateway: { p50: number; p99: number }; portkey: { p50: number; p99: number } };
  p50: boolean;
  p99: boolean;
  throughput: { gateway: number; portkey: number; ratio: number; pass: boolean };
  cpu: { seq: { gateway: number; bare: number; ratio: number }; conc: { gateway: number; bare: number; ratio: number }; pass: boolean };
  /** [4] and [5], against the bare proxy; only for FLOOR_KINDS. */
  floor?: {
    p50: { gateway: number; bare: number; ratio: number; pass: boolean };
    throughput: { gateway: number; bare: number; ratio: number; pass: boolean };
  };
}

/**
 * An overhead's ratio to another's: with the other's not above 0, infinite when this one is above it
 * (the gateway added more than a path that added nothing), else 0.
 */
const overRatio = (g: number, p: number) => (p > 0 ? g / p : g <= p ? 0 : Infinity);

/** Targets [1] to [3] of one round for one kind. */
function targetsOf(rows: RoundRows, kind: Kind): KindTargets {
  const seq = rows[`${kind} sequential`];
  const conc = rows[`${kind} concurrent`];
  const tp = rows[`${kind} throughput`];
  const over = (via: Via) => ({ p50: seq[via].p50 - seq.direct.p50, p99: seq[via].p99 - seq.direct.p99 });
  const g = over('gateway');
  const p = over('portkey');
  const cpu = (r: Record<Via, Row>) => ({ gateway: r.gateway.cpuUs, bare: r.bare.cpuUs, ratio: r.gateway.cpuUs / r.bare.cpuUs });
  const cpuSeq = cpu(seq);
  const cpuConc = cpu(conc);
  const tpRatio = tp.gateway.rate / tp.portkey.rate;
  const b = over('bare');
  const tpVsBare = tp.gateway.rate / tp.bare.rate;
  const floor = FLOOR_KINDS.includes(kind)
    ? {
        p50: { gateway: g.p50, bare: b.p50, ratio: overRatio(g.p50, b.p50), pass: g.p50 <= TARGET.p50VsBare * b.p50 },
        throughput: { gateway: tp.gateway.rate, bare: tp.bare.rate, ratio: tpVsBare, pass: tpVsBare >= TARGET.throughputVsBare },
      }
    : undefined;
  return {
    kind,
    over: { gateway: g, portkey: p },
    p50: g.p50 <= TARGET.p50VsPortkey * p.p50,
    p99: g.p99 <= TARGET.p99VsPortkey * p.p99,
    throughput: { gateway: tp.gateway.rate, portkey: tp.portkey.rate, ratio: tpRatio, pass: tpRatio >= TARGET.throughputVsPortkey },
    cpu: { seq: cpuSeq, conc: cpuConc, pass: cpuSeq.ratio <= TARGET.cpuVsBare && cpuConc.ratio <= TARGET.cpuVsBare },
    floor,
  };
}

const floorMet = (t: KindTargets) => !t.floor || (t.floor.p50.pass && t.floor.throughput.pass);
const allMet = (t: KindTargets) => t.p50 && t.p99 && t.throughput.pass && t.cpu.pass && floorMet(t);

const verdictWord = (pass: boolean) => (pass ? 'PASS' : 'FAIL');
/** `a / b` as a ratio, "n/a" when b is not above 0 (an overhead in the noise). */
const ratioText = (a: number, b: number) => (b > 0 ? `${fmt(a / b, 2)}x` : 'n/a');
const pct = (share: number | undefined) => (share === undefined ? 'n/a' : `${fmt(share * 100)} %`);

export const benchmark: Benchmark = {
  name: 'ai',
  title: "AI gateway overhead beside Portkey's gateway: through each gateway minus direct to the same loopback upstream",
  async run(progress): Promise<BenchReport> {
    const { rounds, warmup, profileDir } = loadSettings();
    const requests = envNumber('BENCH_AI_REQUESTS', 1000);
    const concurrentSeconds = envNumber('BENCH_AI_CONCURRENT_S', 5);
    const throughputSeconds = envNumber('BENCH_AI_THROUGHPUT_S', concurrentSeconds);
    const noiseLimit = envNumber('BENCH_AI_NOISE_PCT', 10) / 100;
    const noiseRepeats = Math.max(0, Math.floor(Number(process.env.BENCH_AI_NOISE_REPEATS ?? 3)));
    const temp = makeTempDir('bench-ai-');
    const upstream = await startServer('model upstream', 'bench/support/model-upstream.ts', {}, /upstream http:\S+\n/);
    const origin = /upstream (http:\S+)/.exec(upstream.output())![1];
    let bare: ServerProcess | undefined;
    let portkey: ServerProcess | undefined;
    let platform: Awaited<ReturnType<typeof startLocalPlatform>> | undefined;
    try {
      bare = await startServer('bare proxy', 'bench/support/bare-proxy.ts', { UPSTREAM: origin }, /bare proxy http:\S+\n/);
      const bareOrigin = /bare proxy (http:\S+)/.exec(bare.output())![1];
      const portkeyPort = await freePort();
      portkey = await startServer('Portkey gateway', PORTKEY_SERVER, {}, /Ready for connections/, { plain: true, args: [`--port=${portkeyPort}`, '--headless'] });
      const portkeyOrigin = `http://127.0.0.1:${portkeyPort}`;
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
      // Portkey routes each call by its headers: the OpenAI provider at a custom host (loopback hosts are
      // trusted by default), the client's key passed through to the upstream (which ignores it).
      const portkeyHeaders = { 'x-portkey-provider': 'openai', 'x-portkey-custom-host': base, authorization: 'Bearer sk-bench' };
      const origins: Record<Via, string> = { direct: origin, bare: bareOrigin, gateway: aiUrl, portkey: portkeyOrigin };
      const request = (kind: Kind, via: Via) => {
        const url = new URL(`${origins[via]}/v1${kind === 'embeddings' ? '/embeddings' : '/chat/completions'}`);
        const model = via === 'gateway' ? routeId(kind) : 'bench-model';
        const bodyOf = kind === 'chat' ? CHAT_BODY : kind === 'ttfb' ? STREAM_BODY : EMBED_BODY;
        const headers = (): Record<string, string> =>
          via === 'gateway' ? { ...auth, 'x-operation-id': `bench-${randomUUID()}` } : via === 'portkey' ? portkeyHeaders : kind === 'ttfb' ? { 'x-bench-stream': '1' } : {};
        return { url, headers, body: (delayMs: number) => bodyOf(model, delayMs) };
      };
      /** A call of `kind` by `via`; resolves with its latency minus its model time. */
      const target = (kind: Kind, via: Via, mode: Mode = 'sequential') => {
        const { url, headers, body } = request(kind, via);
        return async () => {
          const delayMs = mode === 'concurrent' ? MODEL_MS.min + Math.floor(Math.random() * (MODEL_MS.max - MODEL_MS.min + 1)) : 0;
          return (await timedPost(agent, url, headers(), body(delayMs), kind === 'ttfb')) - delayMs;
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

      // Every path answers every kind as the upstream does (a streamed answer for TTFB, not JSON), so
      // no path is timed on an error or on another kind of answer.
      for (const kind of KINDS) {
        for (const via of VIAS) {
          const { url, headers, body } = request(kind, via);
          const r = await post(agent, url, headers(), body(0));
          const expected = kind === 'ttfb' ? /^data: .*\[DONE\]/s : kind === 'chat' ? /"chat\.completion"/ : /"embedding"/;
          if (r.status !== 200 || (kind === 'ttfb') !== r.type.startsWith('text/event-stream') || !expected.test(r.text)) {
            const server = { direct: upstream, bare, gateway: platform.server, portkey }[via];
            throw new Error(`${VIA_NAME[via]} answered a ${kind} call with ${r.status} ${r.type}: ${r.text.slice(0, 300)}\n--- ${server.name} output ---\n${server.output().slice(-2000)}`);
          }
        }
      }

      // Warm-up: every path and kind (JIT, connections, caches); the gateways' JIT needs many more calls.
      for (const kind of KINDS) for (const via of VIAS) await sequential(target(kind, via), via === 'gateway' || via === 'portkey' ? 1000 * warmup : 1000);

      /** CPU seconds so far of a process group (NaN without /proc). */
      const cpuSeconds = (pgid: number | undefined) => {
        const c = pgid === undefined ? undefined : groupCpuSeconds(pgid);
        return c ? c.user + c.system : NaN;
      };
      const groupOf: Record<Via, number | undefined> = { direct: undefined, bare: bare.pgid, gateway: platform.server.pgid, portkey: portkey.pgid };
      // Ours: the processes under test and this bench's own group (npm, tsx and this process).
      const ownGroup = processGroupOf();
      const ourGroups = [upstream.pgid, bare.pgid, platform.server.pgid, portkey.pgid, ...(ownGroup === undefined ? [] : [ownGroup])];
      const ourSeconds = () => ourGroups.reduce((sum, g) => sum + (cpuSeconds(g) || 0), 0);
      const ticksPerSecond = clockTicks();

      const measure = async (kind: Kind, via: Via, mode: Mode): Promise<Row> => {
        const send = target(kind, via, mode);
        const cpu0 = cpuSeconds(groupOf[via]);
        const t0 = performance.now();
        const latencies = mode === 'sequential' ? await sequential(send, requests) : await concurrent(send, mode === 'throughput' ? throughputSeconds : concurrentSeconds);
        const seconds = (performance.now() - t0) / 1000;
        const cpuUs = ((cpuSeconds(groupOf[via]) - cpu0) * 1e6) / latencies.length;
        return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), cpuUs, rate: latencies.length / seconds };
      };

      // The gateway's measured windows, for a profile of one phase (profile-summary.ts).
      const phases: { name: string; startUs: number; endUs: number }[] = [];
      const runRound = async (round: number, run: number): Promise<Omit<Round, 'runs' | 'noisy'>> => {
        const label = `round ${round}/${rounds}${run > 1 ? ` (run ${run})` : ''}`;
        const machine0 = machineCpu();
        const ours0 = ourSeconds();
        const rows: RoundRows = {};
        for (const kind of KINDS) {
          for (const mode of MODES) {
            const key = `${kind} ${mode}`;
            const r = {} as Record<Via, Row>;
            for (const via of round % 2 ? VIAS : [...VIAS].reverse()) {
              const startUs = monotonicUs();
              r[via] = await measure(kind, via, mode);
              if (via === 'gateway') phases.push({ name: key.replace(' ', '-'), startUs, endUs: monotonicUs() });
            }
            rows[key] = r;
            const lat = (via: Via) => `${fmt(r[via].p50)} / ${fmt(r[via].p99)}`;
            const over = (via: Via) => `${fmt(r[via].p50 - r.direct.p50)} / ${fmt(r[via].p99 - r.direct.p99)}`;
            const cpu = `CPU a call: gateway ${fmt(r.gateway.cpuUs, 0)}, Portkey ${fmt(r.portkey.cpuUs, 0)}, bare proxy ${fmt(r.bare.cpuUs, 0)} µs`;
            progress(
              mode === 'throughput'
                ? `${label} ${key.padEnd(22)} calls/s: direct ${fmtInt(r.direct.rate)}, bare proxy ${fmtInt(r.bare.rate)}, gateway ${fmtInt(r.gateway.rate)}, Portkey ${fmtInt(r.portkey.rate)}   ${cpu}`
                : `${label} ${key.padEnd(22)} p50 / p99 ms: direct ${lat('direct')}, bare proxy ${lat('bare')}, gateway ${lat('gateway')}, Portkey ${lat('portkey')}   overhead: gateway ${over('gateway')}, Portkey ${over('portkey')}, bare proxy ${over('bare')}   ${cpu}`,
            );
          }
        }
        const machine1 = machineCpu();
        const ours = ourSeconds() - ours0;
        if (!machine0 || !machine1 || !Number.isFinite(ours)) return { rows };
        const total = machine1.total - machine0.total;
        const busy = (machine1.busy - machine0.busy) / total;
        const oursShare = (ours * ticksPerSecond) / total;
        const others = Math.max(0, busy - oursShare);
        progress(`${label}: the machine was ${pct(busy)} busy, the processes under test and this bench ${pct(oursShare)}, other processes ${pct(others)}`);
        return { rows, others };
      };

      const kept: Round[] = [];
      let repeated = 0;
      for (let round = 1; round <= rounds; round++) {
        let best: Omit<Round, 'runs' | 'noisy'> | undefined;
        let runs = 0;
        for (;;) {
          runs++;
          const r = await runRound(round, runs);
          if (!best || (r.others ?? 0) < (best.others ?? 0)) best = r;
          if (r.others === undefined || r.others <= noiseLimit) {
            best = r;
            break;
          }
          if (runs > noiseRepeats) {
            progress(`round ${round}/${rounds}: other processes used ${pct(r.others)} of the machine (limit ${pct(noiseLimit)}) in all ${runs} runs: keeping the quietest (${pct(best.others)}), marked noisy; this run is not valid`);
            break;
          }
          repeated++;
          progress(`round ${round}/${rounds}: other processes used ${pct(r.others)} of the machine (limit ${pct(noiseLimit)}): not counted, run again (repeat ${runs} of at most ${noiseRepeats})`);
        }
        const noisy = best.others !== undefined && best.others > noiseLimit;
        kept.push({ ...best, runs, noisy });
        const targets = KINDS.map((kind) => targetsOf(best!.rows, kind));
        progress(`round ${round}/${rounds} targets (other processes used ${pct(best.others)} of the machine${noisy ? ', NOISY: not valid' : ''}):`);
        for (const t of targets) {
          progress(
            `  ${t.kind.padEnd(10)} [1] sequential overhead p50 ${fmt(t.over.gateway.p50, 2)} ms vs Portkey's ${fmt(t.over.portkey.p50, 2)} (${ratioText(t.over.gateway.p50, t.over.portkey.p50)}, <= ${TARGET.p50VsPortkey}x) ${verdictWord(t.p50)}, ` +
              `p99 ${fmt(t.over.gateway.p99, 2)} vs ${fmt(t.over.portkey.p99, 2)} (${ratioText(t.over.gateway.p99, t.over.portkey.p99)}, <= ${TARGET.p99VsPortkey}x) ${verdictWord(t.p99)}`,
          );
          progress(`  ${''.padEnd(10)} [2] throughput at ${CONCURRENCY} concurrent ${fmtInt(t.throughput.gateway)} calls/s vs Portkey's ${fmtInt(t.throughput.portkey)} (${fmt(t.throughput.ratio, 2)}x, >= ${TARGET.throughputVsPortkey}x) ${verdictWord(t.throughput.pass)}`);
          progress(
            `  ${''.padEnd(10)} [3] CPU a call vs the bare proxy: sequential ${fmt(t.cpu.seq.gateway, 0)} / ${fmt(t.cpu.seq.bare, 0)} µs (${fmt(t.cpu.seq.ratio, 2)}x), ` +
              `${CONCURRENCY} concurrent ${fmt(t.cpu.conc.gateway, 0)} / ${fmt(t.cpu.conc.bare, 0)} µs (${fmt(t.cpu.conc.ratio, 2)}x), <= ${TARGET.cpuVsBare}x ${verdictWord(t.cpu.pass)}`,
          );
          if (t.floor) {
            const f = t.floor;
            progress(
              `  ${''.padEnd(10)} [4] sequential overhead p50 ${fmt(f.p50.gateway, 2)} ms vs the bare proxy's ${fmt(f.p50.bare, 2)} (${ratioText(f.p50.gateway, f.p50.bare)}, <= ${TARGET.p50VsBare}x) ${verdictWord(f.p50.pass)}`,
            );
            progress(
              `  ${''.padEnd(10)} [5] throughput at ${CONCURRENCY} concurrent ${fmtInt(f.throughput.gateway)} calls/s vs the bare proxy's ${fmtInt(f.throughput.bare)} (${fmt(f.throughput.ratio, 2)}x, >= ${TARGET.throughputVsBare}x) ${verdictWord(f.throughput.pass)}`,
            );
          }
        }
        const floored = targets.filter((t) => t.floor);
        progress(
          `round ${round}/${rounds}: [1] sequential overhead vs Portkey ${verdictWord(targets.every((t) => t.p50 && t.p99))}, [2] throughput vs Portkey ${verdictWord(targets.every((t) => t.throughput.pass))}, ` +
            `[3] CPU vs the bare proxy ${verdictWord(targets.every((t) => t.cpu.pass))}` +
            (floored.length
              ? `, [4] ${floored.map((t) => t.kind).join(', ')} overhead p50 vs the bare proxy ${verdictWord(floored.every((t) => t.floor!.p50.pass))}, ` +
                `[5] ${floored.map((t) => t.kind).join(', ')} throughput vs the bare proxy ${verdictWord(floored.every((t) => t.floor!.throughput.pass))}`
              : '') +
            (noisy ? ' (noisy round: not valid)' : ''),
        );
      }

      // Tables: medians over the counted rounds, and each round's figure where a target reads it.
      const keys = KINDS.flatMap((kind) => MODES.map((mode) => `${kind} ${mode}`));
      const perRound = (key: string, f: (r: Record<Via, Row>) => string) => kept.map((k) => f(k.rows[key])).join(', ');
      const med = (key: string, via: Via, f: (row: Row) => number) => median(kept.map((k) => f(k.rows[key][via])));
      const latencyRows = keys
        .filter((key) => !key.endsWith('throughput'))
        .map((key) => [
          key,
          ...VIAS.map((via) => `${fmt(med(key, via, (x) => x.p50))} / ${fmt(med(key, via, (x) => x.p99))}`),
          perRound(key, (r) => `${fmt(r.gateway.p50 - r.direct.p50)} / ${fmt(r.gateway.p99 - r.direct.p99)}`),
          perRound(key, (r) => `${fmt(r.portkey.p50 - r.direct.p50)} / ${fmt(r.portkey.p99 - r.direct.p99)}`),
          perRound(key, (r) => `${fmt(r.bare.p50 - r.direct.p50)} / ${fmt(r.bare.p99 - r.direct.p99)}`),
        ]);
      const throughputRows = KINDS.map((kind) => {
        const key = `${kind} throughput`;
        return [
          kind,
          ...VIAS.map((via) => fmtInt(med(key, via, (x) => x.rate))),
          perRound(key, (r) => `${fmt(r.gateway.rate / r.portkey.rate, 2)}x`),
          perRound(key, (r) => `${fmt(r.gateway.rate / r.bare.rate, 2)}x`),
        ];
      });
      const cpuRows = keys.map((key) => [
        key,
        ...(['gateway', 'portkey', 'bare'] as const).map((via) => fmt(med(key, via, (x) => x.cpuUs), 0)),
        perRound(key, (r) => `${fmt(r.gateway.cpuUs / r.bare.cpuUs, 2)}x`),
        perRound(key, (r) => `${fmt(r.gateway.cpuUs / r.portkey.cpuUs, 2)}x`),
      ]);
      const all = kept.flatMap((k, i) => KINDS.map((kind) => ({ round: i + 1, noisy: k.noisy, others: k.others, t: targetsOf(k.rows, kind) })));
      const targetRows = all.map(({ round, noisy, others, t }) => [
        `${round}${noisy ? ' (noisy)' : ''}`,
        t.kind,
        pct(others),
        `${ratioText(t.over.gateway.p50, t.over.portkey.p50)} ${verdictWord(t.p50)}`,
        `${ratioText(t.over.gateway.p99, t.over.portkey.p99)} ${verdictWord(t.p99)}`,
        `${fmt(t.throughput.ratio, 2)}x ${verdictWord(t.throughput.pass)}`,
        `${fmt(t.cpu.seq.ratio, 2)}x / ${fmt(t.cpu.conc.ratio, 2)}x ${verdictWord(t.cpu.pass)}`,
        t.floor ? `${ratioText(t.floor.p50.gateway, t.floor.p50.bare)} ${verdictWord(t.floor.p50.pass)}` : '-',
        t.floor ? `${fmt(t.floor.throughput.ratio, 2)}x ${verdictWord(t.floor.throughput.pass)}` : '-',
      ]);
      if (profileDir) mkdirSync(profileDir, { recursive: true }), writeFileSync(join(profileDir, 'ai-phases.json'), JSON.stringify(phases));

      // The worst round's ratios (overRatio: an overhead against one not above 0 is infinite).
      const worst = (f: (t: KindTargets) => number, pick: (...v: number[]) => number = Math.max) => pick(...all.map((a) => f(a.t)));
      const floors = all.flatMap(({ t }) => (t.floor ? [t.floor] : []));
      const floorKinds = KINDS.filter((k) => FLOOR_KINDS.includes(k));
      const noisyRounds = kept.filter((k) => k.noisy).length;
      const targetsMet = all.every(({ t }) => allMet(t));
      const pass = KINDS.length === 3 && noisyRounds === 0 && targetsMet;
      const summary =
        `worst round: sequential overhead p50 ${fmt(worst((t) => overRatio(t.over.gateway.p50, t.over.portkey.p50)), 2)}x Portkey's (<= ${TARGET.p50VsPortkey}), ` +
        `p99 ${fmt(worst((t) => overRatio(t.over.gateway.p99, t.over.portkey.p99)), 2)}x (<= ${TARGET.p99VsPortkey}); ` +
        `throughput ${fmt(worst((t) => t.throughput.ratio, Math.min), 2)}x Portkey's (>= ${TARGET.throughputVsPortkey}); ` +
        `CPU a call ${fmt(worst((t) => t.cpu.seq.ratio), 2)}x / ${fmt(worst((t) => t.cpu.conc.ratio), 2)}x the bare proxy's (<= ${TARGET.cpuVsBare}); ` +
        (floors.length
          ? `${floorKinds.join(', ')}: sequential overhead p50 ${fmt(Math.max(...floors.map((f) => f.p50.ratio)), 2)}x the bare proxy's (<= ${TARGET.p50VsBare}), ` +
            `throughput ${fmt(Math.min(...floors.map((f) => f.throughput.ratio)), 2)}x the bare proxy's (>= ${TARGET.throughputVsBare}); `
          : '') +
        `${repeated} round${repeated === 1 ? '' : 's'} repeated for noise` +
        (noisyRounds ? `, ${noisyRounds} still noisy (run not valid)` : '') +
        (KINDS.length < 3 ? '; not all kinds run (BENCH_AI_KINDS): no verdict' : '');
      return {
        tables: [
          {
            title: `latency (ms): ${requests} sequential requests (upstream answers at once) or ${concurrentSeconds} s at ${CONCURRENCY} concurrent (upstream answers after a model time of 50 to 150 ms, taken out of each latency); medians of ${kept.length} kept rounds, overhead over direct per round`,
            headers: ['call', ...VIAS.map((v) => `${VIA_NAME[v]} p50 / p99`), 'gateway overhead per round', 'Portkey overhead per round', 'bare proxy overhead per round'],
            rows: latencyRows,
          },
          {
            title: `throughput (calls/s): ${throughputSeconds} s at ${CONCURRENCY} concurrent, upstream answers at once; medians of ${kept.length} rounds`,
            headers: ['call', ...VIAS.map((v) => VIA_NAME[v]), 'gateway / Portkey per round', 'gateway / bare proxy per round'],
            rows: throughputRows,
          },
          {
            title: 'CPU µs a call (the process group, every thread, from /proc); medians of the rounds',
            headers: ['call', 'gateway', 'Portkey', 'bare proxy', 'gateway / bare proxy per round', 'gateway / Portkey per round'],
            rows: cpuRows,
          },
          {
            title:
              `targets per round: [1] sequential overhead over direct, gateway / Portkey: p50 <= ${TARGET.p50VsPortkey}x, p99 <= ${TARGET.p99VsPortkey}x; [2] throughput at ${CONCURRENCY} concurrent >= ${TARGET.throughputVsPortkey}x Portkey's; ` +
              `[3] CPU a call <= ${TARGET.cpuVsBare}x the bare proxy's, sequential / ${CONCURRENCY} concurrent; ${FLOOR_KINDS.join(', ')} only: [4] sequential overhead p50 <= ${TARGET.p50VsBare}x the bare proxy's; ` +
              `[5] throughput at ${CONCURRENCY} concurrent >= ${TARGET.throughputVsBare}x the bare proxy's`,
            headers: ['round', 'call', 'others', '[1] p50', '[1] p99', '[2] throughput', '[3] CPU seq / conc', '[4] p50 vs bare', '[5] throughput vs bare'],
            rows: targetRows,
          },
        ],
        notes: [
          'Overhead = percentile through a gateway (or the bare proxy) minus the direct percentile in the same round. Every counted round must meet the targets.',
          "The bare proxy only pipes bytes: its overhead is this machine's floor for one more hop under the same load.",
          `Noise: ${repeated} round${repeated === 1 ? '' : 's'} repeated (other processes over ${pct(noiseLimit)} of the machine; at most ${noiseRepeats} repeats a round); others per counted round: ${kept.map((k) => pct(k.others)).join(', ')}${noisyRounds ? `; ${noisyRounds} kept still noisy: the run is not valid` : ''}.`,
        ],
        figures: KINDS.flatMap((kind) => [
          { name: `${kind}: gateway calls/s at ${CONCURRENCY}`, value: med(`${kind} throughput`, 'gateway', (x) => x.rate) },
          { name: `${kind}: Portkey calls/s at ${CONCURRENCY}`, value: med(`${kind} throughput`, 'portkey', (x) => x.rate) },
          { name: `${kind}: bare proxy calls/s at ${CONCURRENCY}`, value: med(`${kind} throughput`, 'bare', (x) => x.rate) },
          { name: `${kind}: gateway sequential overhead p50 ms`, value: med(`${kind} sequential`, 'gateway', (x) => x.p50) - med(`${kind} sequential`, 'direct', (x) => x.p50), digits: 2 },
          { name: `${kind}: Portkey sequential overhead p50 ms`, value: med(`${kind} sequential`, 'portkey', (x) => x.p50) - med(`${kind} sequential`, 'direct', (x) => x.p50), digits: 2 },
          { name: `${kind}: bare proxy sequential overhead p50 ms`, value: med(`${kind} sequential`, 'bare', (x) => x.p50) - med(`${kind} sequential`, 'direct', (x) => x.p50), digits: 2 },
          { name: `${kind}: gateway CPU µs a call at ${CONCURRENCY}`, value: med(`${kind} concurrent`, 'gateway', (x) => x.cpuUs) },
          { name: `${kind}: bare proxy CPU µs a call at ${CONCURRENCY}`, value: med(`${kind} concurrent`, 'bare', (x) => x.cpuUs) },
        ]),
        verdict: { pass, summary },
      };
    } finally {
      // Writing a long run's CPU profile takes seconds: more than the default grace before SIGKILL.
      await platform?.server.stop(profileDir ? 30_000 : undefined);
      await portkey?.stop();
      await bare?.stop();
      await upstream.stop();
      temp.remove();
    }
  },
};
