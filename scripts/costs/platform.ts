/**
 * The platform the cost model calls: the embedded engine on a temporary directory behind a metering
 * engine (meter.ts), the development tenant, and the real handlers called as Lambda calls them, with
 * an API Gateway event and a Lambda context, in this process (no HTTP server in between: the duration
 * measured is the handler's own, what Lambda bills).
 */
import type { SQSEvent } from 'aws-lambda';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { flushActivity } from '../../lambdas/activity/activity.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import type { Engine, QueueMessage } from '../../lambdas/engine/ports.js';
import type { RouteFunction } from '../../lambdas/http/handler.js';
import { routeById } from '../../lambdas/http/routes.js';
import type { RouteResult } from '../../lambdas/http/types.js';
import { bootstrap, type DevCredentials } from '../../lambdas/local/bootstrap.js';
import { apiEvent, lambdaContext, type ApiEventOptions } from '../../test/helpers/events.js';
import { Meter, meteredEngine } from './meter.js';

const LAMBDAS = join(import.meta.dirname, '..', '..', 'lambdas');

export interface CostPlatform {
  /** The metered engine the handlers get (getEngine()). */
  engine: Engine;
  /** The engine underneath, for setup that must not be counted. */
  bare: Engine;
  meter: Meter;
  credentials: DevCredentials;
  /** Calls route `routeId` as API Gateway would, then writes the call's activity as Lambda does before returning; throws unless it answers `expect`. */
  call(routeId: string, request: CallRequest): Promise<RouteResult>;
  /** Hands `messages` to a queue consumer's Lambda handler (`lambdas/consumers/<name>.ts`) as one SQS event. */
  consume(consumer: string, messages: QueueMessage[]): Promise<void>;
  /** Runs a scheduled function's handler (`lambdas/consumers/<name>.ts`) as its schedule does. */
  runScheduled(consumer: string): Promise<void>;
  close(): Promise<void>;
}

export interface CallRequest extends Omit<ApiEventOptions, 'method' | 'routeKey' | 'body'> {
  /** The concrete path; the route's template fills the route key. */
  path: string;
  body?: unknown;
  expect: number;
}

const modules = new Map<string, Promise<{ handler: (...args: any[]) => Promise<any> }>>();
const load = (module: string) => {
  let mod = modules.get(module);
  if (!mod) modules.set(module, (mod = import(pathToFileURL(join(LAMBDAS, `${module}.ts`)).href)));
  return mod;
};

export async function startCostPlatform(): Promise<CostPlatform> {
  const dataDir = mkdtempSync(join(tmpdir(), 'platform-costs-'));
  const bare = createEmbeddedEngine({ dataDir });
  const meter = new Meter();
  const engine = meteredEngine(bare, meter);
  meter.on = false;
  const { credentials } = await bootstrap(bare, dataDir);
  meter.on = true;
  useEngine(engine);
  const bearer = { authorization: `Bearer ${credentials.secret_key}` };

  return {
    engine,
    bare,
    meter,
    credentials,
    async call(routeId, request) {
      const route = routeById(routeId);
      const handler = (await load(route.handler)).handler as RouteFunction;
      const { body, expect, ...options } = request;
      const raw = body === undefined ? undefined : Buffer.isBuffer(body) ? body : JSON.stringify(body);
      const headers: Record<string, string> = { ...bearer, ...options.headers };
      if (raw !== undefined) {
        headers['content-length'] = String(Buffer.byteLength(raw));
        headers['content-type'] ??= 'application/json';
      }
      const result = await handler(
        apiEvent({ ...options, method: route.method, routeKey: `${route.method} ${route.path}`, headers, body: raw }),
        lambdaContext({ memoryLimitInMB: '512' }),
      );
      await flushActivity(engine);
      if (result.statusCode !== expect) throw new Error(`${routeId} answered ${result.statusCode}, not ${expect}: ${String(result.body).slice(0, 500)}`);
      return result;
    },
    async consume(consumer, messages) {
      const { handler } = await load(`consumers/${consumer}`);
      const event: SQSEvent = {
        Records: messages.map((m) => ({
          messageId: m.id,
          receiptHandle: m.receipt,
          body: m.body,
          attributes: { ApproximateReceiveCount: String(m.receiveCount), SentTimestamp: '0', SenderId: 'costs', ApproximateFirstReceiveTimestamp: '0' },
          messageAttributes: {},
          md5OfBody: '',
          eventSource: 'aws:sqs',
          eventSourceARN: `arn:aws:sqs:us-east-1:000000000000:${consumer}`,
          awsRegion: 'us-east-1',
        })),
      };
      const answer = await handler(event, lambdaContext({ memoryLimitInMB: '512' }));
      if (answer.batchItemFailures.length) throw new Error(`${consumer} failed ${answer.batchItemFailures.length} of ${messages.length} messages`);
    },
    async runScheduled(consumer) {
      const { handler } = await load(`consumers/${consumer}`);
      await handler({ source: 'aws.events', 'detail-type': 'Scheduled Event' }, lambdaContext({ memoryLimitInMB: '512' }));
    },
    async close() {
      await flushActivity(engine);
      await bare.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}
