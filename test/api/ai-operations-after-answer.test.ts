/**
 * The kept answer of an idempotent AI call is written right AFTER the answer goes out (afterAnswer;
 * docs/decisions/ai-idempotency.md, "When the answer is kept"), through the real `npm start` process:
 * - one process: a replay sent the moment the answer arrives, on the same keep-alive connection or on a
 *   new one, is always the kept answer (never 409), and the upstream runs once per id;
 * - LOCAL_WORKERS=2: a replay reaching the other worker in the window may be 409 operation_in_progress
 *   (documented), never anything else, and a retry 50 ms later is the replay;
 * - an upstream failure keeps nothing (the same id runs again at once), nor does a streamed reply.
 * Every call names its operation id in its own body (message / input), so the fake upstream's record
 * tells how many times each id reached it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';

let fake: FakeOpenAi;

beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => fake?.close());

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  body: any;
  /** The request went on a connection an earlier request had used (keep-alive). */
  reusedSocket: boolean;
  /** The client side's port of the connection it went on. */
  localPort: number | undefined;
}

/** One POST over node:http with `agent` (`false`: a connection of its own, which node:cluster hands to the next worker). */
function post(baseUrl: string, key: string, path: string, operationId: string, body: object, agent: http.Agent | false): Promise<Answer> {
  const payload = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${baseUrl}${path}`,
      {
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-operation-id': operationId },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          let parsed: any;
          try {
            parsed = JSON.parse(text);
          } catch {
            parsed = undefined;
          }
          resolve({ status: res.statusCode!, headers: res.headers, text, body: parsed, reusedSocket: req.reusedSocket, localPort: req.socket?.localPort });
        });
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

const chatBody = (id: string, extra: object = {}) => ({ messages: [{ role: 'user', content: id }], ...extra });
const embedBody = (id: string) => ({ input: id });

/** How many times the fake upstream saw the call named `id` (its message or its input). */
const upstreamCallsFor = (id: string) =>
  fake.requests.filter((r) => r.body?.messages?.[0]?.content === id || r.body?.input === id || (Array.isArray(r.body?.input) && r.body.input.includes(id))).length;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * For the tests of a describe block: `npm start` with `workers` processes (its banner saying `banner`) on a
 * fresh data dir, with a chat and an embeddings route to the fake; the AI API's URL and the secret key.
 */
function usePlatform(workers: number, banner: string) {
  const platform = { ai: '', key: '' };
  let dataDir: string | undefined;
  let local: LocalProcess | undefined;
  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'ai-after-answer-'));
    local = await startLocalProcess({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', LOCAL_WORKERS: String(workers) });
    expect(local.output()).toContain(banner);
    const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    const org = credentials.organization_id;
    adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default');
    adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'embed', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default');
    // Each worker caches the routes MODEL_ROUTES_CACHE_MS (1 s).
    await sleep(1200);
    Object.assign(platform, { ai: local.urls.ai, key: credentials.secret_key as string });
  }, 40_000);
  afterAll(async () => {
    if (local) await crashLocalProcess(local);
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });
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

describe('one process (LOCAL_WORKERS=1)', () => {
  const platform = usePlatform(1, 'one process');

  /**
   * `pairs` sequential pairs: a call with a fresh id, then, the moment its answer has arrived, the
   * same id again on `replayAgent(callAgent)`. Chat and embeddings alternate. While the replay is sent
   * the fake answers something else, so a replay that reached the upstream would show.
   */
  async function pairs(tag: string, count: number, callAgent: http.Agent | false, replayAgent: http.Agent | false) {
    const failures: string[] = [];
    const firstSockets = new Set<number | undefined>();
    let reusedReplays = 0;
    for (let i = 0; i < count; i++) {
      const id = `op-${tag}-${Date.now()}-${i}`;
      const chat = i % 2 === 0;
      const path = chat ? '/v1/chat/completions' : '/v1/embeddings';
      const body = chat ? chatBody(id) : embedBody(id);
      fake.behavior = { status: 200, chunks: ['answer for ', id], chunkDelayMs: 0, stallMs: 0 };
      const first = await post(platform.ai, platform.key, path, id, body, callAgent);
      fake.behavior = { status: 200, chunks: ['NOT ', 'KEPT'], chunkDelayMs: 0, stallMs: 0 };
      const replay = await post(platform.ai, platform.key, path, id, body, replayAgent);
      firstSockets.add(first.localPort);
      if (replay.reusedSocket) reusedReplays++;
      if (first.status !== 200 || first.headers['x-idempotent-replay'] !== undefined) failures.push(`${id} first: ${first.status} ${first.headers['x-idempotent-replay']} ${first.text}`);
      if (chat && first.body?.choices?.[0]?.message?.content !== `answer for ${id}`) failures.push(`${id} first content: ${first.text}`);
      if (replay.status !== 200 || replay.headers['x-idempotent-replay'] !== 'true') failures.push(`${id} replay: ${replay.status} ${replay.headers['x-idempotent-replay']} ${replay.text}`);
      else if (replay.text !== first.text && JSON.stringify(replay.body) !== JSON.stringify(first.body)) failures.push(`${id} replay body differs: ${replay.text} vs ${first.text}`);
      if (replay.headers['x-operation-id'] !== id) failures.push(`${id} replay echoes ${replay.headers['x-operation-id']}`);
      const calls = upstreamCallsFor(id);
      if (calls !== 1) failures.push(`${id}: upstream called ${calls} times`);
    }
    return { failures, firstSockets, reusedReplays };
  }

  it('200 pairs "call, then replay at once on the SAME keep-alive connection": every replay is 200 x-idempotent-replay with the same body, upstream once per id', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const { failures, firstSockets, reusedReplays } = await pairs('same-conn', 200, agent, agent);
      expect(failures).toEqual([]);
      // Really one connection, reused by every replay.
      expect(firstSockets.size).toBe(1);
      expect(reusedReplays).toBe(200);
    } finally {
      agent.destroy();
    }
  }, 30_000);

  it('200 pairs with the replay on a NEW connection: still never 409 in one process', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const { failures, reusedReplays } = await pairs('new-conn', 200, agent, false);
      expect(failures).toEqual([]);
      expect(reusedReplays).toBe(0);
    } finally {
      agent.destroy();
    }
  }, 30_000);

  it('an upstream 500 answers 502 and keeps nothing: the same id retried at once runs again (upstream twice) and is then kept', async () => {
    for (const [n, retryAgent] of [
      [0, 'same'],
      [1, 'new'],
    ] as const) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const id = `op-upstream-fails-${Date.now()}-${n}`;
        fake.behavior = { status: 500, chunks: ['x'], chunkDelayMs: 0, stallMs: 0 };
        const failed = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), agent);
        fake.behavior = { status: 200, chunks: ['second ', 'run'], chunkDelayMs: 0, stallMs: 0 };
        const retried = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), retryAgent === 'same' ? agent : false);
        expect(failed.status).toBe(502);
        expect(failed.body.error.code).toBe('upstream_error');
        expect(failed.text).not.toContain('sk-secret-in-upstream-message');
        expect(retried.status, retried.text).toBe(200);
        expect(retried.headers['x-idempotent-replay']).toBeUndefined();
        expect(retried.body.choices[0].message.content).toBe('second run');
        expect(upstreamCallsFor(id)).toBe(2);
        // The success is kept: a replay at once, the upstream not called a third time.
        fake.behavior = { status: 500, chunks: ['x'], chunkDelayMs: 0, stallMs: 0 };
        const replay = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), agent);
        fake.behavior.status = 200;
        expect(replay.status).toBe(200);
        expect(replay.headers['x-idempotent-replay']).toBe('true');
        expect(replay.body).toEqual(retried.body);
        expect(upstreamCallsFor(id)).toBe(2);
      } finally {
        agent.destroy();
      }
    }
  });

  it('a streamed call keeps nothing: the same id sent non-streamed right after the stream ends runs, and is then replayable', async () => {
    for (const [n, nextAgent] of [
      [0, 'same'],
      [1, 'new'],
    ] as const) {
      const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
      try {
        const id = `op-streamed-${Date.now()}-${n}`;
        fake.behavior = { status: 200, chunks: ['str', 'eam', 'ed'], chunkDelayMs: 0, stallMs: 0 };
        const streamed = await streamToEnd(platform.ai, platform.key, id, agent);
        expect(streamed.status).toBe(200);
        expect(streamed.headers['content-type']).toContain('text/event-stream');
        expect(streamed.events.at(-1)).toBe('[DONE]');
        const content = streamed.events
          .slice(0, -1)
          .map((e) => JSON.parse(e).choices?.[0]?.delta?.content ?? '')
          .join('');
        expect(content).toBe('streamed');
        fake.behavior = { status: 200, chunks: ['whole ', 'answer'], chunkDelayMs: 0, stallMs: 0 };
        const whole = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), nextAgent === 'same' ? agent : false);
        expect(whole.status, whole.text).toBe(200);
        expect(whole.headers['x-idempotent-replay']).toBeUndefined();
        expect(whole.body.choices[0].message.content).toBe('whole answer');
        expect(upstreamCallsFor(id)).toBe(2);
        // Now kept: replayed at once (and a streamed call with the id gets the kept answer too, as JSON).
        fake.behavior = { status: 200, chunks: ['NOT ', 'KEPT'], chunkDelayMs: 0, stallMs: 0 };
        const replay = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), agent);
        expect(replay.status).toBe(200);
        expect(replay.headers['x-idempotent-replay']).toBe('true');
        expect(replay.body).toEqual(whole.body);
        const streamedReplay = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id, { stream: true }), false);
        expect(streamedReplay.status).toBe(200);
        expect(streamedReplay.headers['x-idempotent-replay']).toBe('true');
        expect(streamedReplay.body).toEqual(whole.body);
        expect(upstreamCallsFor(id)).toBe(2);
      } finally {
        agent.destroy();
      }
    }
  });

  it('the same id sent non-streamed the moment [DONE] arrives (before the stream\'s response has ended) runs, never 409, in one process', async () => {
    for (let n = 0; n < 20; n++) {
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

  it('100 pairs "call, replay at once" on fresh connections (so mostly on the other worker): 200 replay or 409 operation_in_progress only, a retry 50 ms later replays, upstream once per id', async () => {
    const counts = { replay200: 0, busy409: 0, other: 0 };
    const failures: string[] = [];
    for (let i = 0; i < 100; i++) {
      const id = `op-two-workers-${Date.now()}-${i}`;
      fake.behavior = { status: 200, chunks: ['answer for ', id], chunkDelayMs: 0, stallMs: 0 };
      const first = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), false);
      fake.behavior = { status: 200, chunks: ['NOT ', 'KEPT'], chunkDelayMs: 0, stallMs: 0 };
      const replay = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), false);
      if (first.status !== 200 || first.body?.choices?.[0]?.message?.content !== `answer for ${id}`) failures.push(`${id} first: ${first.status} ${first.text}`);
      if (replay.status === 200) {
        counts.replay200++;
        if (replay.headers['x-idempotent-replay'] !== 'true' || JSON.stringify(replay.body) !== JSON.stringify(first.body)) failures.push(`${id} replay: ${replay.headers['x-idempotent-replay']} ${replay.text}`);
      } else if (replay.status === 409) {
        counts.busy409++;
        if (replay.body?.error?.code !== 'operation_in_progress') failures.push(`${id} 409 code: ${replay.text}`);
        await sleep(50);
        const retry = await post(platform.ai, platform.key, '/v1/chat/completions', id, chatBody(id), false);
        if (retry.status !== 200 || retry.headers['x-idempotent-replay'] !== 'true' || JSON.stringify(retry.body) !== JSON.stringify(first.body)) {
          failures.push(`${id} retry after 409: ${retry.status} ${retry.headers['x-idempotent-replay']} ${retry.text}`);
        }
      } else {
        counts.other++;
        failures.push(`${id} replay status ${replay.status}: ${replay.text}`);
      }
      const calls = upstreamCallsFor(id);
      if (calls !== 1) failures.push(`${id}: upstream called ${calls} times`);
    }
    console.log(`LOCAL_WORKERS=2, 100 call+immediate replay pairs on fresh connections: ${counts.replay200} × 200 replay, ${counts.busy409} × 409 operation_in_progress, ${counts.other} other`);
    expect(failures).toEqual([]);
    expect(counts.other).toBe(0);
    expect(counts.replay200 + counts.busy409).toBe(100);
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
});
