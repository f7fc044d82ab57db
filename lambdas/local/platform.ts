/**
 * Starts the local platform: the three APIs on 127.0.0.1 over one engine, and when asked the
 * operations port (ops-server.ts) and the console (its pages and API, console-files.ts), with a clean
 * shutdown.
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import type { Engine } from '../engine/ports.js';
import { useEngine } from '../engine/index.js';
import type { RouteFunction } from '../http/handler.js';
import type { Api } from '../shared/api.js';
import { ROUTES } from '../http/routes.js';
import { flushActivity } from '../activity/activity.js';
import { createApiServer } from './http-server.js';
import { consoleFiles } from './console-files.js';
import { serveConsoleAt } from '../http/console-origin.js';
import { createOpsServer } from './ops-server.js';
import { LocalStreams } from './streams.js';
import { startQueueWorkers } from './queue-workers.js';
import { closeExtractionPool } from '../knowledge/extraction-pool.js';

export interface PlatformOptions {
  engine: Engine;
  host?: string;
  /** 0 picks a free port. */
  ports: Record<Api, number>;
  /** The operations port (`/healthz`, `/readyz`); none when absent (tests of the APIs). 0 picks a free one. */
  opsPort?: number;
  /** The console's port (its pages and `/console/api/…`); none when absent. 0 picks a free one. */
  consolePort?: number;
  /** Where the console's built pages are (tests give their own); console/dist/ of this checkout by default. */
  consoleDist?: string;
  /**
   * Whether this process also runs the queue consumers and sweeps (default true: a test's platform in
   * one process). `npm start` serves with false: its background processes run them (workers.ts).
   */
  background?: boolean;
}

export interface RunningPlatform {
  urls: Record<Api, string>;
  /** The operations port's URL, when one was asked for. */
  opsUrl?: string;
  /** The console's URL, when one was asked for. */
  consoleUrl?: string;
  close(): Promise<void>;
}

const LAMBDAS_DIR = join(import.meta.dirname, '..');

async function loadHandler(module: string): Promise<RouteFunction> {
  const mod = await import(pathToFileURL(join(LAMBDAS_DIR, `${module}.ts`)).href);
  if (typeof mod.handler !== 'function') throw new Error(`lambdas/${module}.ts exports no handler`);
  return mod.handler;
}

export async function startPlatform(options: PlatformOptions): Promise<RunningPlatform> {
  useEngine(options.engine);
  const host = options.host ?? '127.0.0.1';
  const servers = {} as Record<Api, Server>;
  // The Events API's WebSocket streams (docs/events/stream.md), where this process holds its sockets
  // (an engine whose sockets API Gateway holds, in tests of the AWS adapters, takes no upgrade here).
  const streams = options.engine.connections.holdsSockets ? new LocalStreams(options.engine) : undefined;
  const urls = {} as Record<Api, string>;
  const listen = (server: Server, port: number) =>
    new Promise<string>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => resolve(`http://${host}:${(server.address() as AddressInfo).port}`));
    });
  for (const api of ['ai', 'data', 'events'] as const) {
    const server = await createApiServer(api, ROUTES, (route) => loadHandler(route.handler), api === 'events' ? streams : undefined);
    urls[api] = await listen(server, options.ports[api]);
    servers[api] = server;
  }
  let consoleServer: Server | undefined;
  let consoleUrl: string | undefined;
  if (options.consolePort !== undefined) {
    const pages = consoleFiles(options.consoleDist);
    consoleServer = await createApiServer('console', ROUTES, (route) => loadHandler(route.handler), undefined, { prefix: '/console/api/', serve: pages.serve });
    consoleUrl = await listen(consoleServer, options.consolePort);
    // The CSRF step's origin and the invitation links' base, where CONSOLE_URL names none (a port the OS picked).
    serveConsoleAt(consoleUrl);
  }
  // Last: a process answers ready only once it serves every API.
  const ops = options.opsPort === undefined ? undefined : createOpsServer(options.engine);
  const opsUrl = ops ? await listen(ops, options.opsPort!) : undefined;
  const queueWorkers = options.background === false ? undefined : startQueueWorkers(options.engine);
  let closing: Promise<void> | undefined;
  return {
    urls,
    opsUrl,
    consoleUrl,
    close: () =>
      (closing ??= (async () => {
        // Stop accepting, close the open streams (1001), let in-flight requests finish, drop idle
        // keep-alive sockets, write the buffered activity events, then close the engine.
        const closed = Promise.all(
          [...Object.values(servers), ...(ops ? [ops] : []), ...(consoleServer ? [consoleServer] : [])].map(
            (server) =>
              new Promise<void>((resolve) => {
                // A connection whose answer is still being finished (a streamed download the client
                // has read whole) turns idle just after this call: dropped on the next sweep rather
                // than kept to its keep-alive timeout.
                const sweep = setInterval(() => server.closeIdleConnections(), 50);
                server.close(() => {
                  clearInterval(sweep);
                  resolve();
                });
                server.closeIdleConnections();
              }),
          ),
        );
        await streams?.close();
        await closed;
        await queueWorkers?.stop();
        if (queueWorkers) closeExtractionPool();
        await flushActivity(options.engine);
        await options.engine.close();
      })()),
  };
}
