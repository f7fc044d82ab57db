/** The load generator: autocannon in the bench process, keep-alive connections, fixed concurrency and duration. */
import autocannon, { type RequestParams } from 'autocannon';
import { availableParallelism } from 'node:os';
import { groupCpuSeconds, machineCpu } from './processes.js';

export interface LoadOptions {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** Builds each request afresh (a unique body, another query), e.g. `(r) => ({ ...r, body: next() })`. */
  setupRequest?: (request: RequestParams) => RequestParams;
  connections: number;
  /** Seconds. */
  duration: number;
  /** Every response must carry exactly this body, or the run fails. */
  expectBody?: string;
  /** The status every answer must have (default: any 2xx); only these answers count, any other fails the run. */
  expectStatus?: number;
  /** Process group of the server under load, to measure its CPU time. */
  serverPgid?: number;
}

export interface LoadResult {
  /** Completed responses with the expected status per second of the run. */
  rps: number;
  requests: number;
  seconds: number;
  latencyP50Ms: number;
  latencyP99Ms: number;
  /** Server CPU time per answered request, in microseconds (undefined without /proc). */
  serverCpuUsPerRequest?: number;
  /** The part of it spent in the kernel (system time). */
  serverSysUsPerRequest?: number;
  /** Share of one core the server used over the run. */
  serverCpuShare?: number;
  /** Share of one core this (load generating) process used over the run. */
  clientCpuShare: number;
  /** The load generator's CPU time per answered request, in microseconds (where it is measured). */
  clientCpuUsPerRequest?: number;
  /** Share of the whole machine (all cores) busy over the run, whoever used it (undefined without /proc). */
  machineBusy?: number;
  /** Share of the whole machine used by anything but the server and this process: noise. */
  othersBusy?: number;
}

/**
 * CPU accounting around one load run: the server's process group, the whole machine and the wall
 * clock, from now until the returned function is called with what the run answered and what the load
 * generator itself used.
 */
export function cpuWindow(serverPgid: number | undefined) {
  const serverBefore = serverPgid === undefined ? undefined : groupCpuSeconds(serverPgid);
  const machineBefore = machineCpu();
  const wallBefore = process.hrtime.bigint();
  return (requests: number, clientSeconds: number) => {
    const wall = Number(process.hrtime.bigint() - wallBefore) / 1e9;
    const serverAfter = serverPgid === undefined ? undefined : groupCpuSeconds(serverPgid);
    const machineAfter = machineCpu();
    const serverSys = serverBefore && serverAfter ? serverAfter.system - serverBefore.system : undefined;
    const serverCpu = serverBefore && serverAfter ? serverAfter.user - serverBefore.user + serverSys! : undefined;
    const machineBusy = machineBefore && machineAfter ? (machineAfter.busy - machineBefore.busy) / (machineAfter.total - machineBefore.total) : undefined;
    return {
      serverCpuUsPerRequest: serverCpu === undefined ? undefined : (serverCpu / requests) * 1e6,
      serverSysUsPerRequest: serverSys === undefined ? undefined : (serverSys / requests) * 1e6,
      serverCpuShare: serverCpu === undefined ? undefined : serverCpu / wall,
      clientCpuShare: clientSeconds / wall,
      clientCpuUsPerRequest: (clientSeconds / requests) * 1e6,
      machineBusy,
      othersBusy: machineBusy === undefined || serverCpu === undefined ? undefined : Math.max(0, machineBusy - (serverCpu + clientSeconds) / wall / availableParallelism()),
    };
  };
}

export async function load(options: LoadOptions): Promise<LoadResult> {
  const measured = cpuWindow(options.serverPgid);
  const clientCpuBefore = process.cpuUsage();
  const r = await autocannon({
    url: options.url,
    method: options.method ?? 'GET',
    headers: options.headers,
    body: options.body,
    // Only when given: autocannon refuses expectBody beside any `requests`, even undefined.
    ...(options.setupRequest ? { requests: [{ setupRequest: options.setupRequest }] } : {}),
    connections: options.connections,
    pipelining: 1,
    duration: options.duration,
    expectBody: options.expectBody,
  });
  const clientCpu = process.cpuUsage(clientCpuBefore);

  const answered = options.expectStatus === undefined ? r['2xx'] : (r.statusCodeStats[options.expectStatus]?.count ?? 0);
  const unexpected = Object.values(r.statusCodeStats).reduce((sum, s) => sum + s.count, 0) - answered;
  const problems = [
    r.errors && `${r.errors} errors`,
    r.timeouts && `${r.timeouts} timeouts`,
    unexpected && `${unexpected} answers with another status than ${options.expectStatus ?? '2xx'} (${JSON.stringify(r.statusCodeStats)})`,
    r.mismatches && `${r.mismatches} answers with a different body`,
    answered === 0 && 'no answers at all',
  ].filter(Boolean);
  if (problems.length) throw new Error(`load on ${options.url} failed: ${problems.join(', ')}`);

  return {
    rps: answered / r.duration,
    requests: answered,
    seconds: r.duration,
    latencyP50Ms: r.latency.p50,
    latencyP99Ms: r.latency.p99,
    ...measured(answered, (clientCpu.user + clientCpu.system) / 1e6),
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}
