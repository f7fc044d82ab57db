/**
 * Where a server's CPU time went: `tsx bench/support/profile-summary.ts <file.cpuprofile> [phases.json
 * phase] [--top N]`. Prints self time by file (packages grouped), self time by function, and total
 * (inclusive) time by function of this repository. With a phases file written by a benchmark
 * (`[{ name, startUs, endUs }]`, monotonic clock; a name may have several windows) only the samples
 * of that phase count.
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
const [file, phasesFile, phaseName] = args;
if (!file) {
  process.stderr.write('usage: tsx bench/support/profile-summary.ts <file.cpuprofile> [phases.json phase] [--top N]\n');
  process.exit(2);
}

const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile;
let windows = [{ startUs: -Infinity, endUs: Infinity }];
if (phasesFile) {
  const phases = JSON.parse(readFileSync(phasesFile, 'utf8')) as { name: string; startUs: number; endUs: number }[];
  windows = phases.filter((p) => p.name === phaseName);
  if (!windows.length) throw new Error(`no phase "${phaseName}" in ${phasesFile}: ${[...new Set(phases.map((p) => p.name))].join(', ')}`);
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
print('self time by function', self, busy);
print('total time (self + callees) by function of this repository', total, busy);
