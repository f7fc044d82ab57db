/**
 * The local platform's processes (node:cluster; docs/architecture.md, "Processes"):
 * - the primary bootstraps the state and supervises; with LOCAL_WORKERS=1 it serves the APIs itself;
 * - LOCAL_WORKERS > 1 HTTP workers each open their own engine over the same DATA_DIR (SQLite WAL
 *   serves several processes) and serve the three APIs on the shared ports, node:cluster handing new
 *   connections to the workers in turn;
 * - BACKGROUND_WORKERS background processes run every queue consumer and sweep (knowledge items,
 *   jobs, webhook deliveries), at a lower CPU priority, parsing files only in bounded children of
 *   their own (knowledge/extraction-pool.ts). A process that answers requests never parses a file.
 * Every cache is per process, as it is per function instance in AWS; rate limits are counted in the
 * shared store (docs/decisions/local-runtime.md, docs/decisions/background-processes.md).
 */
import cluster, { type Worker } from 'node:cluster';
import { setPriority } from 'node:os';
import type { Api } from '../shared/api.js';
import type { Engine } from '../engine/ports.js';
import { useEngine } from '../engine/index.js';
import { openLocalEngine } from './engine.js';
import { startPlatform, type RunningPlatform } from './platform.js';
import { OWN_SENDS, startQueueWorkers, type QueueWakeups } from './queue-workers.js';
import { flushActivity, onFlushPeers } from '../activity/activity.js';
import { closeExtractionPool } from '../knowledge/extraction-pool.js';
import { log } from '../shared/log.js';
import { settings, type Settings } from '../shared/settings.js';
import { largeBodyTurns } from './large-body-turns.js';

export interface LocalSettings {
  dataDir: string;
  ports: Record<Api, number>;
  /** The operations port (ops-server.ts), shared by the workers as the API ports are. */
  opsPort: number;
  /** The console's port (its pages and API), shared the same way. */
  consolePort: number;
  /** Processes serving the APIs; 1 serves them in the primary itself. */
  workers: number;
  /** Processes running the queue consumers and sweeps. */
  backgroundWorkers: number;
}

export function localSettings(config: Settings = settings()): LocalSettings {
  return {
    dataDir: config.dataDir,
    ports: { ai: config.aiPort, data: config.dataPort, events: config.eventsPort },
    opsPort: config.opsPort,
    consolePort: config.consolePort,
    workers: config.localWorkers,
    backgroundWorkers: config.backgroundWorkers,
  };
}

/** How a background process knows itself: an argument the primary forks it with. */
const BACKGROUND_ARG = '--platform-background';

/** The process this is: the primary, a worker serving the APIs, or a background process. */
export const localRole = (): 'primary' | 'http' | 'background' =>
  cluster.isPrimary ? 'primary' : process.argv.includes(BACKGROUND_ARG) ? 'background' : 'http';

/** The background processes' priority: below the processes answering requests, so a flood of items cannot starve the APIs. */
export const BACKGROUND_NICE = 10;
/** How often a serving process tells the others whom it served (LargeBodyTurns counts one served for a second). */
const SERVED_REPORT_MS = 500;

/**
 * Between the primary and the other processes.
 * - `flush-activity` / `activity-flushed`: a process about to read the activity log asks the primary,
 *   which asks every other process to write its buffered events and answers once all did (or after
 *   FLUSH_TIMEOUT_MS: a reader is never held up longer).
 * - `queued`: a serving process sent a message to be handled now; the primary passes it to the
 *   background processes, whose receiver wakes instead of waiting for its next poll (a hint only).
 */
type Message =
  | { type: 'ready'; urls?: Record<Api, string>; opsUrl?: string; consoleUrl?: string }
  | { type: 'flush-activity'; id: string }
  | { type: 'activity-flushed'; id: string }
  | { type: 'queued'; queue: keyof QueueWakeups }
  /** Organizations a serving process served lately, passed to the others (LargeBodyTurns' pause). */
  | { type: 'served'; organizations: string[] };

const FLUSH_TIMEOUT_MS = 2000;
/** How long the primary waits for a process to finish its requests on shutdown. */
const SHUTDOWN_GRACE_MS = 10_000;
/** A background process that died is started again after this, so one that dies at once does not spin. */
const RESTART_PAUSE_MS = 500;

export interface Supervisor {
  urls: Record<Api, string>;
  opsUrl?: string;
  consoleUrl?: string;
  /** Has every process finish its work and close its engine; resolves once all exited. */
  close(): Promise<void>;
}

/**
 * Primary: serves the APIs itself over `engine` when LOCAL_WORKERS is 1 (else closes it and forks the
 * HTTP workers), forks the background processes, and resolves once every process is ready.
 */
export async function startLocalPlatform(settings: LocalSettings, engine: Engine): Promise<Supervisor> {
  let closing = false;
  const httpWorkers = settings.workers > 1 ? settings.workers : 0;
  const ready = new Map<Worker, { urls?: Record<Api, string>; opsUrl?: string; consoleUrl?: string }>();
  const background = new Set<Worker>();
  const replacements = new Set<Worker>();
  const fork = (role: 'http' | 'background') => {
    cluster.setupPrimary({ args: role === 'background' ? [BACKGROUND_ARG] : [] });
    const worker = cluster.fork();
    if (role === 'background') background.add(worker);
    return worker;
  };
  const live = () => [...ready.keys()].filter((w) => !w.isDead());

  // Flushes asked for by one process, waiting on the others. The requester is undefined for the primary.
  const flushes = new Map<string, { requester?: Worker; id: string; waiting: Set<Worker>; timer: NodeJS.Timeout; done?: () => void }>();
  const settle = (key: string) => {
    const flush = flushes.get(key);
    if (!flush || flush.waiting.size) return;
    flushes.delete(key);
    clearTimeout(flush.timer);
    flush.done?.();
    if (flush.requester && !flush.requester.isDead()) flush.requester.send({ type: 'activity-flushed', id: flush.id } satisfies Message, () => undefined);
  };
  const askFlush = (key: string, id: string, requester?: Worker, done?: () => void) => {
    const others = live().filter((w) => w !== requester);
    const timer = setTimeout(() => {
      flushes.get(key)?.waiting.clear();
      settle(key);
    }, FLUSH_TIMEOUT_MS);
    flushes.set(key, { requester, id, waiting: new Set(others), timer, done });
    for (const w of others) w.send({ type: 'flush-activity', id: key } satisfies Message, () => undefined);
    settle(key);
  };
  const wakeBackground = (queue: keyof QueueWakeups) => {
    for (const w of background) if (ready.has(w) && !w.isDead()) w.send({ type: 'queued', queue } satisfies Message, () => undefined);
  };

  const started = new Promise<void>((resolve, reject) => {
    cluster.on('message', (worker, message: Message) => {
      if (message?.type === 'flush-activity') askFlush(`${worker.id}:${message.id}`, message.id, worker);
      else if (message?.type === 'activity-flushed') {
        flushes.get(message.id)?.waiting.delete(worker);
        settle(message.id);
      } else if (message?.type === 'queued') wakeBackground(message.queue);
      else if (message?.type === 'served') {
        for (const w of live()) if (w !== worker && !background.has(w)) w.send(message, () => undefined);
      }
      else if (message?.type === 'ready') {
        ready.set(worker, { urls: message.urls, opsUrl: message.opsUrl, consoleUrl: message.consoleUrl });
        if (replacements.delete(worker)) log.warn(`local ${background.has(worker) ? 'background process' : 'worker'} replaced`, { pid: worker.process.pid });
        if (ready.size === httpWorkers + settings.backgroundWorkers) resolve();
      }
    });
    cluster.on('exit', (worker, code, signal) => {
      for (const [key, flush] of flushes) if (flush.waiting.delete(worker)) settle(key);
      const wasReady = ready.delete(worker);
      const role = background.delete(worker) ? 'background' : 'http';
      if (closing) return;
      // One that never became ready (a port taken, a broken state) fails the start; a ready one that
      // died is replaced, as Lambda replaces a crashed instance. A background process's item comes
      // back when its lease ends (the processing sweep), as after any crash.
      if (!wasReady) return reject(new Error(`a ${role} process exited during start-up (${signal ?? `code ${code}`})`));
      log.error(`local ${role === 'background' ? 'background process' : 'worker'} exited; starting another`, { pid: worker.process.pid, code, signal });
      const restart = () => !closing && replacements.add(fork(role));
      if (role === 'background') setTimeout(restart, RESTART_PAUSE_MS);
      else restart();
    });
  });
  for (let i = 0; i < settings.backgroundWorkers; i++) fork('background');

  let served: RunningPlatform | undefined;
  if (httpWorkers === 0) {
    // The primary serves: what it queues wakes the background processes directly, and a read of the
    // activity log in it waits for theirs.
    served = await startPlatform({ engine, ports: settings.ports, opsPort: settings.opsPort, consolePort: settings.consolePort, background: false });
    relayQueued(wakeBackground);
    let asked = 0;
    onFlushPeers(() => new Promise<void>((resolve) => askFlush(`primary:${++asked}`, String(asked), undefined, resolve)));
  } else {
    await engine.close();
    for (let i = 0; i < httpWorkers; i++) fork('http');
  }
  await started;
  const first = [...ready.values()].find((r) => r.urls);
  const urls = served?.urls ?? first!.urls!;
  const opsUrl = served ? served.opsUrl : first!.opsUrl;
  const consoleUrl = served ? served.consoleUrl : first!.consoleUrl;

  return {
    urls,
    opsUrl,
    consoleUrl,
    close: async () => {
      closing = true;
      const workers = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && !w.isDead());
      const stopped = Promise.all(
        workers.map(
          (w) =>
            new Promise<void>((resolve) => {
              // A process stuck past the grace time (a request that never ends) is stopped hard.
              const timer = setTimeout(() => w.process.kill('SIGKILL'), SHUTDOWN_GRACE_MS);
              w.once('exit', () => {
                clearTimeout(timer);
                resolve();
              });
              // A signal, not a message: a process still loading has no handler yet and simply ends.
              w.process.kill('SIGTERM');
            }),
        ),
      );
      await Promise.all([stopped, served?.close()]);
    },
  };
}

/**
 * Passes this process's sends of work to be done now on to `wake`, at most once a tick per queue: a
 * publish to many subscriptions, or a burst of adds, costs one message between processes, not one each.
 */
function relayQueued(wake: (queue: keyof QueueWakeups) => void): void {
  const coalesced = (queue: keyof QueueWakeups) => {
    let pending = false;
    return () => {
      if (pending) return;
      pending = true;
      setImmediate(() => {
        pending = false;
        wake(queue);
      });
    };
  };
  for (const queue of Object.keys(OWN_SENDS) as (keyof QueueWakeups)[]) OWN_SENDS[queue](coalesced(queue));
}

/** The process side of the primary's messages: activity flushes, and what to do on `queued`. */
function answerPrimary(onQueued?: (queue: keyof QueueWakeups) => void): void {
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
    } else if (message?.type === 'queued') onQueued?.(message.queue);
    else if (message?.type === 'served') for (const org of message.organizations) largeBodyTurns.seen(org, false);
  });
}

/** Stops on SIGTERM from the primary's close(), and on SIGINT: Ctrl-C reaches every process of the terminal's group. */
function stopOnSignals(stop: () => Promise<void>): void {
  let stopping: Promise<void> | undefined;
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      stopping ??= stop().then(() => process.exit(0));
    });
  }
}

/** HTTP worker: its own engine over DATA_DIR, the APIs on the shared ports, a clean exit when asked. */
export async function runWorker(settings: LocalSettings): Promise<void> {
  // The primary opened the same engine first and stopped on any setting it lacked.
  const engine = await openLocalEngine('thread');
  const starting = startPlatform({ engine, ports: settings.ports, opsPort: settings.opsPort, consolePort: settings.consolePort, background: false });
  // Listening before the start finishes: a shutdown asked for meanwhile waits for it, then closes.
  stopOnSignals(async () => (await starting).close());
  answerPrimary();
  // What this worker queues wakes the background processes, through the primary.
  relayQueued((queue) => process.send!({ type: 'queued', queue } satisfies Message, () => undefined));
  // Whom this worker served, for the others' large-body pauses (half the window, so none lapses between reports).
  setInterval(() => {
    const organizations = largeBodyTurns.takeSeen();
    if (organizations.length) process.send!({ type: 'served', organizations } satisfies Message, () => undefined);
  }, SERVED_REPORT_MS).unref();
  const { urls, opsUrl, consoleUrl } = await starting;
  process.send!({ type: 'ready', urls, opsUrl, consoleUrl } satisfies Message);
}

/** Background process: every queue consumer and sweep over its own engine, at a lower priority. */
export async function runBackground(): Promise<void> {
  try {
    setPriority(BACKGROUND_NICE);
  } catch (error) {
    log.warn('background process priority not lowered', { error: String(error) });
  }
  const engine = await openLocalEngine('thread');
  useEngine(engine);
  const listeners: { [Q in keyof QueueWakeups]: Set<() => void> } = { knowledge: new Set(), webhooks: new Set(), 'knowledge-jobs': new Set() };
  // Woken by what the serving processes queue (through the primary) and by this process's own sends.
  const subscribe = (queue: keyof QueueWakeups) => (listener: () => void) => {
    listeners[queue].add(listener);
    const own = OWN_SENDS[queue](listener);
    return () => {
      listeners[queue].delete(listener);
      own();
    };
  };
  const queueWorkers = startQueueWorkers(engine, { knowledge: subscribe('knowledge'), webhooks: subscribe('webhooks'), 'knowledge-jobs': subscribe('knowledge-jobs') });
  stopOnSignals(async () => {
    await queueWorkers.stop();
    closeExtractionPool();
    await flushActivity(engine);
    await engine.close();
  });
  answerPrimary((queue) => {
    for (const listener of listeners[queue]) listener();
  });
  process.send!({ type: 'ready' } satisfies Message);
}
