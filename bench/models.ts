/**
 * Authenticated `GET /v1/models` through the local platform (`bin/local.ts`), against a bare node:http
 * server answering the same bytes, measured in the same run. The baseline runs twice: as one process,
 * and as many node:cluster workers as the platform runs (LOCAL_WORKERS); the ratio is taken against the
 * faster of the two, so a layout never flatters us. Each server runs in its own process group; the load
 * comes from wrk (bench/support/wrk.ts says why not autocannon). Rounds alternate the targets; the
 * tables' figures are medians of the rounds.
 *
 * Ours runs with the default worker count (LOCAL_WORKERS unset: decided by measurement in
 * docs/decisions/local-runtime.md); a run with LOCAL_WORKERS set says so in its verdict.
 *
 * Target, in every round: ours >= 0.5x the faster of the two bare servers in that round (same-run
 * req/s). The verdict is PASS only if every round meets it. Each round also prints the earlier target
 * (>= 0.6, against the same baseline) for comparison with older runs; it is not part of the verdict.
 *
 * Knobs (environment): BENCH_ROUNDS (3), BENCH_WARMUP_S (5), BENCH_DURATION_S (10),
 * BENCH_CONNECTIONS (32), BENCH_PROFILE_DIR (run both servers as `node --cpu-prof --import tsx` and write
 * their profiles to platform/ and baseline/ there when they exit; profiling slows them down).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadSettings } from './support/env.js';
import { median, type LoadResult } from './support/load.js';
import { ensureWrk, wrkLoad } from './support/wrk.js';
import { localSettings } from '../lambdas/local/workers.js';
import { freePort, makeTempDir, runScript, startServer, type ServerProcess } from './support/processes.js';
import { profileArgs, startLocalPlatform } from './support/platform.js';
import { fmt, fmtInt } from './support/table.js';
import type { Benchmark, BenchReport } from './support/types.js';

/** Ours / the faster bare server, in every round. */
const TARGET_RATIO = 0.5;
/** The earlier target (ratio of medians), printed beside the current one for older runs' sake. */
const EARLIER_TARGET_RATIO = 0.6;
const verdictWord = (pass: boolean) => (pass ? 'PASS' : 'FAIL');

/** Realistic routes: one per endpoint, defaults for two. */
const ROUTES = [
  ['--id', 'fast-chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'small-chat', '--default'],
  ['--id', 'embed-small', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', 'http://127.0.0.1:9/v1', '--model', 'small-embed', '--default'],
  ['--id', 'runner', '--endpoint', '/v1/run', '--provider', 'http', '--base-url', 'http://127.0.0.1:9/run'],
];

export const benchmark: Benchmark = {
  name: 'models',
  title: 'GET /v1/models: local platform vs bare node:http',
  async run(progress): Promise<BenchReport> {
    const { rounds, warmup, duration, connections, profileDir } = loadSettings();

    const temp = makeTempDir('bench-models-');
    const dir = temp.path;
    const servers: ServerProcess[] = [];
    try {
      const platform = await startLocalPlatform(dir, profileDir);
      servers.push(platform.server);
      const { aiUrl, dataDir, credentials: creds } = platform;
      for (const args of ROUTES) runScript('bin/admin.ts', ['route', 'set', '--org', creds.organization_id, ...args], { DATA_DIR: dataDir, LOG_LEVEL: 'silent' });

      const headers = { authorization: `Bearer ${creds.secret_key}` };
      const res = await fetch(`${aiUrl}/v1/models`, { headers });
      const body = await res.text();
      if (res.status !== 200) throw new Error(`GET /v1/models answered ${res.status}: ${body}`);
      const list = JSON.parse(body) as { object: string; data: unknown[] };
      if (list.object !== 'list' || list.data.length !== ROUTES.length) throw new Error(`unexpected model list: ${body}`);
      const bodyFile = join(dir, 'models.json');
      writeFileSync(bodyFile, body);
      progress(`platform ${aiUrl}, ${list.data.length} routes, answer ${Buffer.byteLength(body)} bytes`);

      const workers = localSettings().workers;
      const baselines: { label: string; server: ServerProcess; url: string }[] = [];
      // Both layouts always, so runs with different LOCAL_WORKERS share their baselines.
      for (const n of [1, Math.max(2, workers)]) {
        const server = await startServer(
          `baseline-${n}`,
          'bench/support/baseline-server.ts',
          { BODY_FILE: bodyFile, CONTENT_TYPE: res.headers.get('content-type') ?? 'application/json', PORT: String(await freePort()), WORKERS: String(n) },
          /Baseline\s+http:/,
          { nodeArgs: profileArgs(profileDir, `baseline-${n}`) },
        );
        servers.push(server);
        const url = `${/Baseline\s+(http:\S+)/.exec(server.output())![1]}/v1/models`;
        const check = await fetch(url, { headers });
        if ((await check.text()) !== body) throw new Error('the baseline does not answer the same bytes');
        baselines.push({ label: `bare node:http, ${n === 1 ? '1 process' : `${n} workers`}`, server, url });
      }

      ensureWrk();
      const targets = [
        ...baselines.map((b) => ({ ...b, results: [] as LoadResult[] })),
        { label: `ours (bin/local.ts, ${workers === 1 ? '1 process' : `${workers} workers`})`, url: `${aiUrl}/v1/models`, server: platform.server, results: [] as LoadResult[] },
      ];
      const oursIndex = targets.length - 1;
      /** Round i (from 0): ours against the faster bare server of that same round. */
      const roundTarget = (i: number) => {
        const best = baselines.reduce((b, _, j) => (targets[j].results[i].rps > targets[b].results[i].rps ? j : b), 0);
        const ours = targets[oursIndex].results[i].rps;
        const base = targets[best].results[i].rps;
        const ratio = ours / base;
        return { ours, base, label: baselines[best].label, ratio, pass: ratio >= TARGET_RATIO };
      };
      progress(`${rounds} rounds, each target: ${warmup} s warm-up (discarded) then ${duration} s, ${connections} keep-alive connections, wrk -t1`);
      for (let round = 1; round <= rounds; round++) {
        for (const t of targets) {
          const common = { url: t.url, headers, connections, serverPgid: t.server.pgid };
          await wrkLoad({ ...common, duration: warmup });
          const r = await wrkLoad({ ...common, duration });
          t.results.push(r);
          progress(
            `round ${round}/${rounds} ${t.label.padEnd(34)} ${fmtInt(r.rps).padStart(7)} req/s  p50 ${fmt(r.latencyP50Ms, 2)} ms  p99 ${fmt(r.latencyP99Ms, 2)} ms  ` +
              `server ${fmt(r.serverCpuUsPerRequest)} µs CPU/req (${fmt(r.serverSysUsPerRequest)} in the kernel; ${fmt((r.serverCpuShare ?? NaN) * 100, 0)}% of a core), ` +
              `client ${fmt(r.clientCpuUsPerRequest)} µs/req (${fmt(r.clientCpuShare * 100, 0)}%), others ${fmt((r.othersBusy ?? NaN) * 100, 0)}%`,
          );
        }
        const r = roundTarget(round - 1);
        progress(
          `round ${round}/${rounds} target: ours ${fmtInt(r.ours)} req/s / the faster bare server (${r.label}) ${fmtInt(r.base)} req/s = ${r.ratio.toFixed(2)}, ` +
            `>= ${TARGET_RATIO} ${verdictWord(r.pass)}`,
        );
        progress(`round ${round}/${rounds} earlier target, not in the verdict: ${r.ratio.toFixed(2)} >= ${EARLIER_TARGET_RATIO} ${verdictWord(r.ratio >= EARLIER_TARGET_RATIO)}`);
      }
      // The answer after the load is still the right one.
      const after = await fetch(`${aiUrl}/v1/models`, { headers });
      if ((await after.text()) !== body) throw new Error('the platform answered differently after the load');

      const med = (t: (typeof targets)[number], f: (r: LoadResult) => number | undefined) => {
        const values = t.results.map(f).filter((v): v is number => v !== undefined);
        return values.length ? median(values) : undefined;
      };
      const rps = targets.map((t) => med(t, (r) => r.rps)!);
      const ours = rps[oursIndex];
      // The faster bare server is the one to beat.
      const bestBaseline = baselines.reduce((best, _, i) => (rps[i] > rps[best] ? i : best), 0);
      const base = rps[bestBaseline];
      const ratio = ours / base;
      const cpuRatio = (med(targets[oursIndex], (r) => r.serverCpuUsPerRequest) ?? NaN) / (med(targets[bestBaseline], (r) => r.serverCpuUsPerRequest) ?? NaN);
      const perRound = targets[oursIndex].results.map((_, i) => roundTarget(i));
      const worstRatio = Math.min(...perRound.map((r) => r.ratio));
      const pass = perRound.every((r) => r.pass);
      const localWorkers = process.env.LOCAL_WORKERS;
      const worstOthers = Math.max(0, ...targets.flatMap((t) => t.results.map((r) => r.othersBusy ?? 0)));
      const noisy = worstOthers > 0.1 ? worstOthers : 0;
      return {
        tables: [
          {
            headers: ['server', ...targets[0].results.map((_, i) => `round ${i + 1} req/s`), 'median req/s', 'p50 ms', 'p99 ms', 'server CPU µs/req', 'of which kernel', 'server CPU', 'client CPU µs/req', 'client CPU', 'others'],
            align: ['l', ...targets[0].results.map(() => 'r' as const), 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r'],
            rows: targets.map((t) => [
              t.label,
              ...t.results.map((r) => fmtInt(r.rps)),
              fmtInt(med(t, (r) => r.rps)!),
              fmt(med(t, (r) => r.latencyP50Ms), 2),
              fmt(med(t, (r) => r.latencyP99Ms), 2),
              fmt(med(t, (r) => r.serverCpuUsPerRequest)),
              fmt(med(t, (r) => r.serverSysUsPerRequest)),
              `${fmt((med(t, (r) => r.serverCpuShare) ?? NaN) * 100, 0)}%`,
              fmt(med(t, (r) => r.clientCpuUsPerRequest)),
              `${fmt(med(t, (r) => r.clientCpuShare)! * 100, 0)}%`,
              `${fmt((med(t, (r) => r.othersBusy) ?? NaN) * 100, 0)}%`,
            ]),
          },
          {
            title: `targets per round: ours / the faster bare server of the round >= ${TARGET_RATIO} (the verdict); the earlier >= ${EARLIER_TARGET_RATIO} for comparison`,
            headers: ['round', 'ours req/s', 'faster bare server', 'its req/s', 'ratio', `>= ${TARGET_RATIO}`, `earlier >= ${EARLIER_TARGET_RATIO}`],
            align: ['l', 'r', 'l', 'r', 'r', 'l', 'l'],
            rows: perRound.map((r, i) => [String(i + 1), fmtInt(r.ours), r.label, fmtInt(r.base), r.ratio.toFixed(2), verdictWord(r.pass), verdictWord(r.ratio >= EARLIER_TARGET_RATIO)]),
          },
        ],
        notes: [
          `ratio ours / the faster baseline (${targets[bestBaseline].label}), median req/s: ${ratio.toFixed(2)} (information; the target is per round)`,
          `server CPU per request, ours / that baseline: ${fmt(cpuRatio, 2)}x`,
          'server CPU: all processes of the server; client: wrk; CPU shares are of one core; others: share of the whole machine used by other processes meanwhile (noise)',
          ...(noisy ? [`warning: other processes used over 10% of the machine during some runs (up to ${fmt(noisy * 100, 0)}%); the req/s figures are noisy, CPU µs/req less so`] : []),
          `answer: ${Buffer.byteLength(body)} bytes, ${list.data.length} routes; ${connections} keep-alive connections; ${warmup} s warm-up + ${duration} s per run; medians of ${rounds} rounds`,
          ...(profileDir ? [`CPU profiles of every server process written under ${profileDir}`] : []),
        ],
        figures: [
          { name: 'req/s', value: ours },
          ...baselines.map((b, i) => ({ name: `${b.label} req/s`, value: rps[i] })),
          { name: 'ratio to the faster bare server', value: ratio, digits: 2 },
          { name: 'worst round: ratio to the faster bare server', value: worstRatio, digits: 2 },
          { name: 'server CPU µs/req', value: med(targets[oursIndex], (r) => r.serverCpuUsPerRequest) ?? NaN },
        ],
        verdict: {
          pass,
          summary:
            `ours / the faster bare server, per round: ${perRound.map((r) => r.ratio.toFixed(2)).join(', ')}; worst ${worstRatio.toFixed(2)} (target >= ${TARGET_RATIO} in every round; ` +
            `the earlier target, >= ${EARLIER_TARGET_RATIO} by medians: ${ratio.toFixed(2)} ${verdictWord(ratio >= EARLIER_TARGET_RATIO)})` +
            (localWorkers === undefined ? ', default worker count' : `; LOCAL_WORKERS=${localWorkers}, not the default worker count the target names`),
        },
      };
    } finally {
      for (const s of servers.reverse()) await s.stop();
      temp.remove();
    }
  },
};
