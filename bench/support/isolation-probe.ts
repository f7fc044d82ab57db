/**
 * The isolation benchmark's probe (bench/isolation.ts): the victim organization's simple vector query
 * (`POST /v1/vector/query`, mode shared, top_k 10) sent at a fixed rate, open loop (each at its time,
 * whether or not the last one answered), over keep-alive connections (at most `sockets`; a request
 * that finds both busy waits in the agent, and that wait is part of its latency). Every answer is
 * kept with the time it was sent: a phase's figures are the samples sent inside its window.
 *
 * The probe runs in a process of its own (this file, forked with `--probe-child`), as the victim's
 * client would run on its own machine: in the bench's process, A's flood client (200 KB bodies sent
 * four at a time) held the same event loop, and its work showed up as the victim's latency.
 */
import http from 'node:http';
import { fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';

export interface Sample {
  /** performance.now() when it was sent. */
  at: number;
  ms: number;
  status: number;
  /** A transport error (ECONNRESET, a timeout...) instead of an answer. */
  error?: string;
  /** The answer's x-request-id (the server's access line names it). */
  requestId?: string;
  /** An answer other than 200: its error code (`error.code` of the body), to say what failed. */
  code?: string;
}

export interface Probe {
  samples: Sample[];
  /** Stops sending; resolves once every request sent has answered or failed. */
  stop(): Promise<void>;
}

const TIMEOUT_MS = 60_000;

export interface ProbeOptions {
  url: string;
  key: string;
  queries: string[];
  ratePerS: number;
  sockets: number;
}

/**
 * Starts the probe in a child process; its samples arrive here as they complete, with `at` on this
 * process's performance.now() clock (both clocks read from the same wall-clock origin).
 */
export function startProbe(opts: ProbeOptions): Probe {
  const child = fork(import.meta.filename, ['--probe-child'], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const samples: Sample[] = [];
  const stopped = new Promise<void>((resolve, reject) => {
    child.on('message', (m: { sample?: Sample; stopped?: true }) => {
      if (m.sample) samples.push({ ...m.sample, at: m.sample.at - performance.timeOrigin });
      if (m.stopped) resolve();
    });
    child.on('exit', (code) => (code ? reject(new Error(`the probe exited with ${code}`)) : resolve()));
  });
  child.send({ start: opts });
  return {
    samples,
    async stop() {
      child.send({ stop: true });
      await stopped;
      child.disconnect();
    },
  };
}

if (process.argv.includes('--probe-child')) {
  // The bench gone (stopped, crashed): so is its probe, rather than querying on forever.
  process.once('disconnect', () => process.exit(0));
  process.once('message', (m: { start: ProbeOptions }) => {
    const probe = probeLoop(m.start, (sample) => process.send!({ sample: { ...sample, at: sample.at + performance.timeOrigin } }));
    process.once('message', async () => {
      await probe.stop();
      process.send!({ stopped: true }, () => process.exit(0));
    });
  });
}

/** The probe's loop in this process; `onSample` gets each answer as it completes. */
function probeLoop(opts: ProbeOptions, onSample: (sample: Sample) => void): Probe {
  const agent = new http.Agent({ keepAlive: true, maxSockets: opts.sockets });
  const target = new URL('/v1/vector/query', opts.url);
  const samples: Sample[] = [];
  const pending = new Set<Promise<void>>();
  let n = 0;
  const interval = 1000 / opts.ratePerS;
  const started = performance.now();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const send = () => {
    const body = JSON.stringify({ mode: 'shared', query: opts.queries[n++ % opts.queries.length], top_k: 10 });
    const at = performance.now();
    const done = new Promise<void>((resolve) => {
      let requestId: string | undefined;
      let text = '';
      const finish = (status: number, error?: string) => {
        let code: string | undefined;
        if (status !== 200 && text) code = /"code"\s*:\s*"([^"]+)"/.exec(text)?.[1] ?? text.slice(0, 60);
        const sample: Sample = { at, ms: performance.now() - at, status, ...(error ? { error } : {}), ...(requestId ? { requestId } : {}), ...(code ? { code } : {}) };
        samples.push(sample);
        onSample(sample);
        resolve();
      };
      const req = http.request(
        {
          host: target.hostname,
          port: target.port,
          path: target.pathname,
          method: 'POST',
          agent,
          timeout: TIMEOUT_MS,
          headers: {
            authorization: `Bearer ${opts.key}`,
            'x-operation-id': `probe-${randomUUID()}`,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          requestId = res.headers['x-request-id'] as string | undefined;
          // Only a failed answer's body is kept (its error code); a 200's is drained unread.
          if (res.statusCode === 200) res.resume();
          else res.on('data', (d: Buffer) => (text += d.toString()).length > 2000 && (text = text.slice(0, 2000)));
          res.on('end', () => finish(res.statusCode ?? 0));
          res.on('error', (e: NodeJS.ErrnoException) => finish(res.statusCode ?? 0, e.code ?? e.message));
        },
      );
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
      req.on('error', (e: NodeJS.ErrnoException) => finish(0, e.code ?? e.message));
      req.end(body);
    });
    pending.add(done);
    void done.then(() => pending.delete(done));
  };

  // Each send at its own time on the schedule (started + k * interval): a late tick does not shift the rest.
  let k = 0;
  const tick = () => {
    if (stopped) return;
    const now = performance.now();
    while (started + k * interval <= now) {
      send();
      k++;
    }
    timer = setTimeout(tick, Math.max(0, started + k * interval - performance.now()));
  };
  tick();

  return {
    samples,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      while (pending.size) await Promise.all([...pending]);
      agent.destroy();
    },
  };
}

export const percentile = (values: number[], p: number) => {
  if (!values.length) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

export interface WindowFigures {
  n: number;
  p50: number;
  p99: number;
  max: number;
  /** Answers 500 and above. */
  fivexx: number;
  /** Other answers than 200 below 500 (a 429 would show here). */
  other: number;
  /** Transport errors by code (ECONNRESET, TIMEOUT...). */
  errors: Record<string, number>;
  /** Answers other than 200 by status and error code ("503 service_unavailable"). */
  failures: Record<string, number>;
}

/** The figures of the samples sent in [from, to). */
export function windowFigures(samples: Sample[], from: number, to: number): WindowFigures {
  const inside = samples.filter((s) => s.at >= from && s.at < to);
  const answered = inside.filter((s) => !s.error);
  const errors: Record<string, number> = {};
  const failures: Record<string, number> = {};
  for (const s of inside) if (s.error) errors[s.error] = (errors[s.error] ?? 0) + 1;
  for (const s of answered) if (s.status !== 200) failures[`${s.status} ${s.code ?? ''}`.trim()] = (failures[`${s.status} ${s.code ?? ''}`.trim()] ?? 0) + 1;
  const ms = inside.map((s) => s.ms);
  return {
    n: inside.length,
    p50: percentile(ms, 50),
    p99: percentile(ms, 99),
    max: ms.length ? Math.max(...ms) : NaN,
    fivexx: answered.filter((s) => s.status >= 500).length,
    other: answered.filter((s) => s.status !== 200 && s.status < 500).length,
    errors,
    failures,
  };
}
