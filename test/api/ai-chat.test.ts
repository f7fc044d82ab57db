/**
 * Chat completions and embeddings (spec 4.3, 4.4) through the local
 * server, against a fake OpenAI-compatible upstream on loopback, with the official `openai` client
 * (base URL swapped; each POST passes its X-Operation-Id as a request option, spec 4.1) and raw HTTP.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import http from 'node:http';
import OpenAI from 'openai';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { waitFor } from '../helpers/wait.js';
import { ModelRoutes, type RouteInput } from '../../lambdas/ai/model-routes.js';
import { AiOrgSettings } from '../../lambdas/ai/org-settings.js';
import { Tenants } from '../../lambdas/auth/tenants.js';

let p: TestPlatform;
let fake: FakeOpenAi;
let client: OpenAI;
let n = 0;
const opId = () => `op-chat-test-${++n}-${Date.now()}`;
const KEY_ENV = 'AI_CHAT_TEST_UPSTREAM_KEY';

async function setRoute(input: Partial<RouteInput> & { id: string }) {
  await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(p.credentials.organization_id, {
    endpoint: '/v1/chat/completions',
    provider: 'openai-compatible',
    base_url: fake.baseUrl,
    ...input,
  });
}

async function post(path: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${p.urls.ai}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${p.credentials.secret_key}`, 'content-type': 'application/json', 'x-operation-id': opId(), ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const chat = (body: Record<string, unknown>, headers?: Record<string, string>) => post('/v1/chat/completions', { messages: [{ role: 'user', content: 'Hi' }], ...body }, headers);
const code = (r: { json: any }) => r.json?.error?.code;

beforeAll(async () => {
  process.env[KEY_ENV] = 'sk-upstream-test';
  p = await startTestPlatform();
  fake = await startFakeOpenAi();
  await setRoute({ id: 'chat-main', upstream_model: 'gpt-fake', default: true, max_tokens: 500, api_key_env: KEY_ENV });
  await setRoute({ id: 'chat-no-tools', upstream_model: 'gpt-fake', tools: false });
  await setRoute({ id: 'chat-slow', upstream_model: 'gpt-fake', timeout_ms: 300 });
  await setRoute({ id: 'chat-down', base_url: 'http://127.0.0.1:9/v1', upstream_model: 'gpt-fake' });
  await setRoute({ id: 'chat-keyless', upstream_model: 'gpt-fake', api_key_env: 'AI_CHAT_TEST_NOT_SET' });
  await setRoute({ id: 'embed-main', endpoint: '/v1/embeddings', upstream_model: 'embed-fake', default: true });
  client = new OpenAI({ apiKey: p.credentials.secret_key, baseURL: `${p.urls.ai}/v1`, maxRetries: 0 });
});

afterAll(async () => {
  await fake?.close();
  await p?.close();
  delete process.env[KEY_ENV];
});

beforeEach(() => {
  fake.requests.length = 0;
  fake.behavior = { status: 200, chunks: ['Hel', 'lo', '!'], chunkDelayMs: 0, stallMs: 0 };
});

describe('the official openai client, base URL swapped', () => {
  it('chats: the answer with the route id as model, usage, and the upstream asked with its model and key', async () => {
    const completion = await client.chat.completions.create({ model: 'chat-main', messages: [{ role: 'user', content: 'Hi' }] }, { headers: { 'X-Operation-Id': opId() } });
    expect(completion).toMatchObject({ object: 'chat.completion', model: 'chat-main', choices: [{ index: 0, message: { role: 'assistant', content: 'Hello!' }, finish_reason: 'stop' }], usage: { prompt_tokens: 11, completion_tokens: 7, total_tokens: 18 } });
    expect(fake.requests[0]).toMatchObject({ path: '/v1/chat/completions', body: { model: 'gpt-fake', max_tokens: 500 } });
    expect(fake.requests[0].headers.authorization).toBe('Bearer sk-upstream-test');
  });

  it('streams: chunks in order, the usage chunk when include_usage is set', async () => {
    const stream = await client.chat.completions.create(
      { model: 'chat-main', messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } },
      { headers: { 'X-Operation-Id': opId() } },
    );
    const got: OpenAI.Chat.Completions.ChatCompletionChunk[] = [];
    for await (const chunk of stream) got.push(chunk);
    expect(got.map((c) => c.choices[0]?.delta?.content ?? null).join('')).toBe('Hello!');
    expect(got.every((c) => c.model === 'chat-main')).toBe(true);
    expect(got.at(-1)).toMatchObject({ choices: [], usage: { prompt_tokens: 11, completion_tokens: 3 } });
  });

  it('embeds: one vector per input in input order, floats (the client asks base64 and decodes it)', async () => {
    const list = await client.embeddings.create({ model: 'embed-main', input: ['a', 'bbb'] }, { headers: { 'X-Operation-Id': opId() } });
    expect(list.data.map((d) => [d.index, d.embedding])).toEqual([
      [0, [1, 0, 0.5]],
      [1, [3, 1, 0.5]],
    ]);
    expect(list.model).toBe('embed-main');
    expect(fake.requests[0].body).toMatchObject({ model: 'embed-fake', encoding_format: 'float', input: ['a', 'bbb'] });
  });
});

describe('chat request rules (spec 4.3)', () => {
  it('auto or no model is the default route; another endpoint\'s route or an unknown one is 400 model_not_allowed', async () => {
    expect((await chat({ model: 'auto' })).json.model).toBe('chat-main');
    expect((await chat({})).json.model).toBe('chat-main');
    for (const model of ['embed-main', 'nope']) {
      const r = await chat({ model });
      expect([r.status, code(r)]).toEqual([400, 'model_not_allowed']);
    }
  });

  it('replaces user, safety_identifier and prompt_cache_key by a value derived from the organization', async () => {
    await chat({ user: 'alice@example.com', safety_identifier: 'alice', prompt_cache_key: 'k1' });
    const sent = fake.requests[0].body;
    for (const f of ['user', 'safety_identifier', 'prompt_cache_key']) expect(sent[f]).toMatch(/^u_[0-9a-f]{32}$/);
    expect(JSON.stringify(sent)).not.toContain('alice');
    await chat({ user: 'alice@example.com' });
    expect(fake.requests[1].body.user).toBe(sent.user);
  });

  it('max_tokens and max_completion_tokens only lower the route ceiling', async () => {
    await chat({ max_tokens: 100 });
    await chat({ max_tokens: 5000 });
    await chat({ max_completion_tokens: 50 });
    expect(fake.requests.map((r) => [r.body.max_tokens, r.body.max_completion_tokens])).toEqual([
      [100, undefined],
      [500, undefined],
      [undefined, 50],
    ]);
  });

  it('grantable fields are 403 field_not_allowed until the organization is granted them', async () => {
    const r = await chat({ n: 2 });
    expect([r.status, code(r), r.json.error.param]).toEqual([403, 'field_not_allowed', 'n']);
    await new AiOrgSettings(p.engine.kv, () => p.engine.clock.now()).grantField(p.credentials.organization_id, 'n');
    const granted = await chat({ n: 2 });
    expect(granted.status).toBe(200);
    expect(fake.requests.at(-1)!.body.n).toBe(2);
    await new AiOrgSettings(p.engine.kv, () => p.engine.clock.now()).revokeField(p.credentials.organization_id, 'n');
  });

  it('tools on a route that refuses them is 400 unsupported_field_for_route; any unknown field is 400 unsupported_field', async () => {
    const tools = [{ type: 'function', function: { name: 'f', parameters: {} } }];
    expect(code(await chat({ model: 'chat-no-tools', tools }))).toBe('unsupported_field_for_route');
    expect((await chat({ model: 'chat-main', tools })).status).toBe(200);
    const r = await chat({ temperature: 1, best_of: 3 });
    expect([r.status, code(r), r.json.error.param]).toEqual([400, 'unsupported_field', 'best_of']);
  });

  it('bad messages are 400 invalid_messages: a wrong role or content, more than 20 images; too much text is input_too_large', async () => {
    for (const messages of [[{ role: 'wizard', content: 'x' }], [{ role: 'user', content: 5 }], [{ role: 'tool', content: 'x' }], ['hi']]) {
      const r = await post('/v1/chat/completions', { messages });
      expect([r.status, code(r)], JSON.stringify(messages)).toEqual([400, 'invalid_messages']);
    }
    const image = { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } };
    expect((await chat({ messages: [{ role: 'user', content: Array(20).fill(image) }] })).status).toBe(200);
    expect(code(await chat({ messages: [{ role: 'user', content: Array(21).fill(image) }] }))).toBe('invalid_messages');
    expect(code(await chat({ messages: [{ role: 'user', content: 'x'.repeat(2_000_001) }] }))).toBe('input_too_large');
  });

  it('a malformed body or a wrong type is 400 invalid_body; over 5 MiB is 413 request_too_large; operation ids are required', async () => {
    expect(code(await post('/v1/chat/completions', '{"messages": ['))).toBe('invalid_body');
    expect(code(await chat({ temperature: 'hot' }))).toBe('invalid_body');
    expect(code(await chat({ messages: [] }))).toBe('invalid_body');
    const big = await chat({ messages: [{ role: 'user', content: 'x'.repeat(5 * 1024 * 1024) }] });
    expect([big.status, code(big)]).toEqual([413, 'request_too_large']);
    expect(code(await chat({}, { 'x-operation-id': 'short' }))).toBe('invalid_operation_id');
    const res = await fetch(`${p.urls.ai}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${p.credentials.secret_key}`, 'content-type': 'application/json' }, body: '{"messages":[{"role":"user","content":"x"}]}' });
    expect([res.status, ((await res.json()) as any).error.code]).toEqual([400, 'missing_operation_id']);
  });

  it('an application-bound key without the ai.chat capability is 403 capability_not_enabled', async () => {
    const tenants = new Tenants(p.engine.kv, () => p.engine.clock.now());
    const app = await tenants.createApplication(p.credentials.workspace_id, 'no-ai', []);
    const { key } = await tenants.createSecretKey(p.credentials.organization_id, app.id);
    const r = await chat({}, { authorization: `Bearer ${key}` });
    expect([r.status, code(r)]).toEqual([403, 'capability_not_enabled']);
  });
});

describe('hostile input', () => {
  const raw = (text: string) => post('/v1/chat/completions', text);
  const msg = '"messages":[{"role":"user","content":"Hi"}]';

  it('prototype-named fields are unknown fields, never merged into the request', async () => {
    for (const field of ['__proto__', 'constructor', 'toString']) {
      const r = await raw(`{${msg},"${field}":{"n":2}}`);
      expect([r.status, code(r), r.json.error.param], field).toEqual([400, 'unsupported_field', field]);
    }
    const inMessage = await raw('{"messages":[{"role":"user","content":"Hi","__proto__":{"role":"system"}}]}');
    expect(code(inMessage)).toBe('invalid_messages');
    expect(fake.requests).toHaveLength(0);
  });

  it('-0 is a number like 0; 1e400 (Infinity once parsed) and nesting past the limit are 400 invalid_body', async () => {
    expect((await raw(`{${msg},"temperature":-0}`)).status).toBe(200);
    expect(code(await raw(`{${msg},"temperature":1e400}`))).toBe('invalid_body');
    const deep = `${'['.repeat(100)}${']'.repeat(100)}`;
    expect(code(await raw(`{${msg},"stop":${deep}}`))).toBe('invalid_body');
  });

  it("another organization's route id is 400 model_not_allowed, as an unknown one", async () => {
    const other = await new Tenants(p.engine.kv, () => p.engine.clock.now()).createOrganization('Other');
    await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(other.id, { id: 'their-chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: fake.baseUrl });
    const r = await chat({ model: 'their-chat' });
    expect([r.status, code(r)]).toEqual([400, 'model_not_allowed']);
    expect(fake.requests).toHaveLength(0);
  });
});

describe('upstream failures', () => {
  it('an upstream error is 502 upstream_error without the upstream\'s words; unreachable is 503 route_unavailable; slow is 504 timeout_error', async () => {
    fake.behavior.status = 500;
    const failed = await chat({});
    expect([failed.status, code(failed)]).toEqual([502, 'upstream_error']);
    expect(failed.text).not.toContain('sk-secret');
    fake.behavior.status = 200;
    expect(code(await chat({ model: 'chat-down' }))).toBe('route_unavailable');
    expect((await chat({ model: 'chat-down' })).status).toBe(503);
    fake.behavior.stallMs = 1500;
    const slow = await chat({ model: 'chat-slow' });
    expect([slow.status, code(slow)]).toEqual([504, 'timeout_error']);
    expect(code(await chat({ model: 'chat-keyless' }))).toBe('route_unavailable');
  });

  it('an answer whose upstream reported no valid usage carries whole counts: the ones the call was charged, or the sum as total_tokens (chat and embeddings)', async () => {
    // Usage as hostile or sloppy upstreams write it, by the request's last message.
    const usages: Record<string, string> = {
      none: '',
      empty: ',"usage":{}',
      junk: ',"usage":{"prompt_tokens":"many","completion_tokens":-500,"total_tokens":null}',
      inf: ',"usage":{"prompt_tokens":1e400,"completion_tokens":1e400,"total_tokens":1e400}',
      'no-total': ',"usage":{"prompt_tokens":4,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":1}}',
    };
    const upstream = http.createServer((req, res) => {
      let raw = '';
      req.on('data', (d) => (raw += d));
      req.on('end', () => {
        const body = JSON.parse(raw);
        res.writeHead(200, { 'content-type': 'application/json' });
        if (req.url?.endsWith('/embeddings')) return res.end(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5]}],"model":"m"${usages[body.input[0]]}}`);
        const usage = usages[body.messages.at(-1).content];
        res.end(`{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"${'x'.repeat(40)}"},"finish_reason":"stop"}]${usage}}`);
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    try {
      await setRoute({ id: 'chat-sloppy-usage', base_url: `http://127.0.0.1:${(upstream.address() as import('node:net').AddressInfo).port}/v1` });
      for (const scenario of ['none', 'empty', 'junk', 'inf']) {
        const r = await chat({ model: 'chat-sloppy-usage', messages: [{ role: 'user', content: scenario }] });
        expect(r.status, scenario).toBe(200);
        const { prompt_tokens, completion_tokens, total_tokens } = r.json.usage;
        expect([prompt_tokens, completion_tokens, total_tokens].every((t) => Number.isSafeInteger(t) && t >= 0), `${scenario}: ${JSON.stringify(r.json.usage)}`).toBe(true);
        // Charged: the prompt's worst case, and the bytes of the message written ("assistant" and 40 x's).
        expect(prompt_tokens, scenario).toBeGreaterThan(0);
        expect(completion_tokens, scenario).toBe(49);
        expect(total_tokens, scenario).toBe(prompt_tokens + completion_tokens);
      }
      const counted = await chat({ model: 'chat-sloppy-usage', messages: [{ role: 'user', content: 'no-total' }] });
      expect(counted.json.usage).toEqual({ prompt_tokens: 4, completion_tokens: 2, total_tokens: 6, prompt_tokens_details: { cached_tokens: 1 } });
      // Embeddings the same way: the charged input bound where no valid count came, else the upstream's.
      await setRoute({ id: 'embed-sloppy-usage', endpoint: '/v1/embeddings', base_url: `http://127.0.0.1:${(upstream.address() as import('node:net').AddressInfo).port}/v1` });
      for (const scenario of ['none', 'empty', 'junk', 'inf']) {
        const r = await post('/v1/embeddings', { model: 'embed-sloppy-usage', input: scenario });
        expect(r.status, scenario).toBe(200);
        expect(r.json.usage.prompt_tokens, `${scenario}: ${JSON.stringify(r.json.usage)}`).toBeGreaterThan(0);
        expect(r.json.usage.total_tokens, scenario).toBe(r.json.usage.prompt_tokens);
        expect(Number.isSafeInteger(r.json.usage.prompt_tokens), scenario).toBe(true);
      }
      expect((await post('/v1/embeddings', { model: 'embed-sloppy-usage', input: 'no-total' })).json.usage).toEqual({ prompt_tokens: 4, total_tokens: 4 });
    } finally {
      upstream.closeAllConnections();
      await new Promise((resolve) => upstream.close(resolve));
    }
  });
});

describe('idempotency by X-Operation-Id (spec 4.1, 3)', () => {
  it('replays the first answer with x-idempotent-replay whatever the new body; the upstream runs once', async () => {
    const id = opId();
    const first = await chat({}, { 'x-operation-id': id });
    const again = await chat({ messages: [{ role: 'user', content: 'something else' }] }, { 'x-operation-id': id });
    expect(again.status).toBe(200);
    expect(again.json).toEqual(first.json);
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
    expect(first.headers.get('x-idempotent-replay')).toBeNull();
    expect(again.headers.get('x-operation-id')).toBe(id);
    expect(fake.requests).toHaveLength(1);
  });

  it('never keeps an error: the same id succeeds on retry', async () => {
    const id = opId();
    fake.behavior.status = 500;
    expect((await chat({}, { 'x-operation-id': id })).status).toBe(502);
    fake.behavior.status = 200;
    const retry = await chat({}, { 'x-operation-id': id });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('x-idempotent-replay')).toBeNull();
  });

  it('the same id while the first call runs is 409 operation_in_progress', async () => {
    const id = opId();
    fake.behavior.stallMs = 600;
    const sent = fake.requests.length;
    const first = chat({}, { 'x-operation-id': id });
    await waitFor('the first call upstream', () => fake.requests.length > sent, 5_000, 10);
    const second = await chat({}, { 'x-operation-id': id });
    expect([second.status, code(second)]).toEqual([409, 'operation_in_progress']);
    expect((await first).status).toBe(200);
  });

  it('never keeps a streamed reply: the id runs again afterwards', async () => {
    const id = opId();
    const streamed = await chat({ stream: true }, { 'x-operation-id': id });
    expect(streamed.text).toContain('data: [DONE]');
    const again = await chat({}, { 'x-operation-id': id });
    expect(again.headers.get('x-idempotent-replay')).toBeNull();
    expect(fake.requests).toHaveLength(2);
  });
});

describe('streaming (server-sent events)', () => {
  /** Raw SSE read with arrival times. */
  function openStream(body: Record<string, unknown>) {
    return new Promise<{ res: http.IncomingMessage; req: http.ClientRequest }>((resolve, reject) => {
      const url = new URL(`${p.urls.ai}/v1/chat/completions`);
      const req = http.request(
        { host: url.hostname, port: url.port, path: url.pathname, method: 'POST', headers: { authorization: `Bearer ${p.credentials.secret_key}`, 'content-type': 'application/json', 'x-operation-id': opId() } },
        (res) => resolve({ res, req }),
      );
      req.on('error', reject);
      req.end(JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], stream: true, ...body }));
    });
  }

  it('writes each chunk as it arrives: the first reaches the client before the upstream has finished', async () => {
    let release!: () => void;
    fake.behavior.holdLast = new Promise<void>((r) => (release = r));
    const { res } = await openStream({});
    expect(res.headers['content-type']).toMatch(/^text\/event-stream/);
    let text = '';
    const firstChunk = new Promise<void>((resolve) => res.on('data', (d) => ((text += d), text.includes('"Hel"') && resolve())));
    await firstChunk;
    // The upstream still holds its last chunk: nothing was buffered until the end.
    expect(text).not.toContain('[DONE]');
    release();
    await new Promise((r) => res.on('end', r));
    expect(text.trim().split('\n\n').at(-1)).toBe('data: [DONE]');
    // No usage chunk unless asked.
    expect(text).not.toContain('"usage"');
  });

  it('a client that disconnects aborts the upstream call', async () => {
    fake.behavior.chunks = Array.from({ length: 50 }, (_, i) => `c${i} `);
    fake.behavior.chunkDelayMs = 40;
    const { res, req } = await openStream({});
    await new Promise<void>((resolve) => res.once('data', () => resolve()));
    req.destroy();
    await expect.poll(() => fake.aborted, { timeout: 3000 }).toBeGreaterThan(0);
  });

  it('an upstream error mid-stream is an error event before the stream closes', async () => {
    fake.behavior.chunks = ['a', 'b', 'c', 'd'];
    fake.behavior.breakAfter = 2;
    fake.behavior.chunkDelayMs = 30;
    const { res } = await openStream({});
    let text = '';
    res.on('data', (d) => (text += d));
    await new Promise((r) => res.on('end', r));
    const events = text.trim().split('\n\n');
    // The chunks sent before the break came first, as events of the stream.
    expect(events[0]).toContain('"content":"a"');
    expect(JSON.parse(events.at(-1)!.slice('data: '.length))).toMatchObject({ error: { code: expect.stringMatching(/^(upstream_error|route_unavailable)$/) } });
    expect(text).not.toContain('[DONE]');
  });
});

describe('embeddings rules (spec 4.4)', () => {
  it('answers base64 as OpenAI does (little-endian float32), refuses empty input, unknown fields and chat routes', async () => {
    const r = await post('/v1/embeddings', { input: 'abcd', encoding_format: 'base64' });
    const bytes = Buffer.from(r.json.data[0].embedding, 'base64');
    expect([bytes.readFloatLE(0), bytes.readFloatLE(4), bytes.readFloatLE(8)]).toEqual([4, 0, 0.5]);
    for (const input of ['', [], ['a', '']]) expect(code(await post('/v1/embeddings', { input }))).toBe('invalid_body');
    expect(code(await post('/v1/embeddings', { input: 'a', encoding: 'x' }))).toBe('unsupported_field');
    expect(code(await post('/v1/embeddings', { input: 'a', model: 'chat-main' }))).toBe('model_not_allowed');
  });
});
