/**
 * The AI benchmark's model upstream (bench/ai.ts), in a process of its own as a real model server is:
 * an OpenAI-compatible node:http server answering fixed bytes. It does not parse the request; it
 * only looks for `bench-delay-ms=<n>` in it (the benchmark's client puts it in a message or an input)
 * and answers that many milliseconds later, at once without it: the client chooses each call's model
 * time, so it can take it out of the latency it measures. A streamed answer is asked for with
 * `Accept: text/event-stream` (as the gateway asks), `x-bench-stream: 1` (the bench's direct calls) or
 * `"stream":true` in the body, as OpenAI reads it (Portkey's gateway asks for any type).
 * Prints `upstream <base url>`.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const DELAY = /bench-delay-ms=(\d+)/;
const STREAMED = /"stream"\s*:\s*true/;

const COMPLETION = JSON.stringify({
  id: 'chatcmpl-bench', object: 'chat.completion', created: 1_700_000_000, model: 'bench-model',
  choices: [{ index: 0, message: { role: 'assistant', content: 'Hello from the bench upstream.' }, finish_reason: 'stop' }],
  usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 },
});
const CHUNK = (content: string) => `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench-model', choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;
const STREAM = `${CHUNK('Hello')}${CHUNK(' there')}data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench-model', choices: [], usage: { prompt_tokens: 12, completion_tokens: 2, total_tokens: 14 } })}\n\ndata: [DONE]\n\n`;
const EMBEDDINGS = JSON.stringify({ object: 'list', model: 'bench-embed', data: [0, 1].map((index) => ({ object: 'embedding', index, embedding: Array.from({ length: 16 }, (_, i) => i / 16) })), usage: { prompt_tokens: 4, total_tokens: 4 } });

const answer = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => {
  if (req.url?.endsWith('/embeddings')) return res.writeHead(200, { 'content-type': 'application/json' }).end(EMBEDDINGS);
  if (req.headers.accept === 'text/event-stream' || req.headers['x-bench-stream'] === '1' || STREAMED.test(body)) return res.writeHead(200, { 'content-type': 'text/event-stream' }).end(STREAM);
  res.writeHead(200, { 'content-type': 'application/json' }).end(COMPLETION);
};

const server = http.createServer((req, res) => {
  let body = '';
  req.setEncoding('utf8');
  req.on('data', (chunk: string) => (body += chunk));
  req.on('end', () => {
    const delay = DELAY.exec(body);
    if (!delay) return answer(req, res, body);
    setTimeout(() => answer(req, res, body), Number(delay[1]));
  });
});
server.keepAliveTimeout = 65_000;
server.listen(0, '127.0.0.1', () => process.stdout.write(`upstream http://127.0.0.1:${(server.address() as AddressInfo).port}\n`));
process.on('SIGTERM', () => server.close(() => process.exit(0)));
