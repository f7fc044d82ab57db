/**
 * `npm start` as the isolation benchmark runs it (bench/isolation.ts): `node --import tsx bin/local.ts`
 * (what the `start` script execs) as a child in its own process group, from this checkout or from a
 * git worktree of an older commit (the baseline), on a fresh DATA_DIR, with free ports; and the admin
 * CLI of the same tree on the same DATA_DIR. Beside them, what the bench reads of its processes from
 * /proc: the pids serving the APIs (the primary's children running bin/local.ts without
 * `--platform-background`, as test/helpers/local-process.ts `servingPids` reads them) and the CPU time
 * of each role (primary, serving workers, background processes with their extraction children).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { clockTicks, makeTempDir, runScript, startServer, type ServerProcess } from './processes.js';

export interface LocalStart {
  server: ServerProcess;
  /** The primary's pid (also the process group's). */
  pid: number;
  urls: { ai: string; data: string; events: string };
  /** The operations port's URL (GET /readyz), when the tree prints one. */
  opsUrl?: string;
  /** The bootstrapped organization (credentials.json). */
  credentials: { organization_id: string; workspace_id: string; secret_key: string };
  dataDir: string;
  /** The admin CLI of the same tree on the same DATA_DIR: its JSON answer; throws with its stderr. */
  admin(...args: string[]): any;
  stop(): Promise<void>;
}

/**
 * Starts `<root>/bin/local.ts` (root: this checkout or a worktree) as `npm start` runs it, with `env`
 * over free ports, a fresh DATA_DIR and LOG_LEVEL=warn; resolves once it printed its URLs.
 */
export async function startLocal(name: string, root: string, env: Record<string, string>, options: { accessLog?: string; nodeArgs?: string[] } = {}): Promise<LocalStart> {
  const temp = makeTempDir('bench-isolation-');
  const dataDir = temp.path;
  const fullEnv: Record<string, string> = { AI_PORT: '0', DATA_PORT: '0', EVENTS_PORT: '0', OPS_PORT: '0', CONSOLE_PORT: '0', LOG_LEVEL: 'warn', ENGINE: 'embedded', DATA_DIR: dataDir, ...env };
  // With an access log: every process's log lines, at info level (an access line per request, with its duration), also go to that file.
  if (options.accessLog) Object.assign(fullEnv, { LOG_LEVEL: 'info', BENCH_SERVER_LOG: options.accessLog });
  // options.nodeArgs: flags for every process (the cluster's workers inherit them), e.g. --cpu-prof.
  const nodeArgs = [...(options.nodeArgs ?? []), ...(options.accessLog ? ['--import', pathToFileURL(join(import.meta.dirname, 'isolation-log-tee.mjs')).href] : [])];
  let server: ServerProcess;
  try {
    // nodeArgs [] runs `node --import tsx <script>`: the primary is the child itself (as `npm start`'s exec makes it).
    server = await startServer(name, join(root, 'bin', 'local.ts'), fullEnv, /Events API\s+http:\S+\n/, { nodeArgs, timeoutMs: 90_000 });
  } catch (error) {
    temp.remove();
    throw error;
  }
  const out = server.output();
  const url = (api: string) => new RegExp(`${api} API\\s+(http:\\S+)`).exec(out)![1];
  const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
  const adminScript = join(root, 'bin', 'admin.ts');
  return {
    server,
    pid: server.pgid,
    urls: { ai: url('AI'), data: url('Data'), events: url('Events') },
    opsUrl: /Operations\s+(http:\S+)/.exec(out)?.[1],
    credentials,
    dataDir,
    admin: (...args: string[]) => JSON.parse(runScript(adminScript, args, { DATA_DIR: dataDir, ENGINE: 'embedded', LOG_LEVEL: 'warn' })),
    async stop() {
      await server.stop(15_000);
      temp.remove();
    },
  };
}

export interface LocalChild {
  pid: number;
  nice: number;
  background: boolean;
}

/** The primary's children running bin/local.ts (tsx's esbuild service is not one): serving workers and background processes. */
export function localChildren(primary: number): LocalChild[] {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'pid=,ni=,args=', '--ppid', String(primary)], { encoding: 'utf8' });
  } catch {
    return []; // ps exits 1 when there are none
  }
  return out
    .split('\n')
    .filter((line) => line.includes('bin/local.ts'))
    .map((line) => {
      const [pid, nice] = line.trim().split(/\s+/);
      return { pid: Number(pid), nice: Number(nice), background: line.includes('--platform-background') };
    });
}

/** The pids of the workers serving the APIs, sorted. */
export const servingPids = (primary: number) =>
  localChildren(primary)
    .filter((c) => !c.background)
    .map((c) => c.pid)
    .sort((a, b) => a - b);

export type Role = 'primary' | 'serving' | 'background' | 'other';

/**
 * CPU seconds (user + system, with reaped children's: an extraction child killed or ended counts
 * in its background process) of every live process of the group, by role. A process that ended is
 * counted in its parent's reaped time only once the parent waited for it.
 */
export function cpuByRole(pgid: number): Record<Role, number> {
  const ticks = (ticksPerSecond ??= clockTicks());
  const totals: Record<Role, number> = { primary: 0, serving: 0, background: 0, other: 0 };
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    let cmdline: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) !== pgid) continue;
    // After "(comm)": utime, stime, cutime, cstime are fields 11-14 (0-based).
    const seconds = (Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14])) / ticks;
    const pid = Number(entry);
    const role: Role =
      pid === pgid
        ? 'primary'
        : cmdline.includes('--platform-background') || cmdline.includes('--knowledge-extraction-child')
          ? 'background'
          : cmdline.includes('bin/local.ts')
            ? 'serving'
            : 'other';
    totals[role] += seconds;
  }
  return totals;
}
let ticksPerSecond: number | undefined;

/** Messages waiting per queue, from GET /readyz (its `background` backlog); undefined when it reports none. */
export async function backlog(start: LocalStart): Promise<Record<string, number> | undefined> {
  if (!start.opsUrl) return undefined;
  try {
    const body = (await (await fetch(`${start.opsUrl}/readyz`)).json()) as { background?: { queues?: Record<string, { waiting: number }> } };
    const queues = body.background?.queues;
    return queues ? Object.fromEntries(Object.entries(queues).map(([name, q]) => [name, q.waiting])) : undefined;
  } catch {
    return undefined;
  }
}

export interface AccessLine {
  /** Date.now() of the line (the answer's end). */
  at: number;
  durationMs: number;
  route: string | null;
  status: number;
  org: string | null;
  requestId: string | null;
}

/** The access lines (LOG_LEVEL=info `request` lines) of a log written by isolation-log-tee.mjs. */
export function readAccessLog(file: string): AccessLine[] {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return [];
  }
  const lines: AccessLine[] = [];
  for (const line of text.split('\n')) {
    if (!line.includes('"message":"request"')) continue;
    try {
      const l = JSON.parse(line) as { time: string; duration_ms: number; route: string | null; status: number; organization_id: string | null; request_id: string | null };
      lines.push({ at: Date.parse(l.time), durationMs: l.duration_ms, route: l.route, status: l.status, org: l.organization_id, requestId: l.request_id });
    } catch {
      // a line cut by a crash
    }
  }
  return lines;
}
