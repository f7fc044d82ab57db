/**
 * Where a server's CPU time went: `tsx bench/support/profile-summary.ts <file.cpuprofile> [phases.json
 * phase] [--top N]`. Prints self time by file (packages grouped), self time by function, and total
 * (inclusive) time by function of this repository. With a phases file written by a benchmark
 * (`[{ name, startUs, endUs }]`, monotonic clock; a name may have several windows) only the samples
 * of that phase count. With `--requests N` (the requests served in the phase; bench/support/quick-cpu.ts
 * writes them into its phases file, and `phases.json phase` then finds them) it also prints where the
 * main thread's time went by kind of work, in µs a request.
 */
import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ROOT } from './processes.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number; columnNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

const args = process.argv.slice(2);
const topIndex = args.indexOf('--top');
const top = topIndex >= 0 ? Number(args.splice(topIndex, 2)[1]) : 25;
const requestsIndex = args.indexOf('--requests');
let requests = requestsIndex >= 0 ? Number(args.splice(requestsIndex, 2)[1]) : undefined;
const [file, phasesFile, phaseName] = args;
if (!file) {
  process.stderr.write('usage: tsx bench/support/profile-summary.ts <file.cpuprofile> [phases.json phase] [--top N]\n');
  process.exit(2);
}

const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
let windows: { startUs: number; endUs: number; requests?: number }[] = [{ startUs: -Infinity, endUs: Infinity }];
if (phasesFile) {
  const phases = JSON.parse(readFileSync(phasesFile, 'utf8')) as { name: string; startUs: number; endUs: number; requests?: number }[];
  windows = phases.filter((p) => p.name === phaseName);
  if (!windows.length) throw new Error(`no phase "${phaseName}" in ${phasesFile}: ${[...new Set(phases.map((p) => p.name))].join(', ')}`);
  if (requests === undefined && windows.every((w) => w.requests !== undefined)) requests = windows.reduce((n, w) => n + w.requests!, 0);
}

const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

/** A place in the code: repo files relative to the root, packages by name, node internals as they are. */
function where(url: string): string {
  if (!url) return '';
  const path = url.startsWith('file://') ? fileURLToPath(url) : url;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(path);
  if (pkg) return `[${pkg[1]}]`;
  return path.startsWith('/') ? relative(ROOT, path) : path;
}
// No line numbers: tsx's output lines are not the source's (profiles carry no source maps).
const fnKey = (n: ProfileNode) => {
  const f = n.callFrame;
  const place = where(f.url);
  return place ? `${f.functionName || '(anonymous)'}  ${place}` : f.functionName;
};
const fileKey = (n: ProfileNode) => where(n.callFrame.url) || n.callFrame.functionName;

const self = new Map<string, number>();
const selfFile = new Map<string, number>();
const total = new Map<string, number>();
let sampled = 0;
let t = profile.startTime;
for (let i = 0; i < profile.samples.length; i++) {
  t += profile.timeDeltas[i];
  if (!windows.some((w) => t >= w.startUs && t <= w.endUs)) continue;
  // A sample's weight is the time until the next one.
  const dt = (profile.timeDeltas[i + 1] ?? 0) / 1000;
  sampled += dt;
  const leaf = byId.get(profile.samples[i])!;
  self.set(fnKey(leaf), (self.get(fnKey(leaf)) ?? 0) + dt);
  selfFile.set(fileKey(leaf), (selfFile.get(fileKey(leaf)) ?? 0) + dt);
  const seen = new Set<string>();
  for (let id: number | undefined = leaf.id; id !== undefined; id = parent.get(id)) {
    const n = byId.get(id)!;
    if (!n.callFrame.url || n.callFrame.url.includes('node_modules') || !n.callFrame.url.startsWith('file://')) continue;
    const key = fnKey(n);
    if (seen.has(key)) continue;
    seen.add(key);
    total.set(key, (total.get(key) ?? 0) + dt);
  }
}

const print = (title: string, map: Map<string, number>, denominator: number) => {
  process.stdout.write(`\n${title}\n`);
  const rows = [...map].sort((a, b) => b[1] - a[1]).slice(0, top);
  for (const [key, ms] of rows) process.stdout.write(`${ms.toFixed(0).padStart(8)} ms ${((ms / denominator) * 100).toFixed(1).padStart(5)}%  ${key}\n`);
};

const busy = sampled - (self.get('(idle)') ?? 0);
process.stdout.write(`${file}${phaseName ? ` phase ${phaseName}` : ''}: ${(sampled / 1000).toFixed(1)} s sampled, ${(busy / 1000).toFixed(1)} s not idle; percentages of the time not idle\n`);
self.delete('(idle)');
selfFile.delete('(idle)');
print('self time by file', selfFile, busy);
if (requests) {
  const kinds = new Map<string, number>();
  for (const [key, ms] of selfFile) kinds.set(kindOf(key), (kinds.get(kindOf(key)) ?? 0) + ms);
  process.stdout.write(`\nwhere the main thread's time went, by kind of work (${requests} requests; other threads, the WAL checkpointer and the collector's helpers, not included)\n`);
  for (const [kind, ms] of [...kinds].sort((a, b) => b[1] - a[1])) {
    process.stdout.write(`${((ms * 1000) / requests).toFixed(1).padStart(8)} µs a request ${((ms / busy) * 100).toFixed(1).padStart(5)}%  ${kind}\n`);
  }
  process.stdout.write(`${((busy * 1000) / requests).toFixed(1).padStart(8)} µs a request in all\n`);
}
print('self time by function', self, busy);
print('total time (self + callees) by function of this repository', total, busy);

/** The kind of work a file's self time is (the categories of docs/benchmarks.md's profiles). */
function kindOf(file: string): string {
  if (file === '[better-sqlite3]' || file.startsWith('lambdas/engine/')) return 'storage: SQLite statements and commits, the engine around them';
  if (file === 'writev' || file === 'writeBuffer' || file === 'writeUtf8String' || file.startsWith('node:internal/stream_base_commons') || file.startsWith('node:net')) return 'sockets: system calls';
  if (file === '(garbage collector)') return 'garbage collector';
  if (file.startsWith('node:_http') || file.startsWith('node:internal/streams') || file === 'node:events' || file.startsWith('node:internal/http')) return 'node:http and streams';
  if (file === '[@middy/core]' || file.startsWith('lambdas/http/') || file.startsWith('lambdas/local/')) return 'HTTP runtime and the chain (lambdas/local, lambdas/http, middy)';
  if (file.startsWith('lambdas/activity/')) return 'activity log';
  if (file.startsWith('lambdas/') || file === '[zod]') return 'the route\'s own work (auth, AI, Data, validation)';
  if (file.startsWith('node:internal/crypto')) return 'crypto (hashes, random)';
  if (file === 'runMicrotasks' || file === '(program)' || file.startsWith('node:internal/process') || file.startsWith('node:internal/timers') || file.startsWith('node:internal/async_hooks') || file.startsWith('node:async_hooks')) return 'event loop, promises, timers';
  return 'other (node internals, module loading)';
}
