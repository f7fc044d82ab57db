/**
 * The local platform on several processes (node:cluster), as Lambda runs several instances of a
 * function: the primary bootstraps the state and supervises; each worker opens its own engine over
 * the same DATA_DIR (SQLite WAL serves several processes) and serves the three APIs on the shared
 * ports, the kernel spreading connections between workers. Every cache and the rate-limit buckets are
 * per worker, as they are per function instance in AWS (docs/decisions/local-runtime.md).
 */
import cluster, { type Worker } from 'node:cluster';
import { availableParallelism } from 'node:os';
import type { Api } from '../http/routes.js';
import { createEmbeddedEngine } from '../engine/embedded/index.js';
import { startPlatform } from './platform.js';
import { log } from '../shared/log.js';

export interface LocalSettings {
  dataDir: string;
  ports: Record<Api, number>;
  /** Processes serving the APIs; 1 serves them in the primary itself. */
  workers: number;
}

/** Most workers by default: past this, more processes only add SQLite writers contending for one file. */
const MAX_DEFAULT_WORKERS = 4;

export function localSettings(env: NodeJS.ProcessEnv = process.env): LocalSettings {
  const port = (name: string, fallback: number) => Number(env[name] ?? fallback);
  const workers = env.LOCAL_WORKERS ? Number(env.LOCAL_WORKERS) : Math.min(availableParallelism(), MAX_DEFAULT_WORKERS);
  if (!Number.isInteger(workers) || workers < 1) throw new Error(`LOCAL_WORKERS must be a whole number of at least 1, got "${env.LOCAL_WORKERS}"`);
  return {
    dataDir: env.DATA_DIR || '.platform',
    ports: { ai: port('AI_PORT', 8080), data: port('DATA_PORT', 8081), events: port('EVENTS_PORT', 8082) },
    workers,
  };
}

type Message = { type: 'ready'; urls: Record<Api, string> } | { type: 'shutdown' };

export interface Supervisor {
  urls: Record<Api, string>;
  /** Asks every worker to finish its in-flight requests and close its engine; resolves once all exited. */
  close(): Promise<void>;
}

/** Primary: forks the workers and resolves once each serves, with the URLs they serve on. */
export async function startWorkers(settings: LocalSettings): Promise<Supervisor> {
  let closing = false;
  const ready = new Map<Worker, Record<Api, string>>();
  const fork = () => cluster.fork();

  const urls = await new Promise<Record<Api, string>>((resolve, reject) => {
    cluster.on('message', (worker, message: Message) => {
      if (message?.type !== 'ready') return;
      ready.set(worker, message.urls);
      if (ready.size === settings.workers) resolve(message.urls);
    });
    cluster.on('exit', (worker, code, signal) => {
      const wasReady = ready.delete(worker);
      if (closing) return;
      // One that never served (a port taken, a broken state) fails the start; a serving one that
      // died is replaced, as Lambda replaces a crashed instance.
      if (!wasReady) return reject(new Error(`a worker exited during start-up (${signal ?? `code ${code}`})`));
      log.error('local worker exited; starting another', { pid: worker.process.pid, code, signal });
      fork();
    });
    for (let i = 0; i < settings.workers; i++) fork();
  });

  return {
    urls,
    close: async () => {
      closing = true;
      const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
      await Promise.all(
        workers.map(
          (w) =>
            new Promise<void>((resolve) => {
              w.once('exit', () => resolve());
              w.send({ type: 'shutdown' } satisfies Message, () => undefined);
            }),
        ),
      );
    },
  };
}

/** Worker: its own engine over DATA_DIR, the APIs on the shared ports, a clean exit when asked. */
export async function runWorker(settings: LocalSettings): Promise<void> {
  const engine = createEmbeddedEngine({ dataDir: settings.dataDir });
  const platform = await startPlatform({ engine, ports: settings.ports });
  const stop = async () => {
    await platform.close();
    process.exit(0);
  };
  process.on('message', (message: Message) => {
    if (message?.type === 'shutdown') void stop();
  });
  // Ctrl-C reaches every process of the terminal's group: finish like on the primary's request.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void stop());
  process.send!({ type: 'ready', urls: platform.urls } satisfies Message);
}

export const isLocalWorker = () => cluster.isWorker;
