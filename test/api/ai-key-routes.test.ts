/**
 * The routes a secret key may call (`key routes`; docs/decisions/ai-key-routes.md), through `npm start`
 * and the admin CLI as an operator would: a key with a list calls its routes; another route, named or
 * reached as the default, is `403 route_forbidden` on chat, embeddings and run, with nothing sent
 * upstream and nothing claimed (the same operation id then runs once allowed); `GET /v1/models` lists
 * only the key's routes; `--all` lifts the list; other keys of the organization are not affected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { admin, adminOk } from '../helpers/cli.js';

// No route cache: a changed key list shows on the next call.
const p = useLocalProcess('ai-key-routes-', { MODEL_ROUTES_CACHE_MS: '0' });
let fake: FakeOpenAi;
let narrow: { id: string; key: string };
let n = 0;

async function post(key: string, path: string, body: object, operationId = `op-key-routes-${++n}-${Date.now()}`) {
  const res = await fetch(`${p.local.urls.ai}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': operationId },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as any;
  return { status: res.status, code: json.error?.code as string | undefined, param: json.error?.param as string | undefined, json };
}
const chat = (key: string, model?: string, operationId?: string) =>
  post(key, '/v1/chat/completions', { ...(model ? { model } : {}), messages: [{ role: 'user', content: 'Hello' }] }, operationId);
const models = async (key: string) =>
  ((await (await fetch(`${p.local.urls.ai}/v1/models`, { headers: { authorization: `Bearer ${key}` } })).json()) as any).data.map((m: { id: string }) => m.id).sort();

beforeAll(async () => {
  fake = await startFakeOpenAi();
  const route = (id: string, endpoint: string, ...more: string[]) =>
    adminOk(p.dataDir, 'route', 'set', '--org', p.org, '--id', id, '--endpoint', endpoint, '--provider', more.includes('http') ? 'http' : 'openai-compatible', '--base-url', more.includes('http') ? `${fake.baseUrl}/run` : fake.baseUrl, ...more.filter((m) => m !== 'http'));
  route('chat-main', '/v1/chat/completions', '--default');
  route('chat-other', '/v1/chat/completions');
  route('embed', '/v1/embeddings', '--default');
  route('runner', '/v1/run', 'http');
  narrow = adminOk(p.dataDir, 'key', 'create', '--org', p.org);
  expect(adminOk(p.dataDir, 'key', 'routes', '--key-id', narrow.id, '--routes', 'chat-other,embed')).toEqual({ key_id: narrow.id, routes: ['chat-other', 'embed'] });
}, 60_000);

afterAll(async () => {
  await fake?.close();
});

describe('key routes', () => {
  it('a key with a list calls its routes', async () => {
    expect((await chat(narrow.key, 'chat-other')).status).toBe(200);
    expect((await post(narrow.key, '/v1/embeddings', { model: 'embed', input: 'hello' })).status).toBe(200);
  });

  it('another route, named or reached as the default, is 403 route_forbidden on chat, embeddings and run, with nothing sent upstream', async () => {
    const before = fake.requests.length;
    for (const refused of [
      await chat(narrow.key, 'chat-main'),
      await chat(narrow.key),
      await chat(narrow.key, 'auto'),
      await post(narrow.key, '/v1/run', { model: 'runner', input: { a: 1 } }),
    ]) {
      expect(refused.status).toBe(403);
      expect(refused.code).toBe('route_forbidden');
      expect(refused.param).toBe('model');
    }
    expect(fake.requests.length).toBe(before);
    // An unknown route stays 400 model_not_allowed: the list narrows routes, it does not rename the error.
    expect((await chat(narrow.key, 'nope')).code).toBe('model_not_allowed');
  });

  it('keeps nothing for a refused call: the same operation id runs once the route is allowed', async () => {
    const id = `op-key-routes-retry-${Date.now()}`;
    expect((await chat(narrow.key, 'chat-main', id)).code).toBe('route_forbidden');
    adminOk(p.dataDir, 'key', 'routes', '--key-id', narrow.id, '--routes', 'chat-other,embed,chat-main');
    const ran = await chat(narrow.key, 'chat-main', id);
    expect(ran.status).toBe(200);
    expect(ran.json.model).toBe('chat-main');
    adminOk(p.dataDir, 'key', 'routes', '--key-id', narrow.id, '--routes', 'chat-other,embed');
  });

  it('GET /v1/models lists only the routes the key may call; other keys of the organization see every route', async () => {
    expect(await models(narrow.key)).toEqual(['chat-other', 'embed']);
    expect(await models(p.key)).toEqual(['chat-main', 'chat-other', 'embed', 'runner']);
    expect((await chat(p.key, 'chat-main')).status).toBe(200);
  });

  it('--all lifts the list', async () => {
    expect(adminOk(p.dataDir, 'key', 'routes', '--key-id', narrow.id, '--all')).toEqual({ key_id: narrow.id, routes: null });
    expect((await chat(narrow.key, 'chat-main')).status).toBe(200);
    expect(await models(narrow.key)).toEqual(['chat-main', 'chat-other', 'embed', 'runner']);
  });

  it('the CLI refuses a missing key, no choice or both choices, and a malformed id', () => {
    const missing = admin(p.dataDir, 'key', 'routes', '--key-id', 'key_nope', '--all');
    expect(missing.status).toBe(1);
    expect(JSON.parse(missing.stderr).error).toBe('no secret key key_nope');
    for (const args of [[], ['--all', '--routes', 'a']]) {
      const r = admin(p.dataDir, 'key', 'routes', '--key-id', narrow.id, ...args);
      expect(r.status).toBe(2);
      expect(JSON.parse(r.stderr).error).toMatch(/either --routes (a,b )?or --all/);
    }
    const bad = admin(p.dataDir, 'key', 'routes', '--key-id', narrow.id, '--routes', 'ok,has space');
    expect(bad.status).toBe(1);
    expect(JSON.parse(bad.stderr).error).toMatch(/comma-separated list of route ids/);
  });
});
