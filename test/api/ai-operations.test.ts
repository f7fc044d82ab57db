/**
 * One X-Operation-Id sent by 50 calls at once against a slow upstream gives
 * exactly one upstream call, the others 409 operation_in_progress, and replays of the kept answer
 * afterwards; in one process and with LOCAL_WORKERS=2 (`npm start`'s workers share the record in
 * SQLite). Also: the official client sees the gateway's errors as its typed errors.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { adminOk } from '../helpers/cli.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';

let fake: FakeOpenAi;

beforeAll(async () => {
  fake = await startFakeOpenAi();
});
afterAll(async () => fake?.close());

/** 50 calls with one id at once, then two more after: statuses, bodies, replay headers. */
async function fiftyAtOnce(aiUrl: string, key: string) {
  const id = `op-fifty-${Date.now()}`;
  const call = () =>
    fetch(`${aiUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', 'x-operation-id': id },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }] }),
    }).then(async (res) => ({ status: res.status, replay: res.headers.get('x-idempotent-replay'), body: (await res.json()) as any }));
  const before = fake.requests.length;
  fake.behavior = { status: 200, chunks: ['slow ', 'answer'], chunkDelayMs: 0, stallMs: 1500 };
  const answers = await Promise.all(Array.from({ length: 50 }, call));
  fake.behavior.stallMs = 0;
  const after = [await call(), await call()];
  return { answers, after, upstreamCalls: fake.requests.length - before };
}

function expectOneRun({ answers, after, upstreamCalls }: Awaited<ReturnType<typeof fiftyAtOnce>>) {
  expect(upstreamCalls).toBe(1);
  const ok = answers.filter((a) => a.status === 200);
  const busy = answers.filter((a) => a.status === 409);
  expect(ok).toHaveLength(1);
  expect(busy).toHaveLength(49);
  for (const b of busy) expect(b.body.error.code).toBe('operation_in_progress');
  expect(ok[0].body.choices[0].message.content).toBe('slow answer');
  for (const a of after) {
    expect(a.status).toBe(200);
    expect(a.replay).toBe('true');
    expect(a.body).toEqual(ok[0].body);
  }
}

describe('one process', () => {
  let p: TestPlatform;
  let client: OpenAI;
  beforeAll(async () => {
    p = await startTestPlatform();
    const routes = new ModelRoutes(p.engine.kv, () => p.engine.clock.now());
    await routes.set(p.credentials.organization_id, { id: 'chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: fake.baseUrl, default: true });
    client = new OpenAI({ apiKey: p.credentials.secret_key, baseURL: `${p.urls.ai}/v1`, maxRetries: 0 });
  });
  afterAll(async () => p?.close());

  it('50 calls at once with one X-Operation-Id: one upstream call, 49 × 409, then replays of the kept answer', async () => {
    expectOneRun(await fiftyAtOnce(p.urls.ai, p.credentials.secret_key));
  });

  it('the official client raises its typed errors with the gateway\'s status and code', async () => {
    const headers = { 'X-Operation-Id': `op-typed-${Date.now()}` };
    const cases: [() => Promise<unknown>, new (...args: any[]) => Error, number, string][] = [
      [() => client.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }, { headers }), OpenAI.BadRequestError, 400, 'model_not_allowed'],
      [() => new OpenAI({ apiKey: 'aik_' + '0'.repeat(64), baseURL: `${p.urls.ai}/v1`, maxRetries: 0 }).chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }] }, { headers }), OpenAI.AuthenticationError, 401, 'invalid_credentials'],
      [() => client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }], n: 2 }, { headers }), OpenAI.PermissionDeniedError, 403, 'field_not_allowed'],
      [() => client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }] }), OpenAI.BadRequestError, 400, 'missing_operation_id'],
    ];
    for (const [run, type, status, code] of cases) {
      const error = await run().then(() => undefined, (e: unknown) => e);
      expect(error, code).toBeInstanceOf(type);
      expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(status);
      expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe(code);
    }
    fake.behavior = { status: 500, chunks: ['x'], chunkDelayMs: 0, stallMs: 0 };
    const upstream = await client.chat.completions.create({ model: 'chat', messages: [{ role: 'user', content: 'x' }] }, { headers: { 'X-Operation-Id': `op-typed-up-${Date.now()}` } }).then(() => undefined, (e: unknown) => e);
    fake.behavior.status = 200;
    expect(upstream).toBeInstanceOf(OpenAI.InternalServerError);
    expect((upstream as InstanceType<typeof OpenAI.APIError>).status).toBe(502);
  });
});

describe('LOCAL_WORKERS=2', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'ai-operations-'));
  let local: LocalProcess;
  let key: string;
  beforeAll(async () => {
    // No route cache: the route set below holds from the first call.
    local = await startLocalProcess({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', LOCAL_WORKERS: '2', MODEL_ROUTES_CACHE_MS: '0' });
    const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    key = credentials.secret_key;
    adminOk(dataDir, 'route', 'set', '--org', credentials.organization_id, '--id', 'chat', '--endpoint', '/v1/chat/completions', '--provider', 'openai-compatible', '--base-url', fake.baseUrl, '--default');
  }, 40_000);
  afterAll(async () => {
    if (local) await crashLocalProcess(local);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('50 calls at once with one X-Operation-Id across two workers: one upstream call, 49 × 409, then replays', async () => {
    expectOneRun(await fiftyAtOnce(local.urls.ai, key));
  });
});
