/**
 * The Lambda response-streaming wrapper (lambdas/http/response-streaming.ts) with a stand-in for the runtime's
 * `awslambda`: status and headers come first, a streamed answer's chunks leave as the route yields
 * them (the first before the route's stream has ended), a whole answer is written whole, and a
 * client that leaves (the response stream destroyed) destroys the route's stream.
 */
import type { APIGatewayProxyEventV2, Context } from 'aws-lambda';
import { Readable, Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { RouteFunction } from '../../lambdas/http/handler.js';
import { streaming, type AwsLambdaRuntime, type StreamMetadata, type StreamingHandlerBody } from '../../lambdas/http/response-streaming.js';
import type { RouteResult, Transport } from '../../lambdas/http/types.js';

type Record_ = { kind: 'metadata'; at: number; metadata: StreamMetadata } | { kind: 'chunk'; at: number; text: string; bytes: Buffer } | { kind: 'end'; at: number };

/** The response stream Lambda hands the handler, recording what is written and when. */
class ResponseStream extends Writable {
  readonly records: Record_[] = [];
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (error?: Error | null) => void): void {
    this.records.push({ kind: 'chunk', at: performance.now(), text: chunk.toString('utf8'), bytes: Buffer.from(chunk) });
    done();
  }
  override _final(done: (error?: Error | null) => void): void {
    this.records.push({ kind: 'end', at: performance.now() });
    done();
  }
  get chunks() {
    return this.records.filter((r) => r.kind === 'chunk').map((r) => (r as { text: string }).text);
  }
}

/** The runtime's `awslambda`: streamifyResponse hands back the body; HttpResponseStream.from records the metadata. */
const fakeRuntime: AwsLambdaRuntime = {
  streamifyResponse: (body: StreamingHandlerBody) => body as never,
  HttpResponseStream: {
    from(stream, metadata) {
      (stream as ResponseStream).records.push({ kind: 'metadata', at: performance.now(), metadata });
      return stream;
    },
  },
};

/** A function URL event (payload format 2.0). */
const event = (method = 'POST', path = '/v1/chat/completions'): APIGatewayProxyEventV2 =>
  ({
    version: '2.0',
    routeKey: '$default',
    rawPath: path,
    rawQueryString: '',
    headers: { 'content-type': 'application/json', authorization: 'Bearer sk_test' },
    body: '{"model":"m","stream":true}',
    isBase64Encoded: false,
    requestContext: { http: { method, path, protocol: 'HTTP/1.1', sourceIp: '1.2.3.4', userAgent: 'test' }, requestId: 'r1' },
  }) as unknown as APIGatewayProxyEventV2;

const context = () => ({ awsRequestId: 'r1', getRemainingTimeInMillis: () => 60_000 }) as unknown as Context;

async function run(fn: RouteFunction, options: Parameters<typeof streaming>[1] = {}, ev = event()) {
  const handler = streaming(fn, { runtime: fakeRuntime, ...options }) as unknown as StreamingHandlerBody;
  const response = new ResponseStream();
  const done = handler(ev, response, context());
  return { response, done };
}

/** A route function answering server-sent events, `count` chunks `gapMs` apart; `state` records its stream's end. */
function sseRoute(count: number, gapMs: number) {
  const state = { endedAt: 0, destroyed: false, transport: undefined as Transport | undefined, stream: undefined as Readable | undefined };
  const fn: RouteFunction = async (_event, ctx) => {
    state.transport = ctx.transport;
    async function* events() {
      for (let i = 0; i < count; i++) {
        if (i > 0) await sleep(gapMs);
        yield `data: {"n":${i}}\n\n`;
      }
      yield 'data: [DONE]\n\n';
      state.endedAt = performance.now();
    }
    const stream = Readable.from(events(), { objectMode: false });
    stream.on('close', () => (state.destroyed = !stream.readableEnded));
    state.stream = stream;
    return { statusCode: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' }, body: '', stream } satisfies RouteResult;
  };
  return { fn, state };
}

describe('streaming(): a route function behind a RESPONSE_STREAM function URL', () => {
  it('calls the route in piped mode, writes status and headers first, then each chunk before the stream has ended', async () => {
    const { fn, state } = sseRoute(4, 60);
    const { response, done } = await run(fn);
    await done;
    expect(state.transport).toEqual({ mode: 'piped' });
    expect(response.records[0]).toMatchObject({
      kind: 'metadata',
      metadata: { statusCode: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' } },
    });
    expect(response.chunks.join('')).toBe('data: {"n":0}\n\ndata: {"n":1}\n\ndata: {"n":2}\n\ndata: {"n":3}\n\ndata: [DONE]\n\n');
    expect(response.records.at(-1)?.kind).toBe('end');
    const chunks = response.records.filter((r) => r.kind === 'chunk');
    // The first chunk left well before the route's stream finished (3 gaps of 60 ms later).
    expect(chunks[0].at).toBeLessThan(state.endedAt - 100);
    // And the chunks left spread over time, as they came, not all at once at the end.
    expect(chunks[3].at - chunks[0].at).toBeGreaterThanOrEqual(150);
    expect(state.destroyed).toBe(false);
  });

  it('writes a whole answer (an error JSON) as it is, after its status and headers', async () => {
    const body = JSON.stringify({ error: { code: 'invalid_request', message: 'no', type: 'invalid_request_error', param: 'model' } });
    const fn: RouteFunction = async () => ({ statusCode: 400, headers: { 'content-type': 'application/json', 'x-operation-id': 'op1' }, body });
    const { response, done } = await run(fn);
    await done;
    expect(response.records.map((r) => r.kind)).toEqual(['metadata', 'chunk', 'end']);
    expect(response.records[0]).toMatchObject({ metadata: { statusCode: 400, headers: { 'content-type': 'application/json', 'x-operation-id': 'op1' } } });
    expect(response.chunks).toEqual([body]);
  });

  it('decodes a base64 body, and writes no chunk for an empty one', async () => {
    const bytes = Buffer.from([0, 1, 2, 250]);
    const binary = await run(async () => ({ statusCode: 200, headers: {}, body: bytes.toString('base64'), isBase64Encoded: true }));
    await binary.done;
    expect(Buffer.concat(binary.response.records.flatMap((r) => (r.kind === 'chunk' ? [r.bytes] : [])))).toEqual(bytes);
    const empty = await run(async () => ({ statusCode: 204, headers: {}, body: '' }));
    await empty.done;
    expect(empty.response.records.map((r) => r.kind)).toEqual(['metadata', 'end']);
  });

  it('destroys the route stream when the response stream is destroyed (the client left)', async () => {
    const { fn, state } = sseRoute(1000, 20);
    const { response, done } = await run(fn);
    while (response.chunks.length < 2) await sleep(5);
    response.destroy();
    await done;
    expect(state.stream!.destroyed).toBe(true);
    // Readable.from closes once its generator has returned (after the pending gap).
    if (!state.stream!.closed) await new Promise((resolve) => state.stream!.once('close', resolve));
    expect(state.destroyed).toBe(true);
    expect(state.endedAt).toBe(0);
    expect(response.chunks.length).toBeLessThan(10);
  });

  it('sends a request the route does not serve to `otherwise`, as the HTTP API sends it to $default', async () => {
    const served: string[] = [];
    const route: RouteFunction = async () => (served.push('route'), { statusCode: 200, headers: {}, body: 'ok' });
    const fallback: RouteFunction = async () => (served.push('fallback'), { statusCode: 404, headers: { 'content-type': 'application/json' }, body: '{"error":{}}' });
    const accepts = (e: APIGatewayProxyEventV2) => e.requestContext.http.method === 'POST';
    await (await run(route, { accepts, otherwise: fallback }, event('GET'))).done;
    await (await run(route, { accepts, otherwise: fallback }, event('POST'))).done;
    expect(served).toEqual(['fallback', 'route']);
  });

  it('answers an error escaping the route function with the API error shape, 500', async () => {
    const { response, done } = await run(async () => {
      throw new Error('boom');
    });
    await done;
    expect(response.records[0]).toMatchObject({ metadata: { statusCode: 500, headers: { 'content-type': 'application/json' } } });
    expect(JSON.parse(response.chunks.join(''))).toMatchObject({ error: { code: 'internal_error', type: 'api_error' } });
  });

  it('outside Lambda (no awslambda, none injected) the handler refuses to run instead of failing at import', async () => {
    const handler = streaming(async () => ({ statusCode: 200, body: '' })) as unknown as () => Promise<void>;
    await expect(handler()).rejects.toThrow(/Lambda Node.js runtime/);
  });
});
