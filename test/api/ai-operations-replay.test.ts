/**
 * A kept answer is there as soon as the caller has the answer, on any worker (docs/decisions/
 * ai-idempotency.md, "When the answer is kept"), through the real `npm start` with LOCAL_WORKERS=2:
 * - a replay sent the moment the answer arrives, on a new connection (so often on the other worker), is
 *   always the kept answer, never 409, and the upstream runs once per id (chat and embeddings);
 * - an upstream failure keeps nothing (the same id runs again at once), nor does a streamed reply, even
 *   when the next call leaves the moment `data: [DONE]` arrives.
 * Every call names its operation id in its own body (message / input), so the fake upstream's record
 * tells how many times each id reached it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';
import { postWithOperation as post, type Answer } from '../helpers/ai-calls.js';

let fake: FakeOpenAi;

beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => fake?.close());


const chatBody = (id: string, extra: object = {}) => ({ messages: [{ role: 'user', content: id }], ...extra });
const embedBody = (id: string) => ({ input: id });

/** How many times the fake upstream saw the call named `id` (its message or its input). */
const upstreamCallsFor = (id: string) =>
  fake.requests.filter((r) => r.body?.messages?.[0]?.content === id || r.body?.input === id || (Array.isArray(r.body?.input) && r.body.input.includes(id))).length;

/**
 * For the tests of a describe block: `npm start` with `workers` processes (its banner saying `banner`),
 * with a chat and an embeddings route to the fake; the AI API's URL and the secret key.
 */
function usePlatform(workers: number, banner: string) {
  // No route cache: the routes set below hold from the first call.
  const used = useLocalProcess('ai-replay-', { LOCAL_WORKERS: String(workers), MODEL_ROUTES_CACHE_MS: '0' });
  const platform = { ai: '', key: '' };
  beforeAll(async () => {
    expect(used.local.output()).toContain(banner);
    adminOk(used.dataDir, 'route', 'set', '--org', used.org, '--id', 'chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default');
    adminOk(used.dataDir, 'route', 'set', '--org', used.org, '--id', 'embed', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default');
    Object.assign(platform, { ai: used.local.urls.ai, key: used.key });
  }, 40_000);
  return platform;
}

/** A streamed chat call read to its very end; the events' data lines. */
function streamToEnd(baseUrl: string, key: string, id: string, agent: http.Agent | false) {
  return post(baseUrl, key, '/v1/chat/completions', id, chatBody(id, { stream: true }), agent).then((a) => ({
    ...a,
    events: a.text
      .split('\n\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => l.slice(6)),
  }));
}

/**
 * A streamed chat call whose reader, like an SSE client that stops at `data: [DONE]`, sends `next` the
 * moment it sees [DONE], without waiting for the response's end; resolves with both.
 */
function streamThenAtDone(baseUrl: string, key: string, id: string, next: () => Promise<Answer>): Promise<{ streamText: string; next: Answer }> {
  const payload = JSON.stringify(chatBody(id, { stream: true }));
  return new Promise((resolve, reject) => {
    let sent: Promise<Answer> | undefined;
    const req = http.request(
      `${baseUrl}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-operation-id': id } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
          if (!sent && text.includes('data: [DONE]')) sent = next();
        });
        res.on('end', () => {
          if (!sent) return reject(new Error(`no [DONE] in ${text}`));
          sent.then((answer) => resolve({ streamText: text, next: answer }), reject);
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

describe('LOCAL_WORKERS=2', () => {
  const platform = usePlatform(2, '2 worker processes');

  it('100 pairs "call, replay at once" on fresh connections (so often on the other worker), chat and embeddings: every replay is the kept answer, never 409, upstream once per id', async () => {
    const failures: string[] = [];
    for (let i = 0; i < 100; i++) {
      const id = `op-two-workers-${Date.now()}-${i}`;
      const chat = i % 2 === 0;
      const path = chat ? '/v1/chat/completions' : '/v1/embeddings';
      const body = chat ? chatBody(id) : embedBody(id);
      fake.behavior = { status: 200, chunks: ['answer for ', id], chunkDelayMs: 0, stallMs: 0 };
      const first = await post(platform.ai, platform.key, path, id, body, false);
      fake.behavior = { status: 200, chunks: ['NOT ', 'KEPT'], chunkDelayMs: 0, stallMs: 0 };
      const replay = await post(platform.ai, platform.key, path, id, body, false);
      if (first.status !== 200 || first.headers['x-idempotent-replay'] !== undefined) failures.push(`${id} first: ${first.status} ${first.text}`);
      if (chat && first.body?.choices?.[0]?.message?.content !== `answer for ${id}`) failures.push(`${id} first content: ${first.text}`);
      if (replay.status !== 200 || replay.headers['x-idempotent-replay'] !== 'true' || JSON.stringify(replay.body) !== JSON.stringify(first.body)) {
        failures.push(`${id} replay: ${replay.status} ${replay.headers['x-idempotent-replay']} ${replay.text}`);
      }
      if (replay.headers['x-operation-id'] !== id) failures.push(`${id} replay echoes ${replay.headers['x-operation-id']}`);
      const calls = upstreamCallsFor(id);
      if (calls !== 1) failures.push(`${id}: upstream called ${calls} times`);
    }
    expect(failures).toEqual([]);
  }, 30_000);

  it('across workers too, an upstream failure keeps nothing and a streamed reply keeps nothing: the same id at once, on the other worker, runs again', async () => {
    for (let n = 0; n < 10; n++) {
      const failedId = `op-two-workers-fail-${Date.now()}-${n}`;
      fake.behavior = { status: 500, chunks: ['x'], chunkDelayMs: 0, stallMs: 0 };
      const failed = await post(platform.ai, platform.key, '/v1/chat/completions', failedId, chatBody(failedId), false);
      fake.behavior = { status: 200, chunks: ['second ', 'run'], chunkDelayMs: 0, stallMs: 0 };
      const retried = await post(platform.ai, platform.key, '/v1/chat/completions', failedId, chatBody(failedId), false);
      expect(failed.status).toBe(502);
      expect(failed.body.error.code).toBe('upstream_error');
      expect(retried.status, retried.text).toBe(200);
      expect(retried.headers['x-idempotent-replay']).toBeUndefined();
      expect(upstreamCallsFor(failedId)).toBe(2);

      const streamedId = `op-two-workers-stream-${Date.now()}-${n}`;
      fake.behavior = { status: 200, chunks: ['str', 'eam', 'ed'], chunkDelayMs: 0, stallMs: 0 };
      const streamed = await streamToEnd(platform.ai, platform.key, streamedId, false);
      expect(streamed.status).toBe(200);
      expect(streamed.events.at(-1)).toBe('[DONE]');
      fake.behavior = { status: 200, chunks: ['whole ', 'answer'], chunkDelayMs: 0, stallMs: 0 };
      const whole = await post(platform.ai, platform.key, '/v1/chat/completions', streamedId, chatBody(streamedId), false);
      expect(whole.status, whole.text).toBe(200);
      expect(whole.headers['x-idempotent-replay']).toBeUndefined();
      expect(whole.body.choices[0].message.content).toBe('whole answer');
      expect(upstreamCallsFor(streamedId)).toBe(2);
    }
  }, 20_000);

  it('the same id sent non-streamed the moment [DONE] arrives (before the stream\'s response has ended) runs, on either worker', async () => {
    for (let n = 0; n < 10; n++) {
      const id = `op-at-done-${Date.now()}-${n}`;
      fake.behavior = { status: 200, chunks: ['str', 'eam', 'ed'], chunkDelayMs: 0, stallMs: 0 };
      const { streamText, next } = await streamThenAtDone(platform.ai, platform.key, id, () => {
        fake.behavior = { status: 200, chunks: ['whole ', 'answer'], chunkDelayMs: 0, stallMs: 0 };
        return post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), false);
      });
      expect(streamText).toContain('data: [DONE]');
      expect(next.status, next.text).toBe(200);
      expect(next.headers['x-idempotent-replay']).toBeUndefined();
      expect(next.body.choices[0].message.content).toBe('whole answer');
      expect(upstreamCallsFor(id)).toBe(2);
    }
  });
});
