/**
 * The local server's operations port (OPS_PORT), for process managers, load balancers and readers of
 * the APIs, apart from the three APIs: an API's unknown path stays `401` without a credential (spec 5
 * rule 1), so a probe or an unauthenticated reader has nothing to call there. Two health answers, as
 * Kubernetes' probes and LiteLLM's `/health/liveliness` and `/health/readiness` split them
 * (docs/decisions/request-ids-and-health.md), and the APIs' descriptions
 * (docs/decisions/openapi-serving.md, api-docs.ts):
 *
 *   GET /healthz   200 while the process serves: restart it when this stops answering
 *   GET /readyz    200 when the store answers a key-value read, else 503: send it no traffic meanwhile;
 *                  `degraded` (still 200: the APIs answer) when background work waits longer than
 *                  BACKLOG_DEGRADED_S, with each queue's backlog (docs/decisions/background-processes.md)
 *   GET /openapi/{ai,data,events}.json
 *                  the committed OpenAPI documents (docs/openapi/), with an ETag; 404 when missing
 *   GET /docs      a page rendering them (Scalar, served from node_modules at /docs/assets/…);
 *                  `?api=data` opens the Data API's
 *
 * It runs in the processes serving the APIs, never in a background process: a readiness answer says
 * whether requests are answered, whatever the background work is doing.
 *
 * HEAD too; anything else is 404. No credential: the answers tell nothing but up or down, and what
 * the published documents say.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Engine } from '../engine/ports.js';
import { SqliteQueue } from '../engine/embedded/queue.js';
import { QUEUES, type QueueName } from '../engine/queues.js';
import { settings } from '../shared/settings.js';
import { errorBody, toPlatformError } from '../http/error-response.js';
import { PlatformError } from '../shared/errors.js';
import { log } from '../shared/log.js';
import { parseTarget } from './http-server.js';
import { DOCS_PATHS, docsFiles, sendFile } from './api-docs.js';

/** A read slower than this counts as the store not answering (DynamoDB's own retries take longer). */
export const READY_TIMEOUT_MS = 2000;
/** A key nothing writes: reading it costs one point read and finds nothing, on either engine. */
const PROBE_KEY = { pk: 'ops#ready', sk: 'ops#ready' };
/** What the port serves, to GET and HEAD (the docs' test matches their curl lines to it); /docs' own scripts besides. */
export const OPS_PATHS = ['/healthz', '/readyz', ...DOCS_PATHS] as const;

export interface OpsServerOptions {
  /** Where the OpenAPI documents are read: docs/openapi/ of this checkout unless a test gives its own. */
  openapiDir?: string;
}

export function createOpsServer(engine: Engine, options: OpsServerOptions = {}): Server {
  const docs = docsFiles(options.openapiDir);
  const server = createServer((req, res) => {
    const { pathname } = parseTarget(req.url ?? '/');
    const method = req.method ?? 'GET';
    const reading = method === 'GET' || method === 'HEAD';
    if (reading && pathname === '/healthz') return answer(req, res, 200, { status: 'ok' });
    const file = reading ? docs.lookup(pathname) : undefined;
    if (file) {
      return void file.load().then(
        (content) => sendFile(req, res, file, content) || answer(req, res, 404, errorBody(new PlatformError('not_found', file.missing))),
        (error) => answer(req, res, 500, errorBody(toPlatformError(error))),
      );
    }
    if (reading && pathname === '/readyz') {
      return void storeAnswers(engine).then((store) => {
        const background = store === 'ok' ? backgroundBacklog(engine) : undefined;
        const status = store !== 'ok' ? 'unavailable' : background?.status === 'degraded' ? 'degraded' : 'ok';
        answer(req, res, store === 'ok' ? 200 : 503, { status, checks: { store, ...(background ? { background } : {}) } });
      });
    }
    answer(req, res, 404, errorBody(new PlatformError('not_found', `The operations port serves GET ${OPS_PATHS.join(', ')} only.`)));
  });
  // A probe connects every few seconds: keep no idle connection past the answer's.
  server.keepAliveTimeout = 5000;
  return server;
}

/** `ok` when a key-value read comes back within READY_TIMEOUT_MS, `unreachable` otherwise. */
async function storeAnswers(engine: Engine): Promise<'ok' | 'unreachable'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${READY_TIMEOUT_MS} ms`)), READY_TIMEOUT_MS);
  });
  try {
    await Promise.race([engine.kv.get(PROBE_KEY), timeout]);
    return 'ok';
  } catch (error) {
    log.warn('not ready: the store did not answer', { error: String(error) });
    return 'unreachable';
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The background processes' backlog, from the embedded queue (an SQS queue reports its own in
 * CloudWatch: lib/alarms.ts): per queue, the messages waiting and how long the oldest has waited;
 * `degraded` once one waited longer than BACKLOG_DEGRADED_S.
 */
function backgroundBacklog(engine: Engine) {
  if (!(engine.queue instanceof SqliteQueue)) return undefined;
  const queue = engine.queue;
  const threshold = settings().backlogDegradedSeconds;
  const queues = Object.fromEntries(
    (Object.keys(QUEUES) as QueueName[]).map((name) => {
      const { waiting, oldestWaitSeconds } = queue.backlog(name);
      return [name, { waiting, oldest_wait_seconds: oldestWaitSeconds }];
    }),
  );
  const late = Object.values(queues).some((q) => q.oldest_wait_seconds > threshold);
  return { status: late ? 'degraded' : 'ok', degraded_after_seconds: threshold, queues };
}

function answer(req: IncomingMessage, res: ServerResponse, status: number, body: unknown) {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store' });
  res.end(req.method === 'HEAD' ? undefined : text);
}
