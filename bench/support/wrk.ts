/**
 * The load generator for ratio benchmarks: wrk (C, one thread), not autocannon. A ratio only says
 * something about the servers while the load generator is not the bottleneck: autocannon spent a whole
 * core on the bare node:http baseline (98%), so the baseline figure measured autocannon, and on this
 * two-core machine it took the CPU the servers under test need. wrk spends about a third as much per
 * request (measured; docs/benchmarks.md). It comes from Debian's package, installed on first use.
 *
 * wrk does not check bodies: the benchmark checks the answer before and after the runs, and any
 * answer other than 2xx, or any socket error, fails the run.
 */
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { clockTicks, ROOT } from './processes.js';
import { cpuWindow, type LoadResult } from './load.js';

const WRK = '/usr/bin/wrk';

export function ensureWrk(): void {
  if (existsSync(WRK)) return;
  execFileSync('bash', [join(ROOT, 'scripts', 'ensure-debian-package.sh'), WRK, 'wrk'], { stdio: 'inherit' });
}

export interface WrkOptions {
  url: string;
  headers?: Record<string, string>;
  connections: number;
  /** Seconds. */
  duration: number;
  /** Process group of the server under load, to measure its CPU time. */
  serverPgid?: number;
}

/** Runs wrk once; its own CPU time is read as the children time of the shell that waited for it. */
export async function wrkLoad(options: WrkOptions): Promise<LoadResult> {
  ensureWrk();
  const headerArgs = Object.entries(options.headers ?? {}).flatMap(([k, v]) => ['-H', `${k}: ${v}`]);
  const args = ['-t1', `-c${options.connections}`, `-d${options.duration}s`, '--latency', ...headerArgs, options.url];
  const quoted = args.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(' ');
  // `cat /proc/$$/stat` after wrk exits: fields 16 and 17 (cutime, cstime) are wrk's CPU ticks.
  const script = `${WRK} ${quoted}; status=$?; echo "@@stat $(cat /proc/$$/stat)"; exit $status`;

  const measured = cpuWindow(options.serverPgid);
  const output = await new Promise<string>((resolve, reject) => {
    const child = spawn('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`wrk exited ${code}: ${out}`))));
  });
  const requests = Number(/(\d+) requests in ([\d.]+)s/.exec(output)?.[1]);
  const seconds = Number(/(\d+) requests in ([\d.]+)s/.exec(output)?.[2]);
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(output)?.[1] ?? 0);
  const socketErrors = /Socket errors: (.*)/.exec(output)?.[1];
  const problems = [
    !Number.isFinite(requests) && 'no request count in its output',
    non2xx && `${non2xx} answers that were not 2xx`,
    socketErrors && `socket errors: ${socketErrors}`,
  ].filter(Boolean);
  if (problems.length) throw new Error(`wrk on ${options.url}: ${problems.join(', ')}\n${output}`);

  const stat = /@@stat (.*)/.exec(output)![1];
  // Fields after the command name (which is in parentheses): cutime and cstime are the 16th and 17th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const clientSeconds = (Number(fields[13]) + Number(fields[14])) / clockTicks();

  return {
    rps: requests / seconds,
    requests,
    seconds,
    latencyP50Ms: latencyMs(output, '50%'),
    latencyP99Ms: latencyMs(output, '99%'),
    ...measured(requests, clientSeconds),
  };
}

/** A percentile of wrk's --latency distribution, in milliseconds. */
function latencyMs(output: string, percentile: string): number {
  const m = new RegExp(`^\\s*${percentile}\\s+([\\d.]+)(us|ms|s)\\s*$`, 'm').exec(output);
  if (!m) return NaN;
  const value = Number(m[1]);
  return m[2] === 'us' ? value / 1000 : m[2] === 's' ? value * 1000 : value;
}
