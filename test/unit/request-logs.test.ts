/**
 * Log lines name their request: every line written while a route, a streamed answer or a queue
 * message is handled carries `request_id` (and `operation_id`, `message_id` where there is one),
 * through awaits, with concurrent requests kept apart. Lines are read from stderr as CloudWatch gets them.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { SQSEvent } from 'aws-lambda';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { useEngine } from '../../lambdas/engine/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { httpHandler } from '../../lambdas/http/handler.js';
import { serverSentEvents } from '../../lambdas/http/sse.js';
import { handler as streamsConsumerHandler } from '../../lambdas/consumers/streams.js';
import { inRequest, log, setInvocationIds, withLogIds } from '../../lambdas/shared/log.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { apiEvent, lambdaContext, testRoute } from '../helpers/events.js';

let dir: string;
let engine: EmbeddedEngine;
let orgKey: string;
let lines: Record<string, unknown>[];

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'logs-'));
  engine = createEmbeddedEngine({ dataDir: dir });
  useEngine(engine);
  const t = new Tenants(engine.kv, () => Date.now());
  orgKey = (await t.createSecretKey((await t.createOrganization('o')).id)).key;
});
afterAll(async () => {
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});
beforeEach(() => {
  useSettings({ logLevel: 'info' });
  lines = [];
  const write = process.stderr.write.bind(process.stderr);
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array, ...rest: unknown[]) => {
    const text = String(chunk);
    if (!text.startsWith('{')) return write(chunk, ...(rest as []));
    for (const line of text.trim().split('\n')) lines.push(JSON.parse(line) as Record<string, unknown>);
    return true;
  });
});
afterEach(() => {
  vi.restoreAllMocks();
  useSettings();
});

const lineOf = (message: string) => lines.find((l) => l.message === message);
const headers = (over: Record<string, string> = {}) => ({ authorization: `Bearer ${orgKey}`, ...over });

describe('a route', () => {
  const logsAfterAwaits = httpHandler(testRoute({ method: 'GET' }), async (req) => {
    await sleep(Number(req.query.wait ?? 0));
    log.info(`inside ${req.query.name}`);
    await Promise.resolve();
    log.warn(`after ${req.query.name}`, { extra: 1 });
    return { status: 204 };
  });

  it("carries API Gateway's request id and the X-Operation-Id on every line", async () => {
    const res = await logsAfterAwaits(
      apiEvent({ path: '/v1/test', requestId: 'req-gateway-1', query: { name: 'a' }, headers: headers({ 'x-operation-id': 'op_abcdefgh1' }) }),
      lambdaContext(),
    );
    expect(res.statusCode).toBe(204);
    for (const message of ['inside a', 'after a']) expect(lineOf(message)).toMatchObject({ request_id: 'req-gateway-1', operation_id: 'op_abcdefgh1' });
    expect(lineOf('after a')).toMatchObject({ level: 'warn', extra: 1 });
  });

  it('keeps concurrent requests of the local server apart: the chain and the handler name their own request explicitly', async () => {
    // The local server serves many requests at once in one process: no request's ids are the process's.
    const failsAfterAwaits = httpHandler(testRoute({ method: 'GET' }), async (req, { logIds }) => {
      await sleep(Number(req.query.wait ?? 0));
      log.info(`explicit ${req.query.name}`, { ...logIds });
      throw new Error(`broken ${req.query.name}`);
    });
    const local = () => lambdaContext({ transport: { mode: 'piped', concurrent: true } });
    setInvocationIds(undefined);
    const [slow, fast] = await Promise.all([
      failsAfterAwaits(apiEvent({ path: '/v1/test', requestId: 'slow', query: { name: 'slow', wait: '20' }, headers: headers({ 'x-operation-id': 'op_slow_0001' }) }), local()),
      failsAfterAwaits(apiEvent({ path: '/v1/test', requestId: 'fast', query: { name: 'fast' }, headers: headers() }), local()),
    ]);
    expect([slow.statusCode, slow.headers?.['x-request-id'], fast.statusCode, fast.headers?.['x-request-id']]).toEqual([500, 'slow', 500, 'fast']);
    expect(lineOf('explicit slow')).toMatchObject({ request_id: 'slow', operation_id: 'op_slow_0001' });
    expect(lineOf('explicit fast')?.request_id).toBe('fast');
    const unhandled = lines.filter((l) => l.message === 'unhandled error');
    expect(unhandled.map((l) => [l.request_id, String(l.error).split('\n')[0]])).toEqual([
      ['fast', 'Error: broken fast'],
      ['slow', 'Error: broken slow'],
    ]);
    expect(unhandled[1].operation_id).toBe('op_slow_0001');
    // Lines written without the request's ids carry none: the process has no request of its own.
    log.info('between requests');
    expect(Object.keys(lineOf('between requests')!).sort()).toEqual(['level', 'message', 'time']);
  });

  it("falls back to the invocation's id; the AI API logs the operation id it echoes", async () => {
    const event = apiEvent({ path: '/v1/test', query: { name: 'b' }, headers: headers() });
    delete (event.requestContext as { requestId?: string }).requestId;
    const res = await logsAfterAwaits(event, lambdaContext({ awsRequestId: 'invocation-7' }));
    expect(lineOf('inside b')).toMatchObject({ request_id: 'invocation-7', operation_id: res.headers?.['x-operation-id'] });
  });

  it('logs a well-formed X-Operation-Id on other APIs, and none when absent or malformed', async () => {
    const data = httpHandler(testRoute({ api: 'data', method: 'GET' }), async (req) => {
      log.info(`data ${req.query.name}`);
      return { status: 204 };
    });
    await data(apiEvent({ path: '/v1/test', query: { name: 'sent' }, headers: headers({ 'x-operation-id': 'op_data_1234' }) }), lambdaContext());
    await data(apiEvent({ path: '/v1/test', query: { name: 'none' }, headers: headers() }), lambdaContext());
    await data(apiEvent({ path: '/v1/test', query: { name: 'bad' }, headers: headers({ 'x-operation-id': 'no spaces allowed' }) }), lambdaContext());
    expect(lineOf('data sent')?.operation_id).toBe('op_data_1234');
    expect(lineOf('data none')).not.toHaveProperty('operation_id');
    expect(lineOf('data bad')).not.toHaveProperty('operation_id');
    expect(lineOf('data none')?.request_id).toEqual(expect.any(String));
  });

  it('names the request on the lines of a streamed answer the runtime reads after the handler returned', async () => {
    async function* chunks() {
      yield { n: 1 };
      await sleep(1);
      log.info('mid-stream');
      throw new Error('upstream broke');
    }
    const streamed = httpHandler(testRoute({ method: 'GET' }), async () => serverSentEvents(chunks()));
    const res = await streamed(apiEvent({ path: '/v1/test', requestId: 'req-sse', headers: headers() }), lambdaContext({ transport: { mode: 'piped' } }));
    for await (const _ of res.stream!);
    expect(lineOf('mid-stream')?.request_id).toBe('req-sse');
    expect(lineOf('event stream failed')?.request_id).toBe('req-sse');

    // The local server: the stream's failure line names the request it was given.
    lines = [];
    const local = httpHandler(testRoute({ method: 'GET' }), async (_req, { logIds }) => serverSentEvents(chunks(), { logIds }));
    setInvocationIds(undefined);
    const piped = await local(apiEvent({ path: '/v1/test', requestId: 'req-local-sse', headers: headers() }), lambdaContext({ transport: { mode: 'piped', concurrent: true } }));
    for await (const _ of piped.stream!);
    expect(lineOf('event stream failed')?.request_id).toBe('req-local-sse');
  });
});

describe('queue consumers and lines outside a request', () => {
  it('a line outside any request carries no ids', () => {
    setInvocationIds(undefined); // a cold start: no invocation yet (the tests above were invocations)
    log.info('cold start');
    expect(Object.keys(lineOf('cold start')!).sort()).toEqual(['level', 'message', 'time']);
  });

  it('a message adds its id to the invocation, each message its own', async () => {
    await inRequest({ request_id: 'invocation-1' }, () =>
      Promise.all(
        ['m1', 'm2'].map((id, i) =>
          withLogIds({ message_id: id }, async () => {
            await sleep(i ? 0 : 10);
            log.info(`message ${id}`);
          }),
        ),
      ),
    );
    expect(lineOf('message m1')).toMatchObject({ request_id: 'invocation-1', message_id: 'm1' });
    expect(lineOf('message m2')).toMatchObject({ request_id: 'invocation-1', message_id: 'm2' });
  });

  it('a request without an id is given one', () => {
    inRequest({}, () => log.info('made up'));
    expect(lineOf('made up')?.request_id).toMatch(/^[0-9a-f-]{36}$/);
  });

  it("the SQS-triggered function's lines carry the invocation's id and the message's", async () => {
    // A wake for a subscription that does not exist fails its delivery: the consumer logs it.
    const failing = { ...engine.kv, get: () => Promise.reject(new Error('store down')) };
    useEngine({ ...engine, kv: failing } as unknown as EmbeddedEngine);
    try {
      const event = { Records: [{ messageId: 'msg-1', body: JSON.stringify({ subscription_id: 'sub_1' }), receiptHandle: 'r', attributes: { ApproximateReceiveCount: '1' } }] } as unknown as SQSEvent;
      const res = await streamsConsumerHandler(event, lambdaContext({ awsRequestId: 'invocation-9' }));
      expect(res.batchItemFailures).toEqual([{ itemIdentifier: 'msg-1' }]);
    } finally {
      useEngine(engine);
    }
    expect(lineOf('stream delivery failed; the wake returns to the queue')).toMatchObject({ request_id: 'invocation-9', message_id: 'msg-1' });
  });
});
