/**
 * The local platform on several processes (node:cluster), as Lambda runs several instances of a
 * function: the primary bootstraps the state and supervises; each worker opens its own engine over
 * the same DATA_DIR (SQLite WAL serves several processes) and serves the three APIs on the shared
 * ports, node:cluster handing new connections to the workers in turn. Every cache is per worker, as
 * it is per function instance in AWS; rate limits are counted in the shared store
 * (docs/decisions/local-runtime.md).
 */
import cluster, { type Worker } from 'node:cluster';
import type { Api } from '../shared/api.js';
import { openLocalEngine } from './engine.js';
import { startPlatform } from './platform.js';
import { flushActivity, onFlushPeers } from '../activity/activity.js';
import { log } from '../shared/log.js';
import { settings, type Settings } from '../shared/settings.js';

export interface LocalSettings {
  dataDir: string;
  ports: Record<Api, number>;
  /** The operations port (ops-server.ts), shared by the workers as the API ports are. */
  opsPort: number;
  /** Processes serving the APIs; 1 serves them in the primary itself. */
  workers: number;
}

export function localSettings(config: Settings = settings()): LocalSettings {
  return {
    dataDir: config.dataDir,
    ports: { ai: config.aiPort, data: config.dataPort, events: config.eventsPort },
    opsPort: config.opsPort,
    workers: config.localWorkers,
  };
}

/**
 * Between the primary and its workers. `flush-activity` / `activity-flushed`: a worker about to read
 * the activity log asks the primary, which asks every other worker to write its buffered events and
 * answers once all did (or after FLUSH_TIMEOUT_MS: a reader is never held up longer).
 */
type Message =
  | { type: 'ready'; urls: Record<Api, string>; opsUrl?: string }
  | { type: 'flush-activity'; id: string }
  | { type: 'activity-flushed'; id: string };

const FLUSH_TIMEOUT_MS = 2000;
/** How long the primary waits for a worker to finish its requests on shutdown. */
const SHUTDOWN_GRACE_MS = 10_000;

export interface Supervisor {
  urls: Record<Api, string>;
  opsUrl?: string;
  /** Has every worker finish its in-flight requests and close its engine; resolves once all exited. */
  close(): Promise<void>;
}

/** Primary: forks the workers and resolves once each serves, with the URLs they serve on. */
export async function startWorkers(settings: LocalSettings): Promise<Supervisor> {
  let closing = false;
  const ready = new Map<Worker, { urls: Record<Api, string>; opsUrl?: string }>();
  const fork = () => cluster.fork();
  const replacements = new Set<Worker>();

  // Flushes asked for by one worker, waiting on the others.
  const flushes = new Map<string, { requester: Worker; id: string; waiting: Set<Worker>; timer: NodeJS.Timeout }>();
  const settle = (key: string) => {
    const flush = flushes.get(key);
    if (!flush || flush.waiting.size) return;
    flushes.delete(key);
    clearTimeout(flush.timer);
    if (!flush.requester.isDead()) flush.requester.send({ type: 'activity-flushed', id: flush.id } satisfies Message, () => undefined);
  };

  const { urls, opsUrl } = await new Promise<{ urls: Record<Api, string>; opsUrl?: string }>((resolve, reject) => {
    cluster.on('message', (worker, message: Message) => {
      if (message?.type === 'flush-activity') {
        const key = `${worker.id}:${message.id}`;
        const others = [...ready.keys()].filter((w) => w !== worker && !w.isDead());
        const timer = setTimeout(() => {
          flushes.get(key)?.waiting.clear();
          settle(key);
        }, FLUSH_TIMEOUT_MS);
        flushes.set(key, { requester: worker, id: message.id, waiting: new Set(others), timer });
        for (const w of others) w.send({ type: 'flush-activity', id: key } satisfies Message, () => undefined);
        settle(key);
      } else if (message?.type === 'activity-flushed') {
        flushes.get(message.id)?.waiting.delete(worker);
        settle(message.id);
      } else if (message?.type === 'ready') {
        ready.set(worker, { urls: message.urls, opsUrl: message.opsUrl });
        if (replacements.delete(worker)) log.warn('local worker replaced', { pid: worker.process.pid });
        if (ready.size === settings.workers) resolve({ urls: message.urls, opsUrl: message.opsUrl });
      }
    });
    cluster.on('exit', (worker, code, signal) => {
      for (const [key, flush] of flushes) if (flush.waiting.delete(worker)) settle(key);
      const wasReady = ready.delete(worker);
      if (closing) return;
      // One that never served (a port taken, a broken state) fails the start; a serving one that
      // died is replaced, as Lambda replaces a crashed instance.
      if (!wasReady) return reject(new Error(`a worker exited during start-up (${signal ?? `code ${code}`})`));
      log.error('local worker exited; starting another', { pid: worker.process.pid, code, signal });
      replacements.add(fork());
    });
    for (let i = 0; i < settings.workers; i++) fork();
  });

  return {
    urls,
    opsUrl,
    close: async () => {
      closing = true;
      const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
      await Promise.all(
        workers.map(
          (w) =>
            new Promise<void>((resolve) => {
              // A worker stuck past the grace time (a request that never ends) is stopped hard.
              const timer = setTimeout(() => w.process.kill('SIGKILL'), SHUTDOWN_GRACE_MS);
              w.once('exit', () => {
                clearTimeout(timer);
                resolve();
              });
              // A signal, not a message: a worker still loading has no handler yet and simply ends.
              w.process.kill('SIGTERM');
            }),
        ),
      );
    },
  };
}

/** Worker: its own engine over DATA_DIR, the APIs on the shared ports, a clean exit when asked. */
export async function runWorker(settings: LocalSettings): Promise<void> {
  // The primary opened the same engine first and stopped on any setting it lacked.
  const engine = await openLocalEngine('thread');
  const starting = startPlatform({ engine, ports: settings.ports, opsPort: settings.opsPort });
  // Listening before the start finishes: a shutdown asked for meanwhile waits for it, then closes.
  const stop = async () => {
    await (await starting).close();
    process.exit(0);
  };
  let asked = 0;
  const answered = new Map<string, () => void>();
  onFlushPeers(
    () =>
      new Promise<void>((resolve) => {
        const id = String(++asked);
        const timer = setTimeout(() => answered.delete(id) && resolve(), FLUSH_TIMEOUT_MS + 500);
        answered.set(id, () => {
          clearTimeout(timer);
          resolve();
        });
        process.send!({ type: 'flush-activity', id } satisfies Message);
      }),
  );
  process.on('message', (message: Message) => {
    if (message?.type === 'flush-activity') {
      void flushActivity().then(() => process.send!({ type: 'activity-flushed', id: message.id } satisfies Message));
    } else if (message?.type === 'activity-flushed') {
      answered.get(message.id)?.();
      answered.delete(message.id);
    }
  });
  // SIGTERM from the primary's close(); SIGINT too, as Ctrl-C reaches every process of the terminal's group.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => void stop());
  const { urls, opsUrl } = await starting;
  process.send!({ type: 'ready', urls, opsUrl } satisfies Message);
}

export const isLocalWorker = () => cluster.isWorker;
