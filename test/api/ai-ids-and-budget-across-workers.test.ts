/**
 * Attacks on the AI gateway's operation ids and budget holds, through the real `npm start` with
 * LOCAL_WORKERS=2 (every call on a connection of its own, which node:cluster hands out to either worker):
 * - /v1/run (generic http route) replays, small and large answers, on fresh connections;
 * - the same id streamed and non-streamed, in both orders, and while the other runs;
 * - an upstream that breaks mid-stream, then the same id at once;
 * - a client that leaves mid-stream while the upstream is between chunks: the upstream is aborted and
 *   the id free at once (it stayed held until the upstream's next chunk, found here);
 * - concurrent priced calls with multibyte text and tools against an organization budget, the upstream
 *   reporting exactly the input bound and the output ceiling;
 * - a priced route without `--max-tokens`: 4,096 goes upstream as the ceiling the budget holds (none
 *   went, and one call could spend past the budget, found here).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';
import { postWithOperation as post, type Answer } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));


// ---------- our own upstream: generic runs, and chat answers reporting chosen usage ----------
let meter: http.Server;
let meterUrl = '';
const runCalls = new Map<string, number>();
/** prompt_tokens the chat answers report (the test sets it to the input bound). */
let reportPromptTokens = 0;
/** completion_tokens reported when the request carries no ceiling: an upstream whose own ceiling is 8,000. */
const UPSTREAM_OWN_CEILING = 8000;
const meterChatBodies: any[] = [];

async function startMeter() {
  meter = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (raw += d));
    req.on('end', async () => {
      const body = raw ? JSON.parse(raw) : {};
      res.setHeader('content-type', 'application/json');
      if (req.url === '/run' || req.url === '/big') {
        const id = String(body.id);
        const n = (runCalls.get(id) ?? 0) + 1;
        runCalls.set(id, n);
        const answer: Record<string, unknown> = { id, run: n };
        if (req.url === '/big') answer.blob = '漢'.repeat(60_000) + 'x'.repeat(60_000);
        return res.end(JSON.stringify(answer));
      }
      if (req.url === '/v1/chat/completions') {
        meterChatBodies.push(body);
        await sleep(30);
        const completion = body.max_tokens ?? body.max_completion_tokens ?? UPSTREAM_OWN_CEILING;
        return res.end(
          JSON.stringify({
            id: 'chatcmpl-meter',
            object: 'chat.completion',
            created: 1_700_000_000,
            model: body.model ?? 'm',
            choices: [{ index: 0, message: { role: 'assistant', content: 'ok' }, finish_reason: 'length' }],
            usage: { prompt_tokens: reportPromptTokens, completion_tokens: completion, total_tokens: reportPromptTokens + completion },
          }),
        );
      }
      res.statusCode = 404;
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => meter.listen(0, '127.0.0.1', resolve));
  meterUrl = `http://127.0.0.1:${(meter.address() as AddressInfo).port}`;
}

// No route cache: routes and limits set with the CLI hold from the next call.
const p = useLocalProcess('ai-attack3-', { LOCAL_WORKERS: '2', MODEL_ROUTES_CACHE_MS: '0' });
let fake: FakeOpenAi;
let dataDir: string;
let org = '';
let key = '';
let ai = '';

beforeAll(async () => {
  fake = await startFakeOpenAi();
  await startMeter();
  expect(p.local.output()).toContain('2 worker processes');
  ({ dataDir, org, key } = p);
  ai = p.local.urls.ai;
  const chat = ['--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible'];
  adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'chat', ...chat, '--base-url', fake.baseUrl, '--default');
  adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'metered', ...chat, '--base-url', `${meterUrl}/v1`, '--max-tokens', '100', '--price-in-per-mtok', '1', '--price-out-per-mtok', '1');
  adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'uncapped', ...chat, '--base-url', `${meterUrl}/v1`, '--price-in-per-mtok', '1', '--price-out-per-mtok', '1');
  adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'run', '--endpoint', '/v1/run', '--provider', 'http', '--base-url', `${meterUrl}/run`, '--default');
  adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'run-big', '--endpoint', '/v1/run', '--provider', 'http', '--base-url', `${meterUrl}/big`);
}, 40_000);

afterAll(async () => {
  await fake?.close();
  await new Promise<void>((resolve) => (meter ? meter.close(() => resolve()) : resolve()));
});

const chatBody = (id: string, extra: object = {}) => ({ messages: [{ role: 'user', content: id }], ...extra });
const chatCallsFor = (id: string) => fake.requests.filter((r) => r.body?.messages?.[0]?.content === id).length;
const budgetOf = () => adminOk(dataDir, 'org', 'limits', '--org', org).budget as { spent_usd: number; held_usd: number };

describe('operation ids across two workers', () => {
  it('/v1/run (generic http route): call then replay at once on fresh connections, small and ~240 KB answers: kept answer, replay header, upstream once', async () => {
    const failures: string[] = [];
    for (let i = 0; i < 30; i++) {
      const id = `op-run-${Date.now()}-${i}`;
      const big = i % 5 === 0;
      const body = { model: big ? 'run-big' : 'run', input: { id } };
      const first = await post(ai, key, '/v1/run', id, body);
      const replay = await post(ai, key, '/v1/run', id, { model: 'run', input: { id: 'other' } });
      if (first.status !== 200 || first.headers['x-idempotent-replay'] !== undefined) failures.push(`${id} first ${first.status} ${first.text.slice(0, 200)}`);
      if (replay.status !== 200 || replay.headers['x-idempotent-replay'] !== 'true' || replay.text !== first.text) failures.push(`${id} replay ${replay.status} ${replay.text.slice(0, 200)}`);
      if (runCalls.get(id) !== 1) failures.push(`${id} upstream ${runCalls.get(id)}`);
    }
    expect(failures).toEqual([]);
  }, 20_000);

  it('a non-streamed answer, then the same id streamed: the kept answer is replayed (JSON, not a stream), upstream once', async () => {
    const id = `op-whole-then-stream-${Date.now()}`;
    fake.behavior = { status: 200, chunks: ['kept ', 'answer'], chunkDelayMs: 0, stallMs: 0 };
    const first = await post(ai, key, '/v1/chat/completions', id, chatBody(id));
    const second = await post(ai, key, '/v1/chat/completions', id, chatBody(id, { stream: true }));
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.headers['x-idempotent-replay']).toBe('true');
    expect(second.body).toEqual(first.body);
    expect(chatCallsFor(id)).toBe(1);
  });

  it('while a stream holds the id, a non-streamed call with it is 409 operation_in_progress; once [DONE] is read it runs (no replay)', async () => {
    const id = `op-stream-busy-${Date.now()}`;
    let letGo!: () => void;
    fake.behavior = { status: 200, chunks: ['a', 'b', 'c'], chunkDelayMs: 0, stallMs: 0, holdLast: new Promise<void>((r) => (letGo = r)) };
    const streamed = post(ai, key, '/v1/chat/completions', id, chatBody(id, { stream: true }));
    await waitFor('the stream to reach the upstream', () => chatCallsFor(id) === 1, 5000);
    const during = await post(ai, key, '/v1/chat/completions', id, chatBody(id));
    letGo();
    const s = await streamed;
    fake.behavior = { status: 200, chunks: ['after'], chunkDelayMs: 0, stallMs: 0 };
    const after = await post(ai, key, '/v1/chat/completions', id, chatBody(id));
    expect(during.status, during.text).toBe(409);
    expect(during.body.error.code).toBe('operation_in_progress');
    expect(s.text).toContain('data: [DONE]');
    expect(after.status, after.text).toBe(200);
    expect(after.headers['x-idempotent-replay']).toBeUndefined();
    expect(after.body.choices[0].message.content).toBe('after');
  });

  it('an upstream that breaks mid-stream: error event last, no [DONE]; the same id at once (other connection) runs again', async () => {
    for (let n = 0; n < 5; n++) {
      const id = `op-break-${Date.now()}-${n}`;
      fake.behavior = { status: 200, chunks: ['a', 'b', 'c', 'd'], chunkDelayMs: 100, stallMs: 0, breakAfter: 2 };
      const broken = await post(ai, key, '/v1/chat/completions', id, chatBody(id, { stream: true }));
      fake.behavior = { status: 200, chunks: ['again'], chunkDelayMs: 0, stallMs: 0 };
      const retried = await post(ai, key, '/v1/chat/completions', id, chatBody(id));
      expect(broken.status).toBe(200);
      expect(broken.text).not.toContain('[DONE]');
      expect(broken.text).toContain('"error"');
      expect(retried.status, retried.text).toBe(200);
      expect(retried.headers['x-idempotent-replay']).toBeUndefined();
      expect(chatCallsFor(id)).toBe(2);
    }
  });

  // Found by this pass: with Readable.from, the id stayed held (and the upstream ran on) until the
  // upstream's next chunk, 5 s here: its destroy waited for iterator.return(), queued behind the pending
  // next(). The stream now aborts the upstream as it is destroyed (chat-completions.ts eventStream).
  it('a client that leaves before the upstream\'s first chunk (upstream stalls 5 s) aborts the upstream and frees the id within 1.5 s', async () => {
    const id = `op-leave-early-${Date.now()}`;
    fake.behavior = { status: 200, chunks: ['late'], chunkDelayMs: 0, stallMs: 5000 };
    const abortedBefore = fake.aborted;
    const requestsBefore = fake.requests.length;
    const payload = JSON.stringify(chatBody(id, { stream: true }));
    const req = http.request(`${ai}/v1/chat/completions`, {
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-operation-id': id },
    });
    req.on('error', () => undefined);
    req.end(payload);
    // Leaves once the call has reached the upstream, long before its first chunk.
    while (fake.requests.length === requestsBefore) await sleep(10);
    const left = Date.now();
    req.destroy();
    fake.behavior = { status: 200, chunks: ['retry'], chunkDelayMs: 0, stallMs: 0 };
    let answer: Answer | undefined;
    while (Date.now() - left < 4000) {
      answer = await post(ai, key, '/v1/chat/completions', id, chatBody(id));
      if (answer.status !== 409) break;
      await sleep(100);
    }
    expect(answer?.status, answer?.text).toBe(200);
    expect(Date.now() - left).toBeLessThan(1500);
    while (fake.aborted === abortedBefore && Date.now() - left < 1500) await sleep(20);
    expect(fake.aborted).toBeGreaterThan(abortedBefore);
  }, 15_000);

  it('a client that leaves mid-stream while the upstream is between chunks frees the id within 1.5 s (upstream stalls 5 s)', async () => {
    const id = `op-leave-${Date.now()}`;
    fake.behavior = { status: 200, chunks: ['first', 'second'], chunkDelayMs: 5000, stallMs: 0 };
    const abortedBefore = fake.aborted;
    const payload = JSON.stringify(chatBody(id, { stream: true }));
    const left = await new Promise<number>((resolve, reject) => {
      const req = http.request(`${ai}/v1/chat/completions`, {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-operation-id': id },
      });
      req.on('response', (res) => {
        res.setEncoding('utf8');
        res.on('data', (d: string) => {
          if (d.includes('first')) {
            req.destroy();
            resolve(Date.now());
          }
        });
      });
      req.on('error', () => undefined);
      req.on('close', () => resolve(Date.now()));
      setTimeout(() => reject(new Error('no first chunk')), 4000);
      req.end(payload);
    });
    fake.behavior = { status: 200, chunks: ['retry'], chunkDelayMs: 0, stallMs: 0 };
    let freedAfter = -1;
    let upstreamAbortedAfter = -1;
    let last: Answer | undefined;
    while (Date.now() - left < 7000) {
      if (upstreamAbortedAfter < 0 && fake.aborted > abortedBefore) upstreamAbortedAfter = Date.now() - left;
      last = await post(ai, key, '/v1/chat/completions', id, chatBody(id));
      if (last.status !== 409) {
        freedAfter = Date.now() - left;
        break;
      }
      await sleep(100);
    }
    expect(last?.status).toBe(200);
    // The upstream call was aborted too, not left to run on.
    while (upstreamAbortedAfter < 0 && Date.now() - left < 1500) {
      if (fake.aborted > abortedBefore) upstreamAbortedAfter = Date.now() - left;
      else await sleep(20);
    }
    expect(upstreamAbortedAfter).toBeGreaterThanOrEqual(0);
    expect(freedAfter).toBeGreaterThanOrEqual(0);
    expect(freedAfter).toBeLessThan(1500);
  }, 15_000);
});

describe('organization budget', () => {
  const tools = [{ type: 'function', function: { name: '查询天气', description: '返回城市的天气 ☀️🌧️', parameters: { type: 'object', properties: { 城市: { type: 'string', description: '名字 🏙️' } } } } }];
  const messages = [
    { role: 'system', content: '你是助手。回答要简短🙂' },
    { role: 'user', name: 'ユーザー', content: [{ type: 'text', text: '今日の天気は？👩‍👩‍👧‍👦🌍' }, { type: 'text', text: 'Ünïcödé ✓' }] },
    { role: 'user', content: '天気' },
  ];
  const bytes = (s: string) => Buffer.byteLength(s, 'utf8');
  // The bound the brief states: texts' UTF-8 bytes + JSON bytes of tools + 4 per message + 3 (+ names).
  const inputBound =
    3 +
    bytes(JSON.stringify(tools)) +
    4 * messages.length +
    bytes('你是助手。回答要简短🙂') +
    bytes('ユーザー') +
    bytes('今日の天気は？👩‍👩‍👧‍👦🌍') +
    bytes('Ünïcödé ✓') +
    bytes('天気');

  it('30 concurrent calls (CJK, emoji, tools), upstream reporting exactly input bound + ceiling: spent never past the budget, exactly 5 calls fit, holds back to 0', async () => {
    reportPromptTokens = inputBound;
    const worstMicro = inputBound + 100; // 1 USD per Mtok in and out: 1 micro-USD a token
    const budgetMicro = 5 * worstMicro;
    adminOk(dataDir, 'org', 'limits', '--org', org, '--budget-usd', String(budgetMicro / 1e6));
    let ok = 0;
    let n = 0;
    const statuses: number[] = [];
    for (let round = 0; round < 4; round++) {
      const answers = await Promise.all(
        Array.from({ length: 30 }, () => post(ai, key, '/v1/chat/completions', `op-budget-${Date.now()}-${++n}`, { model: 'metered', messages, tools })),
      );
      for (const a of answers) {
        statuses.push(a.status);
        if (a.status === 200) ok++;
        else expect(a.body?.error?.code, a.text).toBe('budget_exhausted');
      }
      const state = budgetOf();
      expect(Math.round(state.spent_usd * 1e6)).toBeLessThanOrEqual(budgetMicro);
      if (ok >= 5) break;
    }
    const state = budgetOf();
    expect(ok).toBe(5);
    expect(Math.round(state.spent_usd * 1e6)).toBe(5 * worstMicro);
    expect(state.held_usd).toBe(0);
    // The upstream got the ceiling the hold assumed.
    expect(meterChatBodies.at(-1).max_tokens).toBe(100);
  }, 20_000);

  // Found by this pass: the budget held 4,096 output tokens but no max_tokens went upstream, so an
  // upstream with a higher ceiling of its own billed past the budget. A priced route now always sends a
  // ceiling (chat.ts outputCeiling).
  it('a priced route without --max-tokens: one call admitted into a budget that holds its worst case never spends past the budget', async () => {
    reportPromptTokens = inputBound;
    const spentBefore = Math.round(budgetOf().spent_usd * 1e6);
    const held = inputBound + 4096; // what the gateway holds for this call
    const budgetMicro = spentBefore + held;
    adminOk(dataDir, 'org', 'limits', '--org', org, '--budget-usd', String(budgetMicro / 1e6));
    const a = await post(ai, key, '/v1/chat/completions', `op-uncapped-${Date.now()}`, { model: 'uncapped', messages, tools });
    expect(a.status, a.text).toBe(200);
    const sent = meterChatBodies.at(-1);
    const state = budgetOf();
    expect(sent.max_tokens).toBe(4096);
    expect(Math.round(state.spent_usd * 1e6)).toBeLessThanOrEqual(budgetMicro);
  }, 10_000);

  it('n choices hold n output ceilings: a budget that fits one choice at worst refuses n: 2 and admits n: 1', async () => {
    adminOk(dataDir, 'org', 'grant-field', '--org', org, '--field', 'n');
    reportPromptTokens = inputBound;
    const spentBefore = Math.round(budgetOf().spent_usd * 1e6);
    // Room for the input bound and 1.5 ceilings of 100 tokens, at 1 micro-USD a token.
    adminOk(dataDir, 'org', 'limits', '--org', org, '--budget-usd', String((spentBefore + inputBound + 150) / 1e6));
    const two = await post(ai, key, '/v1/chat/completions', `op-n2-${Date.now()}`, { model: 'metered', messages, tools, n: 2 });
    expect(two.status, two.text).toBe(429);
    expect(two.body.error.code).toBe('budget_exhausted');
    const one = await post(ai, key, '/v1/chat/completions', `op-n1-${Date.now()}`, { model: 'metered', messages, tools, n: 1 });
    expect(one.status, one.text).toBe(200);
    expect(budgetOf().held_usd).toBe(0);
  }, 15_000);

  // Found by this pass: a streamed call settled only when its events were read to the end. A client
  // that stopped reading held the stream open past the route's timeout, and with it the budget hold,
  // which lapses at timeout + 30 s: a late settle could then spend what other calls had been let
  // through for. The call now settles at the route's timeout whatever the client does.
  it("a client that stops reading a stream: the call settles at the route's timeout, while the client still is not reading", async () => {
    adminOk(dataDir, 'route', 'set', '--org', org, '--id', 'slow-reader', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--max-tokens', '100', '--timeout-ms', '2000', '--price-in-per-mtok', '1', '--price-out-per-mtok', '1');
    adminOk(dataDir, 'org', 'limits', '--org', org, '--budget-usd', '100');
    // 600 chunks of 32 KB: far more than the sockets buffer, so the gateway's stream waits on the client.
    fake.behavior = { status: 200, chunks: Array.from({ length: 600 }, (_, i) => String(i).padEnd(32_768, 'x')), chunkDelayMs: 0, stallMs: 0 };
    const id = `op-slow-reader-${Date.now()}`;
    const payload = JSON.stringify({ model: 'slow-reader', messages: [{ role: 'user', content: id }], stream: true });
    let req: http.ClientRequest | undefined;
    try {
      const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
        req = http.request(`${ai}/v1/chat/completions`, {
          method: 'POST',
          agent: false,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), 'x-operation-id': id },
        });
        req.on('response', (r) => {
          if (r.statusCode !== 200) return reject(new Error(`status ${r.statusCode}`));
          // The first bytes, then the client stops reading.
          r.once('data', () => {
            r.pause();
            resolve(r);
          });
        });
        req.on('error', reject);
        req.end(payload);
      });
      const readingStopped = Date.now();
      expect(budgetOf().held_usd).toBeGreaterThan(0);
      let held = Infinity;
      while (Date.now() - readingStopped < 8000) {
        held = budgetOf().held_usd;
        if (held === 0) break;
        await sleep(200);
      }
      expect(held).toBe(0);
      expect(res.isPaused()).toBe(true);
      expect(res.complete).toBe(false);
    } finally {
      req?.destroy();
      fake.behavior = { status: 200, chunks: ['Hel', 'lo', '!'], chunkDelayMs: 0, stallMs: 0 };
      adminOk(dataDir, 'org', 'limits', '--org', org, '--budget-usd', 'none');
    }
  }, 30_000);
});
