/**
 * What the AI gateway once got wrong, each through the real `npm start` with LOCAL_WORKERS=2:
 * - a client that reads a stream up to `finish_reason` and leaves before the upstream's usage chunk was
 *   charged nothing: twelve answers passed a budget that fits four;
 * - an operation id replayed on another endpoint, by another application, or by a key whose route list
 *   forbids the kept answer's route, handed that answer over;
 * - `stream_options` went upstream on non-streamed calls (OpenAI refuses it there);
 * - an abandoned stream was recorded with status 503, not 499;
 * - the 2,000,000-character limit counted only message contents: tool-call arguments went through.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';
import { postWithOperation as post } from '../helpers/ai-calls.js';
import { waitFor } from '../helpers/wait.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
const opId = (what: string) => `op-${what}-${++n}-${Date.now()}`;

/**
 * A streaming upstream that sends its answer and `finish_reason` at once, then its usage chunk two
 * seconds later: the window in which a client can leave with the whole answer.
 */
let lateUsage: http.Server;
let lateUsageUrl = '';
let lateUsageCalls = 0;
async function startLateUsage() {
  lateUsage = http.createServer((req, res) => {
    req.resume();
    req.on('end', async () => {
      lateUsageCalls++;
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (extra: object) => res.write(`data: ${JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', ...extra })}\n\n`);
      chunk({ choices: [{ index: 0, delta: { role: 'assistant', content: 'the whole answer' }, finish_reason: null }] });
      chunk({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
      await sleep(2000);
      if (res.destroyed) return;
      chunk({ choices: [], usage: { prompt_tokens: 10, completion_tokens: 100, total_tokens: 110 } });
      res.end('data: [DONE]\n\n');
    });
  });
  await new Promise<void>((resolve) => lateUsage.listen(0, '127.0.0.1', resolve));
  lateUsageUrl = `http://127.0.0.1:${(lateUsage.address() as AddressInfo).port}/v1`;
}

/** Streams a chat, reads until a chunk carries `finish_reason`, then hangs up. Resolves with the status. */
function streamUntilFinished(ai: string, key: string, id: string, body: object): Promise<number> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify({ ...body, stream: true });
    const req = http.request(
      `${ai}/v1/chat/completions`,
      { method: 'POST', agent: false, headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': id, 'content-length': String(Buffer.byteLength(payload)) } },
      (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          return res.on('end', () => resolve(res.statusCode!));
        }
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => {
          text += d;
          if (/"finish_reason":"stop"/.test(text)) {
            req.destroy();
            resolve(200);
          }
        });
        res.on('error', () => undefined);
      },
    );
    req.on('error', (e) => (req.destroyed ? undefined : reject(e)));
    req.end(payload);
  });
}

const p = useLocalProcess('ai-gateway-defects-', { LOCAL_WORKERS: '2', MODEL_ROUTES_CACHE_MS: '0', CREDENTIAL_CACHE_MS: '0' });
let fake: FakeOpenAi;
let ai = '';
let data = '';

beforeAll(async () => {
  fake = await startFakeOpenAi();
  await startLateUsage();
  ai = p.local.urls.ai;
  data = p.local.urls.data;
  const chat = ['--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible'];
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'chat', ...chat, '--base-url', fake.baseUrl, '--default');
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'other-chat', ...chat, '--base-url', fake.baseUrl);
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'embed', '--endpoint', '/v1/embeddings', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default');
  // Worst case of one call: (input bound of a 1-character message, a few tokens, + 100 output) at $1,000 per million tokens, about $0.11.
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'late-usage', ...chat, '--base-url', lateUsageUrl, '--max-tokens', '100', '--price-in-per-mtok', '1000', '--price-out-per-mtok', '1000');
}, 60_000);

afterAll(async () => {
  await fake?.close();
  await new Promise<void>((resolve) => (lateUsage ? lateUsage.close(() => resolve()) : resolve()));
});

const code = (r: { body: any }) => r.body?.error?.code as string | undefined;

describe('a stream left before its usage chunk, and its status', () => {
  it('is charged the worst case it held: of twelve such streams only those the budget fits are answered, and spent never passes the budget', async () => {
    const budget = 0.5; // fits four worst cases, not five
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--budget-usd', String(budget));
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 12; i++) {
        statuses.push(await streamUntilFinished(ai, p.key, opId('leave-early'), { model: 'late-usage', messages: [{ role: 'user', content: 'x' }] }));
        await sleep(150); // the gateway notices the hang-up and settles
      }
      const budgetState = () => adminOk(p.dataDir, 'org', 'limits', '--org', p.org).budget as { spent_usd: number; held_usd: number };
      await waitFor('every hold to settle', () => budgetState().held_usd === 0, 10_000, 100);
      const answered = statuses.filter((s) => s === 200).length;
      expect(answered).toBeGreaterThanOrEqual(3);
      expect(answered).toBeLessThanOrEqual(4);
      expect(statuses.filter((s) => s === 429)).toHaveLength(12 - answered);
      const { spent_usd, held_usd } = budgetState();
      expect(held_usd).toBe(0);
      expect(spent_usd).toBeGreaterThan(0.1 * answered);
      expect(spent_usd).toBeLessThanOrEqual(budget);
    } finally {
      adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--budget-usd', 'none');
    }
  }, 60_000);

  it('is recorded in the activity log with status 499 (client gone), not as an upstream failure', async () => {
    const lateUsage = async () => {
      const res = await fetch(`${data}/v1/activity?kind=ai.usage&limit=100`, { headers: { authorization: `Bearer ${p.key}` } });
      expect(res.status).toBe(200);
      return ((await res.json()) as { items: { route: string; status: number }[] }).items.filter((i) => i.route === 'late-usage');
    };
    const before = (await lateUsage()).length;
    for (let i = 0; i < 3; i++) await streamUntilFinished(ai, p.key, opId('status'), { model: 'late-usage', messages: [{ role: 'user', content: 'y' }] });
    // Each call is recorded once the gateway has settled it.
    let items: { route: string; status: number }[] = [];
    await waitFor('the three calls in the activity log', async () => (items = await lateUsage()).length >= before + 3, 10_000, 100);
    expect(items.map((i) => i.status).filter((s) => s !== 499 && s !== 429)).toEqual([]);
    expect(items.filter((i) => i.status === 499).length).toBeGreaterThanOrEqual(3);
  }, 30_000);
});

describe('a replayed operation id', () => {
  it('on another endpoint is 409 operation_id_reused, not the other answer', async () => {
    const id = opId('cross-endpoint');
    const first = await post(ai, p.key, '/v1/embeddings', id, { input: ['a', 'b'] });
    expect(first.status).toBe(200);
    const onChat = await post(ai, p.key, '/v1/chat/completions', id, { messages: [{ role: 'user', content: 'hi' }] });
    expect(onChat.status).toBe(409);
    expect(code(onChat)).toBe('operation_id_reused');
    const onChatStreamed = await post(ai, p.key, '/v1/chat/completions', id, { messages: [{ role: 'user', content: 'hi' }], stream: true });
    expect(onChatStreamed.status).toBe(409);
    expect(code(onChatStreamed)).toBe('operation_id_reused');
    // On its own endpoint it is still replayed.
    const again = await post(ai, p.key, '/v1/embeddings', id, { input: ['other'] });
    expect(again.status).toBe(200);
    expect(again.headers['x-idempotent-replay']).toBe('true');
    expect(again.body).toEqual(first.body);
  });

  it("by another application's key is 409 operation_id_reused, not that application's answer", async () => {
    const keyOf = (name: string) => {
      const workspace = JSON.parse(readFileSync(join(p.dataDir, 'credentials.json'), 'utf8')).workspace_id as string;
      const app = adminOk(p.dataDir, 'app', 'create', '--workspace', workspace, '--name', name, '--capabilities', 'ai.chat');
      return adminOk(p.dataDir, 'key', 'create', '--org', p.org, '--app', app.id).key as string;
    };
    const [a, b] = [keyOf('defects a'), keyOf('defects b')];
    const id = opId('cross-app');
    const first = await post(ai, a, '/v1/chat/completions', id, { messages: [{ role: 'user', content: "a's secret prompt" }] });
    expect(first.status).toBe(200);
    const byB = await post(ai, b, '/v1/chat/completions', id, { messages: [{ role: 'user', content: 'hi' }] });
    expect(byB.status).toBe(409);
    expect(code(byB)).toBe('operation_id_reused');
    const byA = await post(ai, a, '/v1/chat/completions', id, { messages: [{ role: 'user', content: 'hi' }] });
    expect(byA.headers['x-idempotent-replay']).toBe('true');
  });

  it("by a key whose route list forbids the kept answer's route is 403 route_forbidden", async () => {
    const id = opId('forbidden-route');
    const first = await post(ai, p.key, '/v1/chat/completions', id, { model: 'other-chat', messages: [{ role: 'user', content: 'hi' }] });
    expect(first.status).toBe(200);
    const limited = adminOk(p.dataDir, 'key', 'create', '--org', p.org);
    adminOk(p.dataDir, 'key', 'routes', '--key-id', limited.id, '--routes', 'chat');
    const replay = await post(ai, limited.key, '/v1/chat/completions', id, { model: 'chat', messages: [{ role: 'user', content: 'hi' }] });
    expect(replay.status).toBe(403);
    expect(code(replay)).toBe('route_forbidden');
  });
});

describe('what goes upstream', () => {
  it('a non-streamed call sends no stream_options; a streamed one asks for usage', async () => {
    const whole = opId('no-stream-options');
    expect((await post(ai, p.key, '/v1/chat/completions', whole, { messages: [{ role: 'user', content: whole }], stream_options: { include_usage: true } })).status).toBe(200);
    const sent = fake.requests.find((r) => r.body?.messages?.[0]?.content === whole)!;
    expect(sent.body).not.toHaveProperty('stream_options');
    const streamed = opId('stream-options');
    expect((await post(ai, p.key, '/v1/chat/completions', streamed, { messages: [{ role: 'user', content: streamed }], stream: true })).status).toBe(200);
    expect(fake.requests.find((r) => r.body?.messages?.[0]?.content === streamed)!.body.stream_options).toEqual({ include_usage: true });
  });

  it('3,000,000 characters of tool-call arguments are 400 input_too_large, and nothing goes upstream', async () => {
    const id = opId('tool-args');
    const before = fake.requests.length;
    const messages = [
      { role: 'user', content: 'call it' },
      { role: 'assistant', content: null, tool_calls: [{ id: 't1', type: 'function', function: { name: 'f', arguments: 'x'.repeat(3_000_000) } }] },
      { role: 'tool', tool_call_id: 't1', content: 'done' },
    ];
    const r = await post(ai, p.key, '/v1/chat/completions', id, { messages });
    expect(r.status).toBe(400);
    expect(code(r)).toBe('input_too_large');
    // The same in tool definitions.
    const tools = [{ type: 'function', function: { name: 'f', description: 'd'.repeat(2_000_001), parameters: { type: 'object' } } }];
    const t = await post(ai, p.key, '/v1/chat/completions', opId('tool-defs'), { messages: [{ role: 'user', content: 'hi' }], tools });
    expect(code(t)).toBe('input_too_large');
    expect(fake.requests.length).toBe(before);
  });
});
