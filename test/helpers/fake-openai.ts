/**
 * A fake OpenAI-compatible upstream on loopback (real HTTP): records every request, answers chat
 * completions (whole or streamed, chunk by chunk with pauses the test controls) and embeddings.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface FakeRequest {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: Record<string, any>;
}

export interface FakeOpenAi {
  baseUrl: string;
  requests: FakeRequest[];
  /** Chat answers: replace to change what the next calls get. */
  behavior: {
    status: number;
    /** Streamed chunks' contents; `usage` chunk added at the end when asked. */
    chunks: string[];
    /** Wait before each chunk after the first, ms. */
    chunkDelayMs: number;
    /** Resolves when the stream may send its last chunk (tests prove the first arrived before). */
    holdLast?: Promise<void>;
    /** Fail the stream after this many chunks (the connection is destroyed). */
    breakAfter?: number;
    /** Answer no bytes for this long (timeouts). */
    stallMs: number;
  };
  /** Streams the fake saw end because the client went away. */
  aborted: number;
  close(): Promise<void>;
}

export async function startFakeOpenAi(): Promise<FakeOpenAi> {
  const fake: Omit<FakeOpenAi, 'baseUrl' | 'close'> = {
    requests: [],
    behavior: { status: 200, chunks: ['Hel', 'lo', '!'], chunkDelayMs: 0, stallMs: 0 },
    aborted: 0,
  };
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      const body = raw ? JSON.parse(raw) : {};
      fake.requests.push({ path: req.url ?? '', headers: req.headers, body });
      const b = fake.behavior;
      // A caller that hangs up before the answer's end (while stalled, too) counts as an abort.
      let closed = false;
      res.on('close', () => {
        if (!res.writableFinished) {
          closed = true;
          fake.aborted++;
        }
      });
      if (b.stallMs) await new Promise((r) => setTimeout(r, b.stallMs));
      if (closed) return;
      if (b.status !== 200) {
        res.writeHead(b.status, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ error: { message: 'upstream says no, sk-secret-in-upstream-message' } }));
      }
      if (req.url?.endsWith('/embeddings')) {
        const inputs: string[] = Array.isArray(body.input) ? body.input : [body.input];
        res.writeHead(200, { 'content-type': 'application/json' });
        // Out of order on purpose: the gateway answers in input order.
        const data = inputs.map((s, index) => ({ object: 'embedding', index, embedding: [s.length, index, 0.5] })).reverse();
        return res.end(JSON.stringify({ object: 'list', data, model: body.model, usage: { prompt_tokens: inputs.length * 3, total_tokens: inputs.length * 3 } }));
      }
      const created = 1_700_000_000;
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(
          JSON.stringify({
            id: 'chatcmpl-fake',
            object: 'chat.completion',
            created,
            model: body.model,
            choices: [{ index: 0, message: { role: 'assistant', content: b.chunks.join('') }, finish_reason: 'stop' }],
            usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 },
          }),
        );
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const send = (chunk: unknown) => res.write(`data: ${JSON.stringify(chunk)}\n\n`);
      for (let i = 0; i < b.chunks.length; i++) {
        if (closed) return;
        if (b.breakAfter !== undefined && i === b.breakAfter) return res.destroy();
        if (i > 0 && b.chunkDelayMs) await new Promise((r) => setTimeout(r, b.chunkDelayMs));
        if (i === b.chunks.length - 1 && b.holdLast) await b.holdLast;
        if (closed) return;
        send({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created, model: body.model, choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: b.chunks[i] } : { content: b.chunks[i] }, finish_reason: null }] });
      }
      send({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created, model: body.model, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
      if (body.stream_options?.include_usage) send({ id: 'chatcmpl-fake', object: 'chat.completion.chunk', created, model: body.model, choices: [], usage: { prompt_tokens: 11, completion_tokens: b.chunks.length, total_tokens: 11 + b.chunks.length } });
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`;
  return Object.assign(fake, {
    baseUrl,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  });
}
