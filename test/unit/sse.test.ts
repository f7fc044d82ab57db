/**
 * Server-sent events (lambdas/http/sse.ts) over any async generator of JSON chunks: the framing,
 * the end, the error event, what runs before the last event, and a client leaving.
 */
import { describe, expect, it } from 'vitest';
import type { Readable } from 'node:stream';
import { PlatformError } from '../../lambdas/shared/errors.js';
import { serverSentEvents } from '../../lambdas/http/sse.js';

async function readAll(body: unknown): Promise<string> {
  let text = '';
  for await (const chunk of body as Readable) text += String(chunk);
  return text;
}

describe('serverSentEvents', () => {
  it('writes each chunk as a data event and ends with [DONE], with the event-stream headers', async () => {
    async function* chunks() {
      yield { n: 1 };
      yield { n: 2, text: 'é\n' };
    }
    const res = serverSentEvents(chunks());
    expect(res.status).toBe(200);
    expect(res.headers).toEqual({ 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' });
    expect(await readAll(res.body)).toBe('data: {"n":1}\n\ndata: {"n":2,"text":"é\\n"}\n\ndata: [DONE]\n\n');
  });

  it('a failure part-way is an error event in the error shape, a PlatformError as itself, anything else as the route says', async () => {
    async function* failing(error: Error) {
      yield { n: 1 };
      throw error;
    }
    const known = await readAll(serverSentEvents(failing(new PlatformError('timeout_error', 'Too slow.'))).body);
    expect(known.startsWith('data: {"n":1}\n\ndata: {"error":')).toBe(true);
    expect(known.endsWith('}\n\n')).toBe(true);
    expect(JSON.parse(known.split('data: ')[2]).error).toMatchObject({ code: 'timeout_error', message: 'Too slow.' });
    const unknown = await readAll(serverSentEvents(failing(new Error('boom')), { unexpected: { error: () => new PlatformError('upstream_error', 'Gone.'), what: 'test stream' } }).body);
    const last = JSON.parse(unknown.split('data: ')[2]);
    expect(last.error).toMatchObject({ code: 'upstream_error', message: 'Gone.' });
    expect(unknown).not.toContain('boom');
  });

  it('runs beforeLast before the last event is written, at the end and on failure', async () => {
    for (const fail of [false, true]) {
      async function* chunks() {
        yield { n: 1 };
        if (fail) throw new Error('x');
      }
      let text = '';
      let letGo!: () => void;
      let called!: () => void;
      const reached = new Promise<void>((resolve) => (called = resolve));
      const body = serverSentEvents(chunks(), {
        beforeLast: () =>
          new Promise<void>((go) => {
            letGo = go;
            called();
          }),
      }).body as Readable;
      body.on('data', (c) => (text += String(c)));
      const ended = new Promise((resolve) => body.on('end', resolve));
      await reached;
      await new Promise((resolve) => setImmediate(resolve)); // what was pushed has been read
      expect(text).toBe('data: {"n":1}\n\n');
      letGo();
      await ended;
      expect(text).toMatch(fail ? /^data: \{"n":1\}\n\ndata: \{"error":/ : /^data: \{"n":1\}\n\ndata: \[DONE\]\n\n$/);
    }
  });

  it('a client that leaves aborts the upstream at once and still runs beforeLast', async () => {
    const upstream = new AbortController();
    let released!: () => void;
    const releasedOnce = new Promise<void>((resolve) => (released = resolve));
    async function* chunks() {
      yield { n: 1 };
      // Waits for a chunk that never comes, until aborted.
      await new Promise((_resolve, reject) => upstream.signal.addEventListener('abort', () => reject(new Error('aborted'))));
    }
    const body = serverSentEvents(chunks(), { abortUpstream: () => upstream.abort(), beforeLast: async () => released() }).body as Readable;
    const first = await new Promise<string>((resolve) => body.once('data', (c) => resolve(String(c))));
    expect(first).toBe('data: {"n":1}\n\n');
    body.destroy();
    expect(upstream.signal.aborted).toBe(true);
    await releasedOnce;
  });
});
