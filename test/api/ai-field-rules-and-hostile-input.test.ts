/**
 * The AI API's field rules and hostile input, through the real `npm start` and the admin CLI: what earlier passes
 * (operation ids, streams, budget holds) did not cover:
 * - the output ceiling when a request sends both max_tokens and max_completion_tokens;
 * - the order of chat's 400 codes (docs/ai/chat.md "Chat rules, in the order they are checked");
 * - decision inputs with prototype-named choice labels and integer-like question ids;
 * Found here and fixed: both ceilings went upstream as sent; a wrong type was named before an unknown
 * field; a `__proto__` choice label was dropped; `input` went upstream parsed and serialized again;
 * the local 10 MiB refusal carried no x-operation-id.
 * - a generic run's `input` "forwarded unchanged": as sent (numbers past 2^53, 1e400, -0);
 * - bodies past the local gateway's 10 MiB: the answer still echoes x-operation-id;
 * - malformed bodies on every AI POST route: 400 in the one error shape, never a 500;
 * - embeddings input shapes, limits, order, base64, dimensions and the derived `user`;
 * - derived end-user values across two organizations; a key's own --rpm on top of its organization's;
 * - capabilities of application-bound keys on chat, embeddings and decision runs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import http from 'node:http';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { AddressInfo } from 'node:net';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';
import { postBytes, postWithOperation, type Answer } from '../helpers/ai-calls.js';

let n = 0;
const opId = () => `op-attack4-${++n}-${Date.now()}`;

// ---------- our own upstream: generic runs (raw bodies kept) and a decision tier ----------
let own: http.Server;
let ownUrl = '';
const runRaw: string[] = [];
const tierRaw: string[] = [];

async function startOwn() {
  own = http.createServer((req, res) => {
    let raw = '';
    req.setEncoding('utf8');
    req.on('data', (d) => (raw += d));
    req.on('end', () => {
      res.setHeader('content-type', 'application/json');
      if (req.url === '/run') {
        runRaw.push(raw);
        return res.end('{"ok":true}');
      }
      if (req.url === '/tier/v1/chat/completions') {
        tierRaw.push(raw);
        const body = JSON.parse(raw);
        const props = body.response_format.json_schema.schema.properties as Record<string, any>;
        // Built as text, in the schema's key order as sent (not through an object).
        const parts = Object.keys(props).map((id) => `${JSON.stringify(id)}:{"answer":${JSON.stringify(props[id].properties.answer.enum[0])},"confidence":0.9}`);
        const content = `{${parts.join(',')}}`;
        return res.end(
          JSON.stringify({
            id: 'chatcmpl-tier',
            object: 'chat.completion',
            created: 1,
            model: body.model,
            choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop', logprobs: null }],
            usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 },
          }),
        );
      }
      res.statusCode = 404;
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => own.listen(0, '127.0.0.1', resolve));
  ownUrl = `http://127.0.0.1:${(own.address() as AddressInfo).port}`;
}

// No route cache: routes and limits set with the CLI hold from the next call.
const p = useLocalProcess('ai-attack4-', { MODEL_ROUTES_CACHE_MS: '0' });
let fake: FakeOpenAi;
let ai = '';
let workspace = '';

/** A POST with any body bytes and headers (node:http, a connection of its own). */
const raw = (path: string, body: string | Buffer, headers: Record<string, string> = {}, key = p.key): Promise<Answer> =>
  postBytes(`${ai}${path}`, body, { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': opId(), ...headers });

/**
 * A POST on a plain socket, the head first: a server that answers from the declared length alone
 * (before the body) is read before the body would be written into a closed connection.
 */
function rawSocket(path: string, body: string, operationId: string): Promise<{ status: number; headers: Record<string, string>; body: any }> {
  const url = new URL(ai);
  return new Promise((resolve) => {
    const socket = net.connect(Number(url.port), url.hostname);
    let received = '';
    socket.setEncoding('utf8');
    // The body follows the head only if no answer came first (one to the declared length alone).
    const later = setTimeout(() => socket.end(body), 500);
    socket.on('data', (d) => {
      clearTimeout(later);
      received += d;
    });
    socket.on('error', () => undefined);
    socket.on('close', () => {
      const [head, ...rest] = received.split('\r\n\r\n');
      const lines = head.split('\r\n');
      const headers: Record<string, string> = {};
      for (const line of lines.slice(1)) {
        const i = line.indexOf(':');
        if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      let parsed: any;
      try {
        parsed = JSON.parse(rest.join('\r\n\r\n'));
      } catch {
        parsed = undefined;
      }
      resolve({ status: Number(lines[0]?.split(' ')[1] ?? 0), headers, body: parsed });
    });
    socket.write(
      `POST ${path} HTTP/1.1\r\nhost: ${url.host}\r\nauthorization: Bearer ${p.key}\r\ncontent-type: application/json\r\nx-operation-id: ${operationId}\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n`,
    );
  });
}
const post = (path: string, body: object, key = p.key, id = opId()) => postWithOperation(ai, key, path, id, body);
const code = (a: Answer) => a.body?.error?.code;
const chatBody = (extra: object = {}) => ({ messages: [{ role: 'user', content: 'Hi' }], ...extra });
const Q = {
  urgent: { type: 'noul', instructions: 'Is it urgent?' },
  team: { type: 'choice', instructions: 'Which team?', criteria: { billing: 'invoices', sales: 'purchases' } },
};

beforeAll(async () => {
  fake = await startFakeOpenAi();
  await startOwn();
  ai = p.local.urls.ai;
  workspace = JSON.parse(readFileSync(join(p.dataDir, 'credentials.json'), 'utf8')).workspace_id;
  const oc = ['--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--model', 'gpt-fake'];
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'chat', '--endpoint', '/v1/chat/completions', ...oc, '--max-tokens', '500', '--default');
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'embed', '--endpoint', '/v1/embeddings', ...oc, '--default');
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'run', '--endpoint', '/v1/run', '--provider', 'http', '--base-url', `${ownUrl}/run`, '--default');
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'tier', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', `${ownUrl}/tier/v1`, '--model', 'tier-model');
  adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', 'judge', '--endpoint', '/v1/run', '--provider', 'decision', '--tiers', 'tier');
}, 60_000);

afterAll(async () => {
  await fake?.close();
  if (own) {
    own.closeAllConnections();
    await new Promise((resolve) => own.close(resolve));
  }
});

describe('chat field rules', () => {
  it('max_tokens and max_completion_tokens sent together: nothing above the lower of them (and the route ceiling) goes upstream', async () => {
    fake.requests.length = 0;
    const r = await post('/v1/chat/completions', chatBody({ max_tokens: 5000, max_completion_tokens: 100 }));
    expect(r.status).toBe(200);
    const sent = fake.requests.at(-1)!.body;
    // spec 4.3: "Only lower the ceiling set by route and organization"; chat.md: "the lower of the two wins".
    const ceilings = { max_tokens: sent.max_tokens, max_completion_tokens: sent.max_completion_tokens };
    expect(Object.entries(ceilings).filter(([, v]) => typeof v === 'number' && v > 100), JSON.stringify(ceilings)).toEqual([]);
    expect(sent.max_completion_tokens).toBe(100);
  });

  it('an unknown field is 400 unsupported_field even beside a field of the wrong type (chat.md: checked before invalid_body)', async () => {
    for (const body of [chatBody({ temperature: 5, best_of: 3 }), { messages: 'hi', best_of: 3 }]) {
      const r = await post('/v1/chat/completions', body);
      expect([r.status, code(r), r.body?.error?.param], JSON.stringify(body)).toEqual([400, 'unsupported_field', 'best_of']);
    }
  });
});

describe('decision runs: hostile input', () => {
  it('a choice label named __proto__ is refused (400 invalid_decision_input), not dropped', async () => {
    tierRaw.length = 0;
    const text = '{"model":"judge","input":{"state":"s","questions":{"team":{"type":"choice","instructions":"Which team?","criteria":{"__proto__":"the prototype team","billing":"invoices","sales":"purchases"}}}}}';
    const r = await raw('/v1/run', text);
    expect([r.status, code(r), r.body?.error?.param]).toEqual([400, 'invalid_decision_input', 'input.questions.team.criteria.__proto__']);
    expect(tierRaw).toEqual([]);
  });

  it('answers follow the order of the questions; ids that are array indexes come first, ascending (run.md)', async () => {
    const q = JSON.stringify(Q.urgent);
    const r = await raw('/v1/run', `{"model":"judge","input":{"state":"s","questions":{"b":${q},"10":${q},"a":${q},"2":${q}}}}`);
    expect(r.status).toBe(200);
    // Read in the answer's text: JSON.parse here would reorder integer-like keys itself.
    const at = (id: string) => r.text.indexOf(`"${id}":{"type"`);
    expect(['b', '10', 'a', '2'].map(at).every((x) => x >= 0)).toBe(true);
    expect(['b', '10', 'a', '2'].sort((x, y) => at(x) - at(y))).toEqual(['2', '10', 'b', 'a']);
  });

  it('prototype-named keys in input, questions or noul criteria, and bad escalate numbers are 400; constructor/toString labels and -0 are fine', async () => {
    const q = JSON.stringify(Q.urgent);
    const bad = [
      `{"model":"judge","input":{"state":"s","questions":{"q":${q}},"__proto__":{"x":1}}}`,
      `{"model":"judge","input":{"state":"s","questions":{"q":${q}},"constructor":{"x":1}}}`,
      `{"model":"judge","input":{"state":"s","questions":{"q":{"type":"noul","instructions":"i","__proto__":{"criteria":1}}}}}`,
      `{"model":"judge","input":{"state":"s","questions":{"q":{"type":"noul","instructions":"i","criteria":{"true":"y","__proto__":"z"}}}}}`,
      `{"model":"judge","input":{"state":"s","questions":{"q":{"type":"score","instructions":"i","criteria":${JSON.stringify(Array.from({ length: 65 }, (_, i) => `l${i}`))}}}}}`,
    ];
    for (const text of bad) {
      const r = await raw('/v1/run', text);
      expect([r.status, code(r)], text).toEqual([400, 'invalid_decision_input']);
    }
    for (const escalate of ['{"min_confidence":1e400}', '{"max_tier":1e400}', '{"min_confidence":"0.5"}']) {
      const r = await raw('/v1/run', `{"model":"judge","input":{"state":"s","questions":{"q":${q}}},"escalate":${escalate}}`);
      expect([r.status, code(r)], escalate).toEqual([400, 'invalid_escalate']);
    }
    const ok = await raw(
      '/v1/run',
      '{"model":"judge","input":{"state":-0,"questions":{"t":{"type":"choice","instructions":"i","criteria":{"constructor":"a","toString":"b"}}}},"escalate":{"max_tier":-0}}',
    );
    expect(ok.status).toBe(200);
    expect(ok.body.result.answers.t).toMatchObject({ type: 'choice', choice: 'constructor', probabilities: { constructor: expect.any(Number), toString: expect.any(Number) } });
  });
});

describe('generic run', () => {
  it('forwards input as sent: an integer past 2^53 keeps its digits, 1e400 and -0 go as written', async () => {
    runRaw.length = 0;
    const input = '{ "id":9007199254740993, "big":1e400, "z":-0, "s":"\\u00e9" }';
    const r = await raw('/v1/run', `{"model":"run","input":${input}}`);
    expect(r.status, r.text).toBe(200);
    expect(runRaw).toEqual([input]);
  });
});

describe('bodies and error shapes on every AI POST route', () => {
  const routes = ['/v1/chat/completions', '/v1/embeddings', '/v1/run'];

  it('malformed bodies are 400 invalid_body in the one error shape with x-operation-id, never a 500', async () => {
    const deep = `{"x":${'['.repeat(100)}${']'.repeat(100)}}`;
    const cases: [string, string, Record<string, string>][] = [
      ['truncated', '{"messages": [', {}],
      ['null', 'null', {}],
      ['array', '[]', {}],
      ['string', '"x"', {}],
      ['number', '5', {}],
      ['empty', '', {}],
      ['bom', '\uFEFF{}', {}],
      ['deep', deep, {}],
      ['text/plain', '{"input":"a"}', { 'content-type': 'text/plain' }],
    ];
    const failures: string[] = [];
    for (const path of routes) {
      for (const [name, body, headers] of cases) {
        const id = `op-malformed-${name.replace(/\W/g, '')}-${Date.now()}`;
        const r = await raw(path, body, { ...headers, 'x-operation-id': id });
        const e = r.body?.error;
        const ok =
          r.status === 400 &&
          e?.code === 'invalid_body' &&
          e.type === 'invalid_request_error' &&
          typeof e.message === 'string' &&
          'param' in e &&
          r.headers['x-operation-id'] === id &&
          !/at .*\.(ts|js):\d+/.test(r.text);
        if (!ok) failures.push(`${path} ${name}: ${r.status} ${r.headers['x-operation-id']} ${r.text.slice(0, 200)}`);
      }
    }
    expect(failures).toEqual([]);
  });

  it('a body over 5 MiB is 413 request_too_large with x-operation-id; over the local 10 MiB as well', async () => {
    const failures: string[] = [];
    for (const path of routes) {
      for (const mib of [6, 11]) {
        const id = `op-big-${mib}-${Date.now()}`;
        const body = `{"input":"${'x'.repeat(mib * 1024 * 1024)}"}`;
        const r = await rawSocket(path, body, id);
        if (r.status !== 413 || r.body?.error?.code !== 'request_too_large' || r.headers['x-operation-id'] !== id) {
          failures.push(`${path} ${mib} MiB: ${r.status} ${r.body?.error?.code} x-operation-id=${r.headers['x-operation-id']}`);
        }
      }
    }
    expect(failures).toEqual([]);
  }, 15_000);
});

describe('embeddings (spec 4.4)', () => {
  it('input shapes: token arrays are invalid_body, 2,049 inputs or 32,001 characters input_too_large; 2,048 come back in order; base64 with dimensions; user derived as in chat', async () => {
    for (const input of [[1, 2, 3], [[1, 2]], ['a', null], { 0: 'a' }]) {
      const r = await post('/v1/embeddings', { input });
      expect([r.status, code(r)], JSON.stringify(input)).toEqual([400, 'invalid_body']);
    }
    const proto = await raw('/v1/embeddings', '{"input":"a","__proto__":{"dimensions":3}}');
    expect([proto.status, code(proto), proto.body?.error?.param]).toEqual([400, 'unsupported_field', '__proto__']);
    expect(code(await post('/v1/embeddings', { input: Array(2049).fill('a') }))).toBe('input_too_large');
    expect(code(await post('/v1/embeddings', { input: ['a', 'x'.repeat(32_001)] }))).toBe('input_too_large');

    fake.requests.length = 0;
    const many = await post('/v1/embeddings', { input: Array.from({ length: 2048 }, (_, i) => 'w'.repeat((i % 7) + 1)) });
    expect(many.status).toBe(200);
    expect(many.body.data).toHaveLength(2048);
    expect(many.body.data.every((d: any, i: number) => d.index === i && d.object === 'embedding' && d.embedding[1] === i && d.embedding[0] === (i % 7) + 1)).toBe(true);
    expect(many.body.model).toBe('embed');

    const b64 = await post('/v1/embeddings', { input: ['abc', 'x'.repeat(32_000)], encoding_format: 'base64', dimensions: 3, user: 'alice' });
    expect(b64.status).toBe(200);
    const sent = fake.requests.at(-1)!.body;
    expect(sent.dimensions).toBe(3);
    expect(sent.encoding_format).toBe('float');
    expect(sent.model).toBe('gpt-fake');
    const decoded = b64.body.data.map((d: any) => {
      const buf = Buffer.from(d.embedding, 'base64');
      return [buf.readFloatLE(0), buf.readFloatLE(4), buf.readFloatLE(8)];
    });
    expect(decoded).toEqual([
      [3, 0, 0.5],
      [32_000, 1, 0.5],
    ]);
    expect(sent.user).toMatch(/^u_[0-9a-f]{32}$/);
    await post('/v1/chat/completions', chatBody({ user: 'alice' }));
    expect(fake.requests.at(-1)!.body.user).toBe(sent.user);
  }, 15_000);
});

describe('tenants, keys and applications', () => {
  it('user, safety_identifier and prompt_cache_key: two organizations never share a derived value, one organization keeps its own', async () => {
    const other = adminOk(p.dataDir, 'org', 'create', '--name', 'Other attack4');
    const otherKey = adminOk(p.dataDir, 'key', 'create', '--org', other.id).key as string;
    adminOk(p.dataDir, 'route', 'set', '--org', other.id, '--id', 'chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default');
    const fields = { user: 'alice', safety_identifier: 'alice', prompt_cache_key: 'alice' };
    fake.requests.length = 0;
    expect((await post('/v1/chat/completions', chatBody(fields))).status).toBe(200);
    expect((await post('/v1/chat/completions', chatBody(fields), otherKey)).status).toBe(200);
    expect((await post('/v1/chat/completions', chatBody(fields))).status).toBe(200);
    const [mine, theirs, mineAgain] = fake.requests.map((r) => r.body);
    for (const f of Object.keys(fields)) {
      expect(mine[f]).toMatch(/^u_[0-9a-f]{32}$/);
      expect(theirs[f]).toMatch(/^u_[0-9a-f]{32}$/);
      expect(theirs[f]).not.toBe(mine[f]);
      expect(mineAgain[f]).toBe(mine[f]);
    }
  });

  it("a secret key's own --rpm applies on top of its organization's; another key of the organization is not limited by it", async () => {
    adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--rpm', '1000');
    const limited = adminOk(p.dataDir, 'key', 'create', '--org', p.org) as { id: string; key: string };
    adminOk(p.dataDir, 'key', 'limits', '--key-id', limited.id, '--rpm', '2');
    try {
      const answers = [];
      for (const path of ['/v1/chat/completions', '/v1/embeddings', '/v1/run']) {
        answers.push(await post(path, path === '/v1/embeddings' ? { input: 'a' } : path === '/v1/run' ? { input: { a: 1 } } : chatBody(), limited.key));
      }
      expect(answers.map((a) => a.status)).toEqual([200, 200, 429]);
      expect(code(answers[2])).toBe('rate_limited');
      expect(Number(answers[2].headers['retry-after'])).toBeGreaterThan(0);
      expect((await post('/v1/chat/completions', chatBody())).status).toBe(200);
    } finally {
      adminOk(p.dataDir, 'org', 'limits', '--org', p.org, '--rpm', 'none');
    }
  });

  it('application-bound keys: ai.chat reaches chat only, ai.embeddings embeddings only, decision needs decision; generic runs need none', async () => {
    const keyFor = (caps: string) => {
      const app = adminOk(p.dataDir, 'app', 'create', '--workspace', workspace, '--name', `attack4 ${caps || 'none'}`, ...(caps ? ['--capabilities', caps] : []));
      return adminOk(p.dataDir, 'key', 'create', '--org', p.org, '--app', app.id).key as string;
    };
    const chatKey = keyFor('ai.chat');
    const embedKey = keyFor('ai.embeddings');
    const decisionKey = keyFor('decision');
    const decision = { model: 'judge', input: { state: 's', questions: { q: Q.urgent } } };
    const outcome = async (path: string, body: object, key: string) => {
      const id = opId();
      const r = await post(path, body, key, id);
      return `${r.status} ${code(r) ?? ''} ${r.headers['x-operation-id'] === id ? 'echo' : 'no-echo'}`.replace('  ', ' ');
    };
    const table: Record<string, string[]> = {};
    for (const [name, key] of [
      ['chat', chatKey],
      ['embed', embedKey],
      ['decision', decisionKey],
    ] as const) {
      table[name] = [
        await outcome('/v1/chat/completions', chatBody(), key),
        await outcome('/v1/embeddings', { input: 'a' }, key),
        await outcome('/v1/run', decision, key),
        await outcome('/v1/run', { input: { a: 1 } }, key),
      ];
    }
    expect(table).toEqual({
      chat: ['200 echo', '403 capability_not_enabled echo', '403 capability_not_enabled echo', '200 echo'],
      embed: ['403 capability_not_enabled echo', '200 echo', '403 capability_not_enabled echo', '200 echo'],
      decision: ['403 capability_not_enabled echo', '403 capability_not_enabled echo', '200 echo', '200 echo'],
    });
  });
});
