/**
 * POST /v1/run through the local server with a real HTTP client (spec 4.5, docs/ai/run.md): a generic
 * run against a real loopback upstream, decision runs against a fake OpenAI-compatible chat server
 * per tier (JSON answers with logprobs), escalation, idempotency, capabilities and every error code.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { waitFor } from '../helpers/wait.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { Tenants } from '../../lambdas/auth/tenants.js';

let p: TestPlatform;
let org: string;

interface Seen {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: any;
}

async function listen(handle: (req: http.IncomingMessage, body: string, res: http.ServerResponse) => void): Promise<{ server: http.Server; url: string }> {
  const server = http.createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c) => (body += c));
    req.on('end', () => handle(req, body, res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

// ---------- the generic run upstream ----------
const runSeen: Seen[] = [];
let runServer: http.Server;
let runUrl: string;

// ---------- the fake chat server of the decision tiers ----------
/** Per tier (path prefix), per question id: the code it answers and the probability its logprobs give it. */
type Script = Record<string, { answer?: string; p?: number; stated?: number }>;
const scripts: Record<string, Script> = {};
const chatSeen: Seen[] = [];
let chatServer: http.Server;
let chatUrl: string;
const USAGE = { weak: { prompt_tokens: 100, completion_tokens: 20 }, strong: { prompt_tokens: 300, completion_tokens: 40 }, plain: { prompt_tokens: 10, completion_tokens: 5 } };

/** A chat completion answering every question of the request's schema, the answer tokens with top logprobs. */
function chatAnswer(tier: string, body: any): object {
  const schema = body.response_format.json_schema.schema;
  const pieces: { token: string; alt?: string; p?: number }[] = [];
  let first = true;
  for (const [id, prop] of Object.entries<any>(schema.properties)) {
    const codes: string[] = prop.properties.answer.enum;
    const s = scripts[tier]?.[id] ?? {};
    const answer = s.answer ?? codes[0];
    const p = s.p ?? 0.95;
    const alt = codes.find((c) => c !== answer)!;
    pieces.push({ token: `${first ? '{' : '},'}"${id}":{"answer":` });
    // The answer's token carries its opening quote, as real tokenizers often do.
    pieces.push({ token: `"${answer}`, alt: `"${alt}`, p });
    pieces.push({ token: `","confidence":${s.stated ?? p}` });
    first = false;
  }
  pieces.push({ token: '}}' });
  const content = pieces.map((x) => x.token).join('');
  const logprobs =
    tier === 'plain'
      ? null
      : {
          content: pieces.map((x) => ({
            token: x.token,
            logprob: Math.log(x.p ?? 1),
            top_logprobs: x.alt ? [{ token: x.token, logprob: Math.log(x.p!) }, { token: x.alt, logprob: Math.log(1 - x.p!) }] : [],
          })),
        };
  const usage = USAGE[tier as keyof typeof USAGE] ?? { prompt_tokens: 1, completion_tokens: 1 };
  return {
    id: 'chatcmpl-1',
    object: 'chat.completion',
    created: 1,
    model: body.model,
    choices: [{ index: 0, message: { role: 'assistant', content: tier === 'broken' ? 'not json' : content }, finish_reason: 'stop', logprobs }],
    usage: { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens },
  };
}

const KEY_ENV = 'AI_RUN_TEST_UPSTREAM_KEY';

beforeAll(async () => {
  process.env[KEY_ENV] = 'sk-upstream-secret';
  p = await startTestPlatform();
  org = p.credentials.organization_id;

  ({ server: runServer, url: runUrl } = await listen((req, body, res) => {
    runSeen.push({ path: req.url!, headers: req.headers, body: body ? JSON.parse(body) : undefined });
    const answer = (status: number, text: string) => res.writeHead(status, { 'content-type': 'application/json' }).end(text);
    if (req.url === '/ok') answer(200, JSON.stringify({ output: { got: JSON.parse(body) }, score: 0.5 }));
    else if (req.url === '/fail') answer(500, '{"error":"boom sk-upstream-secret"}');
    else if (req.url === '/text') answer(200, 'this is not json');
    else if (req.url === '/scalar') answer(200, '42');
    else if (req.url === '/slow') setTimeout(() => (res.destroyed ? undefined : answer(200, '{"late":true}')), 2_000);
    else answer(404, '{}');
  }));
  ({ server: chatServer, url: chatUrl } = await listen((req, body, res) => {
    const tier = req.url!.split('/')[1];
    const parsed = JSON.parse(body);
    chatSeen.push({ path: req.url!, headers: req.headers, body: parsed });
    let text = JSON.stringify(chatAnswer(tier, parsed));
    // Counts that are no whole numbers: JSON's 1e400 (Infinity once parsed) and a fraction.
    if (tier === 'junk') text = text.replace(/"usage":\{[^}]*\}/, '"usage":{"prompt_tokens":1e400,"completion_tokens":2.5,"total_tokens":3}');
    res.writeHead(200, { 'content-type': 'application/json' }).end(text);
  }));
  const dead = await listen(() => undefined);
  await new Promise((resolve) => dead.server.close(resolve));

  const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
  await routes.set(org, { id: 'run-http', endpoint: '/v1/run', provider: 'http', base_url: `${runUrl}/ok`, api_key_env: KEY_ENV, default: true });
  await routes.set(org, { id: 'run-fail', endpoint: '/v1/run', provider: 'http', base_url: `${runUrl}/fail` });
  await routes.set(org, { id: 'run-text', endpoint: '/v1/run', provider: 'http', base_url: `${runUrl}/text` });
  await routes.set(org, { id: 'run-scalar', endpoint: '/v1/run', provider: 'http', base_url: `${runUrl}/scalar` });
  await routes.set(org, { id: 'run-slow', endpoint: '/v1/run', provider: 'http', base_url: `${runUrl}/slow`, timeout_ms: 300 });
  await routes.set(org, { id: 'run-down', endpoint: '/v1/run', provider: 'http', base_url: `${dead.url}/run` });
  for (const tier of ['weak', 'strong', 'plain', 'broken', 'junk']) {
    await routes.set(org, { id: `tier-${tier}`, endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: `${chatUrl}/${tier}/v1`, upstream_model: `${tier}-model` });
  }
  await routes.set(org, { id: 'judge', endpoint: '/v1/run', provider: 'decision', tiers: ['tier-weak', 'tier-strong'] });
  await routes.set(org, { id: 'judge-plain', endpoint: '/v1/run', provider: 'decision', tiers: ['tier-plain'] });
  await routes.set(org, { id: 'judge-broken', endpoint: '/v1/run', provider: 'decision', tiers: ['tier-broken'] });
  await routes.set(org, { id: 'judge-junk', endpoint: '/v1/run', provider: 'decision', tiers: ['tier-junk'] });
});

afterAll(async () => {
  delete process.env[KEY_ENV];
  for (const s of [runServer, chatServer]) {
    s?.closeAllConnections();
    await new Promise((resolve) => s?.close(resolve));
  }
  await p?.close();
});

beforeEach(() => {
  runSeen.length = 0;
  chatSeen.length = 0;
  for (const k of Object.keys(scripts)) delete scripts[k];
});

const newOp = () => `op-${randomUUID()}`;

function post(body: unknown, options: { key?: string | null; op?: string | null; raw?: string } = {}): Promise<Response> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (options.key !== null) Object.assign(headers, bearer(options.key ?? p.credentials.secret_key));
  if (options.op !== null) headers['x-operation-id'] = options.op ?? newOp();
  return fetch(`${p.urls.ai}/v1/run`, { method: 'POST', headers, body: options.raw ?? JSON.stringify(body) });
}

async function expectError(res: Response, status: number, code: string): Promise<any> {
  const body: any = await res.json();
  expect({ status: res.status, code: body?.error?.code }).toEqual({ status, code });
  return body;
}

const QUESTIONS = {
  urgent: { type: 'noul', instructions: 'Is the customer asking for something urgent?', criteria: { true: 'they need it today', false: 'it can wait' } },
  team: { type: 'choice', instructions: 'Which team should handle it?', criteria: { billing: 'invoices and payments', technical: 'bugs and outages', sales: 'new purchases' } },
  anger: { type: 'score', instructions: 'How angry is the customer?', criteria: ['calm', 'annoyed', 'furious'] },
};
const STATE = { ticket: 'Our invoice is wrong for the third month. Fix it today or we cancel.' };

describe('generic run (http route)', () => {
  it('forwards input unchanged to the default route with its key and answers the upstream JSON', async () => {
    const op = newOp();
    const input = { prompt: 'hello', nested: { list: [1, 2, { deep: true }] }, n: null };
    const res = await post({ input }, { op });
    expect(res.status).toBe(200);
    expect(res.headers.get('x-operation-id')).toBe(op);
    expect(await res.json()).toEqual({ output: { got: input }, score: 0.5 });
    expect(runSeen).toHaveLength(1);
    expect(runSeen[0].path).toBe('/ok');
    expect(runSeen[0].body).toEqual(input);
    expect(runSeen[0].headers.authorization).toBe('Bearer sk-upstream-secret');
    expect(runSeen[0].headers['content-type']).toBe('application/json');
    // Named explicitly, and as `auto`, it is the same route.
    expect((await post({ model: 'run-http', input: {} })).status).toBe(200);
    expect((await post({ model: 'auto', input: {} })).status).toBe(200);
  });

  it('replays the stored answer for a reused operation id, whatever the new body says', async () => {
    const op = newOp();
    const first = await post({ input: { a: 1 } }, { op });
    expect(first.status).toBe(200);
    const again = await post({ input: { a: 2 } }, { op });
    expect(again.status).toBe(200);
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
    expect(await again.json()).toEqual(await first.json());
    expect(runSeen).toHaveLength(1);
  });

  it('answers upstream failures: 500 and non-JSON are 502, unreachable 503, slow 504', async () => {
    const failed = await expectError(await post({ model: 'run-fail', input: {} }), 502, 'upstream_error');
    expect(JSON.stringify(failed)).not.toContain('sk-upstream-secret');
    await expectError(await post({ model: 'run-text', input: {} }), 502, 'upstream_error');
    await expectError(await post({ model: 'run-scalar', input: {} }), 502, 'upstream_error');
    await expectError(await post({ model: 'run-down', input: {} }), 503, 'route_unavailable');
    await expectError(await post({ model: 'run-slow', input: {} }), 504, 'timeout_error');
  });

  it('keeps no error: the same id may be retried; a call while the first runs is 409 operation_in_progress', async () => {
    const op = newOp();
    const seen = runSeen.length;
    const slow = post({ model: 'run-slow', input: {} }, { op });
    await waitFor('the first call upstream', () => runSeen.length > seen, 5_000, 10);
    await expectError(await post({ model: 'run-slow', input: {} }, { op }), 409, 'operation_in_progress');
    await expectError(await slow, 504, 'timeout_error');
    const retried = await post({ model: 'run-http', input: { retry: true } }, { op });
    expect(retried.status).toBe(200);
    expect(retried.headers.get('x-idempotent-replay')).toBeNull();
  });
});

describe('request errors of spec 4.5', () => {
  it('missing_operation_id, invalid_operation_id (from the chain)', async () => {
    await expectError(await post({ input: {} }, { op: null }), 400, 'missing_operation_id');
    await expectError(await post({ input: {} }, { op: 'short' }), 400, 'invalid_operation_id');
    await expectError(await post({ input: {} }, { op: 'bad id with spaces' }), 400, 'invalid_operation_id');
  });

  it('missing_credentials, invalid_credentials', async () => {
    await expectError(await post({ input: {} }, { key: null }), 401, 'missing_credentials');
    await expectError(await post({ input: {} }, { key: `aik_${'0'.repeat(64)}` }), 401, 'invalid_credentials');
  });

  it('invalid_body, unsupported_field, invalid_input, model_not_allowed', async () => {
    await expectError(await post(null, { raw: '{not json' }), 400, 'invalid_body');
    await expectError(await post([{ input: {} }]), 400, 'invalid_body');
    await expectError(await post({ model: 5, input: {} }), 400, 'invalid_body');
    await expectError(await post({ input: {}, stream: true }), 400, 'unsupported_field');
    await expectError(await post({ input: {}, escalate: true }), 400, 'unsupported_field');
    await expectError(await post({}), 400, 'invalid_input');
    await expectError(await post({ input: 'text' }), 400, 'invalid_input');
    await expectError(await post({ input: [1] }), 400, 'invalid_input');
    await expectError(await post({ input: null }), 400, 'invalid_input');
    await expectError(await post({ model: 'no-such-route', input: {} }), 400, 'model_not_allowed');
    await expectError(await post({ model: 'tier-weak', input: {} }), 400, 'model_not_allowed');
    expect(runSeen).toHaveLength(0);
  });

  it('input_too_large over 2,000,000 characters of JSON; request_too_large over 5 MiB', async () => {
    await expectError(await post({ input: { text: 'x'.repeat(2_000_001) } }), 400, 'input_too_large');
    await expectError(await post({ input: { text: 'x'.repeat(5 * 1024 * 1024 + 1) } }), 413, 'request_too_large');
    expect(runSeen).toHaveLength(0);
  });
});

describe('decision run', () => {
  it('asks the first tier once with a strict JSON schema and answers every question type', async () => {
    scripts.weak = { urgent: { answer: 'yes', p: 0.9 }, team: { answer: '0', p: 0.8 }, anger: { answer: '2', p: 0.75 } };
    const images = ['https://img.example/a.png', 'data:image/png;base64,iVBORw0KGgo='];
    const res = await post({ model: 'judge', input: { state: STATE, questions: QUESTIONS, images } });
    expect(res.status).toBe(200);
    const body: any = await res.json();
    expect(body).toEqual({
      model: 'judge',
      result: {
        answers: {
          urgent: { type: 'noul', noul: 0.9, confidence: 0.9 },
          team: { type: 'choice', choice: 'billing', confidence: 0.8, probabilities: { billing: 0.8, technical: 0.2, sales: 0 } },
          anger: { type: 'score', score: 1.5, confidence: 0.75, legend: { 0: 'calm', 1: 'annoyed', 2: 'furious' }, probabilities: { 0: 0.25, 1: 0, 2: 0.75 } },
        },
        usage: { input_tokens: 100, output_tokens: 20 },
      },
      state: 'Completed',
      engine: { tier: 'tier-weak', latency_ms: expect.any(Number) },
    });
    expect(Object.keys(body.result.answers)).toEqual(['urgent', 'team', 'anger']);

    // What the tier received: one call, the route's upstream model, the schema built from the questions.
    expect(chatSeen).toHaveLength(1);
    const sent = chatSeen[0];
    expect(sent.path).toBe('/weak/v1/chat/completions');
    expect(sent.body.model).toBe('weak-model');
    expect(sent.body.logprobs).toBe(true);
    expect(sent.body.top_logprobs).toBe(5);
    expect(sent.body.response_format.type).toBe('json_schema');
    expect(sent.body.response_format.json_schema.strict).toBe(true);
    const schema = sent.body.response_format.json_schema.schema;
    expect(schema.required).toEqual(['urgent', 'team', 'anger']);
    expect(schema.additionalProperties).toBe(false);
    expect(schema.properties.urgent.properties.answer.enum).toEqual(['yes', 'no']);
    expect(schema.properties.team.properties.answer.enum).toEqual(['0', '1', '2']);
    expect(schema.properties.anger.properties.answer.enum).toEqual(['0', '1', '2']);
    expect(schema.properties.anger.required).toEqual(['answer', 'confidence']);
    const user = sent.body.messages.find((m: any) => m.role === 'user');
    const text = user.content[0].text as string;
    expect(text).toContain('Fix it today or we cancel');
    for (const q of Object.values(QUESTIONS)) expect(text).toContain(q.instructions);
    expect(text).toContain('billing: invoices and payments');
    expect(text).toContain('furious');
    expect(user.content.slice(1)).toEqual(images.map((url) => ({ type: 'image_url', image_url: { url } })));
  });

  it('without escalate, a doubtful answer stays with the first tier', async () => {
    scripts.weak = { urgent: { answer: 'no', p: 0.55 } };
    const body: any = await (await post({ model: 'judge', input: { state: 'a plain string state', questions: { urgent: QUESTIONS.urgent } } })).json();
    expect(body.result.answers.urgent).toEqual({ type: 'noul', noul: 0.45, confidence: 0.55 });
    expect(body.engine.tier).toBe('tier-weak');
    expect(chatSeen).toHaveLength(1);
    expect(chatSeen[0].body.messages[1].content).toContain('a plain string state');
  });

  it('escalates only the doubtful questions to the next tier and sums the usage', async () => {
    scripts.weak = { urgent: { answer: 'yes', p: 0.55 }, team: { answer: '1', p: 0.9 }, anger: { answer: '1', p: 0.6 } };
    scripts.strong = { urgent: { answer: 'no', p: 0.97 }, anger: { answer: '2', p: 0.9 } };
    const res = await post({ model: 'judge', input: { state: STATE, questions: QUESTIONS }, escalate: true });
    expect(res.status).toBe(200);
    const body: any = await res.json();
    expect(chatSeen.map((s) => s.path)).toEqual(['/weak/v1/chat/completions', '/strong/v1/chat/completions']);
    expect(chatSeen[1].body.model).toBe('strong-model');
    expect(chatSeen[1].body.response_format.json_schema.schema.required).toEqual(['urgent', 'anger']);
    expect(body.result.answers.urgent).toEqual({ type: 'noul', noul: 0.03, confidence: 0.97 });
    expect(body.result.answers.team).toMatchObject({ choice: 'technical', confidence: 0.9 });
    expect(body.result.answers.anger).toMatchObject({ score: 1.8, confidence: 0.9 });
    expect(body.result.usage).toEqual({ input_tokens: 400, output_tokens: 60 });
    expect(body.engine.tier).toBe('tier-strong');
  });

  it('takes min_confidence and max_tier (index or route id)', async () => {
    scripts.weak = { urgent: { answer: 'yes', p: 0.55 } };
    const input = { state: STATE, questions: { urgent: QUESTIONS.urgent } };
    const low: any = await (await post({ model: 'judge', input, escalate: { min_confidence: 0.5 } })).json();
    expect(low.engine.tier).toBe('tier-weak');
    const capped: any = await (await post({ model: 'judge', input, escalate: { max_tier: 0 } })).json();
    expect(capped.engine.tier).toBe('tier-weak');
    expect(chatSeen).toHaveLength(2);
    const byId: any = await (await post({ model: 'judge', input, escalate: { min_confidence: 0.9, max_tier: 'tier-strong' } })).json();
    expect(byId.engine.tier).toBe('tier-strong');
    const byIndex: any = await (await post({ model: 'judge', input, escalate: { max_tier: 1 } })).json();
    expect(byIndex.engine.tier).toBe('tier-strong');
  });

  it("uses the model's stated confidence when the route returns no logprobs", async () => {
    scripts.plain = { urgent: { answer: 'yes', stated: 0.8 }, team: { answer: '2', stated: 0.7 } };
    const body: any = await (await post({ model: 'judge-plain', input: { state: STATE, questions: { urgent: QUESTIONS.urgent, team: QUESTIONS.team } } })).json();
    expect(body.result.answers.urgent).toEqual({ type: 'noul', noul: 0.8, confidence: 0.8 });
    expect(body.result.answers.team).toEqual({ type: 'choice', choice: 'sales', confidence: 0.7, probabilities: { billing: 0.15, technical: 0.15, sales: 0.7 } });
    expect(body.engine.tier).toBe('tier-plain');
  });

  it('replays a decision answer for a reused operation id', async () => {
    const op = newOp();
    const first = await post({ model: 'judge', input: { state: STATE, questions: QUESTIONS } }, { op });
    expect(first.status).toBe(200);
    const again = await post({ model: 'judge', input: { state: 'other', questions: QUESTIONS } }, { op });
    expect(again.headers.get('x-idempotent-replay')).toBe('true');
    expect(await again.json()).toEqual(await first.json());
    expect(chatSeen).toHaveLength(1);
  });

  it('answers a question named constructor; refuses one named __proto__ (400 invalid_decision_input) rather than dropping it', async () => {
    scripts.weak = { constructor: { answer: 'no', p: 0.8 } } as never;
    const questions = (ids: string[]) => `{${ids.map((id) => `"${id}":${JSON.stringify(QUESTIONS.urgent)}`).join(',')}}`;
    const res = await post(null, { raw: `{"model":"judge","input":{"state":"s","questions":${questions(['constructor', 'toString'])}}}` });
    expect(res.status).toBe(200);
    const body: any = await res.json();
    expect(Object.keys(body.result.answers)).toEqual(['constructor', 'toString']);
    expect(body.result.answers.constructor).toMatchObject({ type: 'noul', confidence: 0.8 });
    expect(Object.keys(chatSeen.at(-1)!.body.response_format.json_schema.schema.properties)).toEqual(['constructor', 'toString']);
    const refused = await expectError(await post(null, { raw: `{"model":"judge","input":{"state":"s","questions":${questions(['ok', '__proto__'])}}}` }), 400, 'invalid_decision_input');
    expect(refused.error.message).toContain('__proto__');
  });

  it("a tier that reports no whole token counts (1e400, 2.5) adds what the call was charged: whole numbers (they answered null and 2.5)", async () => {
    const res = await post({ model: 'judge-junk', input: { state: STATE, questions: { urgent: QUESTIONS.urgent } } });
    expect(res.status).toBe(200);
    const { input_tokens, output_tokens } = ((await res.json()) as any).result.usage;
    expect([input_tokens, output_tokens].every((n) => Number.isSafeInteger(n) && n >= 0)).toBe(true);
    // The charged input is the prompt's worst case: more than nothing.
    expect(input_tokens).toBeGreaterThan(0);
  });

  it('answers 502 upstream_error when the tier replies with no JSON answer', async () => {
    await expectError(await post({ model: 'judge-broken', input: { state: STATE, questions: QUESTIONS } }), 502, 'upstream_error');
  });

  it('invalid_decision_input: another key, null or missing state, bad or too many questions, too many images', async () => {
    const ok = { state: STATE, questions: QUESTIONS };
    const bad = async (input: unknown) => expectError(await post({ model: 'judge', input }), 400, 'invalid_decision_input');
    await bad({ ...ok, extra: 1 });
    await bad({ questions: QUESTIONS });
    await bad({ ...ok, state: null });
    await bad({ state: STATE });
    await bad({ ...ok, questions: {} });
    await bad({ ...ok, questions: [QUESTIONS.urgent] });
    await bad({ ...ok, questions: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`q${i}`, QUESTIONS.urgent])) });
    await bad({ ...ok, questions: { 'bad id!': QUESTIONS.urgent } });
    await bad({ ...ok, questions: { q: { ...QUESTIONS.urgent, type: 'essay' } } });
    await bad({ ...ok, questions: { q: { ...QUESTIONS.urgent, instructions: '' } } });
    await bad({ ...ok, questions: { q: { ...QUESTIONS.urgent, hint: 'x' } } });
    await bad({ ...ok, questions: { q: { ...QUESTIONS.urgent, criteria: { true: 'a', maybe: 'b' } } } });
    await bad({ ...ok, questions: { q: { ...QUESTIONS.anger, criteria: { low: 'calm' } } } });
    await bad({ ...ok, questions: { q: { ...QUESTIONS.anger, criteria: ['only one'] } } });
    await bad({ ...ok, questions: { q: { ...QUESTIONS.team, criteria: ['a', 'b'] } } });
    await bad({ ...ok, questions: { q: { ...QUESTIONS.team, criteria: { only: 'one' } } } });
    await bad({ ...ok, images: Array.from({ length: 17 }, () => 'https://img.example/a.png') });
    await bad({ ...ok, images: ['ftp://img.example/a.png'] });
    await bad({ ...ok, images: 'https://img.example/a.png' });
    // 64 questions and 16 images are allowed.
    const many = { ...ok, questions: Object.fromEntries(Array.from({ length: 64 }, (_, i) => [`q${i}`, QUESTIONS.urgent])), images: Array.from({ length: 16 }, () => 'https://img.example/a.png') };
    expect((await post({ model: 'judge', input: many })).status).toBe(200);
    // invalid_input still comes first for an input that is no object.
    await expectError(await post({ model: 'judge', input: 'x' }), 400, 'invalid_input');
  });

  it('invalid_escalate for anything but true, false or {min_confidence 0..1, max_tier}', async () => {
    const input = { state: STATE, questions: { urgent: QUESTIONS.urgent } };
    for (const escalate of ['yes', 1, null, [], { min_confidence: 1.5 }, { min_confidence: -0.1 }, { max_tier: 2 }, { max_tier: -1 }, { max_tier: 'tier-plain' }, { max_tier: 0.5 }, { tiers: 1 }]) {
      await expectError(await post({ model: 'judge', input, escalate }), 400, 'invalid_escalate');
    }
    expect(chatSeen).toHaveLength(0);
    expect((await post({ model: 'judge', input, escalate: false })).status).toBe(200);
  });
});

describe('application-bound keys', () => {
  it("need the 'decision' capability for a decision route, none for a generic run", async () => {
    const tenants = new Tenants(p.engine.kv, () => p.engine.clock.now());
    const chatOnly = await tenants.createApplication(p.credentials.workspace_id, 'chat only', ['ai.chat']);
    const chatKey = (await tenants.createSecretKey(org, chatOnly.id)).key;
    const deciding = await tenants.createApplication(p.credentials.workspace_id, 'decides', ['decision']);
    const decisionKey = (await tenants.createSecretKey(org, deciding.id)).key;
    const input = { state: STATE, questions: { urgent: QUESTIONS.urgent } };

    await expectError(await post({ model: 'judge', input }, { key: chatKey }), 403, 'capability_not_enabled');
    expect(chatSeen).toHaveLength(0);
    expect((await post({ model: 'judge', input }, { key: decisionKey })).status).toBe(200);
    expect((await post({ input: { a: 1 } }, { key: chatKey })).status).toBe(200);
  });
});
