/**
 * What an upstream answers, however hostile, never takes a worker down and is never passed on
 * through the real `npm start` with two workers and the admin CLI:
 * - answers past the caps (a 128 MiB JSON answer, a 2 MiB stream line) are 502 upstream_error, the read
 *   stopped at the cap; invalid JSON, a body cut in the middle and a connection reset are 502 too (an
 *   error event once a stream has started), on every provider path: openai-compatible chat (whole and
 *   streamed), embeddings, and the generic run (`http`). After the flood the same worker processes
 *   answer, and a normal call made during it completed. Per-route caps: `route set --max-answer-bytes`,
 *   `--max-event-bytes`. A long stream line is read in linear time.
 * - stream chunks that are no object (`data: null`, `42`, `"str"`) are an upstream error;
 * - a generic run whose upstream redirects is 503 route_unavailable (docs/ai/run.md).
 * The fake upstream streams its big bodies from one reused buffer (no big strings in this process).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { servingPids, useLocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';
import { postWithOperation, type Answer } from '../helpers/ai-calls.js';
import { closeServer } from '../helpers/servers.js';
import { waitFor } from '../helpers/wait.js';

const MiB = 1024 * 1024;
let n = 0;
const opId = () => `op-upstream-answers-${++n}-${Date.now()}`;

// ---------- the hostile upstream: the scenario is named in the request ----------
let upstream: http.Server;
let upstreamUrl = '';
/** Answers the upstream could not finish because the gateway closed the connection first. */
const cutShort: Record<string, number> = {};

const FILLER = Buffer.alloc(64 * 1024, 'x');
/**
 * A body far past the 32 MiB answer cap and the loopback's socket buffers together (Linux autotunes a
 * receive buffer up to tcp_rmem's 32 MiB, plus 4 MiB sent): with a 40 MiB body the last 8 MiB could sit
 * in the kernel when the gateway stopped reading, so the upstream finished writing and could not tell.
 */
const HUGE = 128 * MiB;
const NUMBERS = Buffer.from('0.5,'.repeat(16 * 1024));

/**
 * Writes `prefix`, `total` bytes of `filler` (whole filler buffers), then `suffix`, minding backpressure;
 * stops when the caller hangs up, counting it in `cutShort[name]`.
 */
async function writeBig(res: http.ServerResponse, name: string, prefix: string, total: number, filler: Buffer, suffix: string): Promise<void> {
  let closed = false;
  res.on('close', () => {
    if (!res.writableFinished) {
      closed = true;
      cutShort[name] = (cutShort[name] ?? 0) + 1;
    }
  });
  res.write(prefix);
  for (let written = 0; written < total && !closed; written += filler.length) {
    if (!res.write(filler)) {
      await new Promise<void>((resolve) => {
        const go = () => {
          res.off('drain', go);
          res.off('close', go);
          resolve();
        };
        res.on('drain', go);
        res.on('close', go);
      });
    }
  }
  if (!closed) res.end(suffix);
}

const completion = (content: string) => JSON.stringify({ id: 'c1', object: 'chat.completion', created: 1, model: 'm', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } });
const chunk = (content: string) => JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content }, finish_reason: null }] });
/** A chunk's text around its content: a long line is HEAD, filler, TAIL. */
const [LINE_HEAD, LINE_TAIL] = chunk('@@').split('@@');
const embeddingList = JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: [0.5, 0.25] }], model: 'm', usage: { prompt_tokens: 1, total_tokens: 1 } });

/** A valid answer of each kind, `size` bytes of filler inside it, streamed. */
function bigValid(res: http.ServerResponse, kind: 'chat' | 'embed' | 'run', name: string, size: number, declareLength: boolean) {
  const [prefix, filler, suffix] =
    kind === 'chat'
      ? ['{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"', FILLER, '"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}']
      : kind === 'embed'
        ? ['{"object":"list","data":[{"object":"embedding","index":0,"embedding":[', NUMBERS, '0.5]}],"model":"m","usage":{"prompt_tokens":1,"total_tokens":1}}']
        : ['{"big":"', FILLER, '"}'];
  const total = Math.ceil(size / filler.length) * filler.length;
  const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json' };
  if (declareLength) headers['content-length'] = Buffer.byteLength(prefix) + total + Buffer.byteLength(suffix);
  res.writeHead(200, headers);
  void writeBig(res, name, prefix, total, filler, suffix);
}

function answerJson(res: http.ServerResponse, kind: 'chat' | 'embed' | 'run', scenario: string) {
  const ok = kind === 'chat' ? completion('fine') : kind === 'embed' ? embeddingList : '{"ok":true}';
  const name = `${kind}:${scenario}`;
  switch (scenario) {
    case 'ok':
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(ok);
    case 'slow-ok':
      return void setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(ok);
      }, 3000);
    case 'huge':
      return bigValid(res, kind, name, HUGE, false);
    case 'huge-declared':
      return bigValid(res, kind, name, HUGE, true);
    case 'over-route-cap':
      return bigValid(res, kind, name, 100 * 1024, false);
    case 'invalid':
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end('{"choices": [{"index": 0, "message": ');
    case 'cut':
      // Declares 2000 bytes, sends part of a valid answer, closes.
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '2000' });
      res.write(ok.slice(0, 10));
      return void setTimeout(() => res.destroy(), 50);
    case 'reset':
      res.writeHead(200, { 'content-type': 'application/json' });
      res.write(ok.slice(0, 10));
      return void setTimeout(() => res.socket?.resetAndDestroy(), 50);
    case 'redirect':
      res.writeHead(302, { location: `${upstreamUrl}/elsewhere`, 'content-type': 'application/json' });
      return res.end(ok);
    default:
      res.writeHead(400);
      return res.end();
  }
}

function answerStream(res: http.ServerResponse, scenario: string) {
  const name = `stream:${scenario}`;
  const event = (data: string) => res.write(`data: ${data}\n\n`);
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  switch (scenario) {
    case 'ok':
      event(chunk('fine'));
      return res.end('data: [DONE]\n\n');
    case 'sse-line':
      // One 2 MiB line, a valid chunk: the first event.
      return void writeBig(res, name, `data: ${LINE_HEAD}`, 2 * MiB, FILLER, `${LINE_TAIL}\n\ndata: [DONE]\n\n`);
    case 'sse-endless':
      // A line far past the cap and the socket buffers: the gateway must stop reading it.
      return void writeBig(res, name, `data: ${LINE_HEAD}`, HUGE, FILLER, `${LINE_TAIL}\n\ndata: [DONE]\n\n`);
    case 'sse-line-late':
      event(chunk('first'));
      return void writeBig(res, name, `data: ${LINE_HEAD}`, 2 * MiB, FILLER, `${LINE_TAIL}\n\ndata: [DONE]\n\n`);
    case 'over-route-cap':
      return void writeBig(res, name, `data: ${LINE_HEAD}`, 128 * 1024, FILLER, `${LINE_TAIL}\n\ndata: [DONE]\n\n`);
    case 'sse-long':
      // A 24 MiB line under a route cap that allows it: read in linear time.
      return void writeBig(res, name, `data: ${LINE_HEAD}`, 24 * MiB, FILLER, `${LINE_TAIL}\n\ndata: [DONE]\n\n`);
    case 'invalid':
      event('{"id": "c1", "choices": [');
      return res.end('data: [DONE]\n\n');
    case 'invalid-late':
      event(chunk('first'));
      event('{"id": "c1", "choices": [');
      return res.end('data: [DONE]\n\n');
    case 'cut':
      event(chunk('first'));
      res.write('data: {"id": "c1", "cho');
      return void setTimeout(() => res.destroy(), 50);
    case 'reset':
      event(chunk('first'));
      res.write('data: {"id": "c1", "cho');
      return void setTimeout(() => res.socket?.resetAndDestroy(), 50);
    case 'null':
    case '42':
    case '"str"':
      event(scenario);
      return res.end('data: [DONE]\n\n');
    case 'null-late':
    case '42-late':
    case '"str"-late':
      event(chunk('first'));
      event(scenario.slice(0, -5));
      return res.end('data: [DONE]\n\n');
    default:
      return res.end();
  }
}

async function startUpstream() {
  upstream = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      const body = JSON.parse(raw);
      if (req.url!.endsWith('/chat/completions')) {
        const scenario = body.messages[0].content as string;
        return body.stream ? answerStream(res, scenario) : answerJson(res, 'chat', scenario);
      }
      if (req.url!.endsWith('/embeddings')) return answerJson(res, 'embed', body.input[0]);
      if (req.url!.startsWith('/run')) return answerJson(res, 'run', body.scenario);
      res.writeHead(404);
      res.end();
    });
  });
  // Longer than the test: the gateway's keep-alive agent never reuses a connection this end just closed.
  upstream.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
}

// ---------- the platform ----------
// No route cache: the routes set below hold from the first call.
const p = useLocalProcess('ai-upstream-answers-', { LOCAL_WORKERS: '2', MODEL_ROUTES_CACHE_MS: '0' });
let ai = '';

const post = (path: string, body: object) => postWithOperation(ai, p.key, path, opId(), body);
const chat = (scenario: string, extra: object = {}) => post('/v1/chat/completions', { messages: [{ role: 'user', content: scenario }], ...extra });
const stream = (scenario: string, extra: object = {}) => chat(scenario, { stream: true, ...extra });
const embed = (scenario: string, extra: object = {}) => post('/v1/embeddings', { input: [scenario], ...extra });
const run = (scenario: string, extra: object = {}) => post('/v1/run', { input: { scenario }, ...extra });
const code = (a: Answer) => a.body?.error?.code;
/** A stream's events (data lines), `[DONE]` included. */
const events = (a: Answer) =>
  a.text
    .split('\n\n')
    .filter((e) => e.startsWith('data: '))
    .map((e) => e.slice(6));
const summary = (a: Answer) => ({ status: a.status, code: code(a), text: a.text.slice(0, 300) });

/** An answer 502 upstream_error before any byte of a stream. */
const is502 = (a: Answer) => a.status === 502 && code(a) === 'upstream_error';
/** A stream that started, then ended with the documented error event (upstream_error) and no [DONE]. */
function endsWithUpstreamError(a: Answer): boolean {
  const e = events(a);
  if (a.status !== 200 || e.length < 2 || e.includes('[DONE]')) return false;
  try {
    return JSON.parse(e.at(-1)!).error?.code === 'upstream_error';
  } catch {
    return false;
  }
}

/** The two workers serving the APIs. */
const workerPids = () => servingPids(p.local);

beforeAll(async () => {
  await startUpstream();
  ai = p.local.urls.ai;
  const route = (...args: string[]) => adminOk(p.dataDir, 'route', 'set', '--org', p.org, ...args);
  const oc = ['--provider', 'openai-compatible', '--base-url', `${upstreamUrl}/v1`, '--model', 'm'];
  route('--id', 'chat', '--endpoint', '/v1/chat/completions', ...oc, '--default');
  route('--id', 'embed', '--endpoint', '/v1/embeddings', ...oc, '--default');
  route('--id', 'run', '--endpoint', '/v1/run', '--provider', 'http', '--base-url', `${upstreamUrl}/run`, '--default');
  // Per-route caps, lower and higher than the defaults.
  route('--id', 'chat-small', '--endpoint', '/v1/chat/completions', ...oc, '--max-answer-bytes', '65536', '--max-event-bytes', '65536');
  route('--id', 'chat-long-lines', '--endpoint', '/v1/chat/completions', ...oc, '--max-event-bytes', String(32 * MiB));
  route('--id', 'embed-small', '--endpoint', '/v1/embeddings', ...oc, '--max-answer-bytes', '65536');
  route('--id', 'run-small', '--endpoint', '/v1/run', '--provider', 'http', '--base-url', `${upstreamUrl}/run`, '--max-answer-bytes', '65536');
}, 60_000);

afterAll(() => closeServer(upstream));

describe('oversized and malformed upstream answers', () => {
  it('a flood of them on every provider path is 502 upstream_error (an error event once streamed); the workers survive and a normal call made during it completes', async () => {
    const before = workerPids();
    expect(before).toHaveLength(2);
    // Made at the flood's start, answered 3 s later: it runs through all of it.
    const normal = Promise.all([chat('slow-ok'), run('slow-ok'), embed('slow-ok')]);
    const before502: [string, () => Promise<Answer>][] = [];
    const streamed: [string, () => Promise<Answer>][] = [];
    for (const s of ['huge', 'huge-declared', 'invalid', 'cut', 'reset']) {
      before502.push([`chat ${s}`, () => chat(s)], [`embeddings ${s}`, () => embed(s)], [`run ${s}`, () => run(s)]);
    }
    for (const s of ['sse-line', 'sse-endless', 'invalid']) before502.push([`chat stream ${s}`, () => stream(s)]);
    for (const s of ['sse-line-late', 'invalid-late', 'cut', 'reset']) streamed.push([`chat stream ${s}`, () => stream(s)]);
    // All at once, each on a connection of its own: the two workers take turns.
    const calls = before502.map(async ([name, call]) => [name, await call()] as const);
    const streams = streamed.map(async ([name, call]) => [name, await call()] as const);
    const wrong: object[] = [];
    for (const [name, answer] of await Promise.all(calls)) if (!is502(answer)) wrong.push({ name, ...summary(answer) });
    for (const [name, answer] of await Promise.all(streams)) if (!endsWithUpstreamError(answer)) wrong.push({ name, ...summary(answer) });
    expect(wrong).toEqual([]);

    const [chatOk, runOk, embedOk] = await normal;
    expect([chatOk.status, runOk.status, embedOk.status]).toEqual([200, 200, 200]);
    expect(chatOk.body.choices[0].message.content).toBe('fine');
    expect(runOk.body).toEqual({ ok: true });

    // The same two worker processes, none replaced, and they still answer.
    expect(workerPids()).toEqual(before);
    expect(p.local.output()).not.toContain('local worker exited');
    for (let i = 0; i < 4; i++) expect((await chat('ok')).status).toBe(200);
    const models = await new Promise<number>((resolve, reject) =>
      http.get(`${ai}/v1/models`, { agent: false, headers: { authorization: `Bearer ${p.key}` } }, (res) => resolve(res.statusCode!)).on('error', reject),
    );
    expect(models).toBe(200);
    expect(workerPids()).toEqual(before);

    // The read stopped at the cap: no 128 MiB answer nor line was read to its end (a 2 MiB
    // line fits whole in the loopback's socket buffers, so its upstream cannot tell).
    // The upstream learns of it when its socket closes, which may come after the answer: wait for that.
    const capped = ['chat:huge', 'embed:huge', 'run:huge', 'chat:huge-declared', 'embed:huge-declared', 'run:huge-declared', 'stream:sse-endless'];
    await waitFor('every capped answer closed upstream', () => capped.every((name) => cutShort[name] !== undefined), 15_000, 20).catch(() => undefined);
    for (const name of capped) expect([name, cutShort[name]]).toEqual([name, 1]);
  }, 120_000);

  it('a route sets its own caps: --max-answer-bytes and --max-event-bytes', async () => {
    // 100 KiB answers and a 128 KiB line: within the defaults, past the routes' 64 KiB.
    expect((await chat('over-route-cap')).status).toBe(200);
    expect(is502(await chat('over-route-cap', { model: 'chat-small' }))).toBe(true);
    expect((await stream('over-route-cap')).status).toBe(200);
    expect(is502(await stream('over-route-cap', { model: 'chat-small' }))).toBe(true);
    expect((await embed('over-route-cap')).status).toBe(200);
    expect(is502(await embed('over-route-cap', { model: 'embed-small' }))).toBe(true);
    expect((await run('over-route-cap')).status).toBe(200);
    expect(is502(await run('over-route-cap', { model: 'run-small' }))).toBe(true);
  }, 60_000);

  it('a 24 MiB stream line (on a route that allows it) is read in linear time', async () => {
    const started = performance.now();
    const a = await stream('sse-long', { model: 'chat-long-lines' });
    const ms = performance.now() - started;
    expect(a.status).toBe(200);
    expect(events(a).at(-1)).toBe('[DONE]');
    expect(events(a)[0].length).toBeGreaterThan(24 * MiB);
    // Rescanning the growing line took 6 to 11 s of CPU; one pass over it takes well under a second.
    expect(ms).toBeLessThan(4000);
  }, 60_000);
});

describe('stream chunks that are not objects', () => {
  it('data: null, 42 or "str" as the first chunk is 502 upstream_error', async () => {
    for (const s of ['null', '42', '"str"']) {
      const a = await stream(s);
      expect([s, a.status, code(a)], a.text.slice(0, 300)).toEqual([s, 502, 'upstream_error']);
    }
  });

  it('after the first chunk, it ends the stream with the error event, without [DONE]', async () => {
    for (const s of ['null-late', '42-late', '"str"-late']) {
      const a = await stream(s);
      expect([s, endsWithUpstreamError(a)], a.text.slice(0, 300)).toEqual([s, true]);
    }
  });
});

describe('a generic run whose upstream redirects', () => {
  it('is 503 route_unavailable, as docs/ai/run.md says (the redirect is not followed)', async () => {
    const a = await run('redirect');
    expect([a.status, code(a)]).toEqual([503, 'route_unavailable']);
  });
});
