/** The local platform (`bin/local.ts`) as a benchmark target: a child process over a fresh data directory. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, startServer, type ServerProcess } from './processes.js';

export interface LocalPlatform {
  server: ServerProcess;
  aiUrl: string;
  dataUrl: string;
  dataDir: string;
  /** The development tenant bootstrapped on first start. */
  credentials: { organization_id: string; secret_key: string };
}

/**
 * Starts `bin/local.ts` with its state in `<dir>/data`, quiet logs (BENCH_PLATFORM_LOG_LEVEL=info: the
 * access lines too, read by this process) and free ports. With `profileDir` it
 * runs under `node --cpu-prof` and writes its CPU profile to `<profileDir>/platform` when stopped.
 */
export async function startLocalPlatform(dir: string, profileDir?: string): Promise<LocalPlatform> {
  const dataDir = join(dir, 'data');
  const [ai, data, events] = [await freePort(), await freePort(), await freePort()];
  const server = await startServer(
    'platform',
    'bin/local.ts',
    { DATA_DIR: dataDir, AI_PORT: String(ai), DATA_PORT: String(data), EVENTS_PORT: String(events), OPS_PORT: '0', CONSOLE_PORT: '0', LOG_LEVEL: process.env.BENCH_PLATFORM_LOG_LEVEL ?? 'silent' },
    /Events API\s+http:/,
    { nodeArgs: platformNodeArgs(profileDir) },
  );
  return {
    server,
    aiUrl: /AI API\s+(http:\S+)/.exec(server.output())![1],
    dataUrl: /Data API\s+(http:\S+)/.exec(server.output())![1],
    dataDir,
    credentials: JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8')),
  };
}

/** BENCH_PLATFORM_NODE_ARGS (node flags for the platform, space-separated, e.g. V8 heap sizes to compare) and the profile's. */
function platformNodeArgs(profileDir: string | undefined): string[] | undefined {
  const extra = process.env.BENCH_PLATFORM_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const args = [...extra, ...(profileArgs(profileDir, 'platform') ?? [])];
  return args.length ? args : undefined;
}

/** Node flags that write a CPU profile to `<profileDir>/<name>` on exit; none without a profile dir. */
export const profileArgs = (profileDir: string | undefined, name: string) =>
  profileDir ? ['--cpu-prof', `--cpu-prof-dir=${join(profileDir, name)}`] : undefined;
