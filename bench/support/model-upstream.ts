/**
 * The AI benchmark's model upstream (bench/ai.ts), in a process of its own as a real model server is:
 * an OpenAI-compatible node:http server answering fixed bytes without parsing the request. Under
 * `/v1/...` it answers at once; under `/slow/v1/...` after a random 50 to 150 ms (a model takes time,
 * and not always the same). A streamed answer is asked for with `Accept: text/event-stream` (as the
 * gateway asks) or `x-bench-stream: 1` (the bench's direct calls). Prints `upstream <base url>`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const SLOW_DELAY_MS = 100;
const SLOW_JITTER_MS = 50;

const COMPLETION = JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1_700_000_000, model: 'bench-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the bench upstream.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
});
const CHUNK = (content: string) => `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench-model', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const STREAM = `${CHUNK('Hello')}${CHUNK(' there')}data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench-model', choices: [], usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } })}\n\ndata: [DONE]\n\n`;
const EMBEDDINGS = JSON.stringify({ object: 'list', model: 'bench-embed', data: [0, 1].map((index) => ({ object: 'embedding', index, embedding: Array.from({ length: 16 }, (_, i) => i / 16) })), usage: { prompt_tokens: 4, total_tokens: 4 } });

const answer = (req: http.IncomingMessage, res: http.ServerResponse) => {
  if (req.url?.endsWith('/embeddings')) return res.writeHead(200, { 'content-type': 'application/json' }).end(EMBEDDINGS);
  if (req.headers.accept === 'text/event-stream' || req.headers['x-bench-stream'] === '1') return res.writeHead(200, { 'content-type': 'text/event-stream' }).end(STREAM);
  res.writeHead(200, { 'content-type': 'application/json' }).end(COMPLETION);
};

const server = http.createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    if (!req.url?.startsWith('/slow/')) return answer(req, res);
    setTimeout(() => answer(req, res), SLOW_DELAY_MS + (Math.random() * 2 - 1) * SLOW_JITTER_MS);
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`upstream http://127.0.0.1:${(server.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
