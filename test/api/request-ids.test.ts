/**
 * Every answer of the three APIs names its request in `x-request-id` (errors, 401s and preflights
 * included), the activity record keeps it, and the local server writes one access line per request
 * (docs/decisions/request-ids-and-health.md).
 */
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { request } from 'node:http';
import { flushActivity } from '../../lambdas/activity/activity.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { ModelRoutes } from '../../lambdas/ai/model-routes.js';
import { bearer, startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { startFakeOpenAi, type FakeOpenAi } from '../helpers/fake-openai.js';
import { waitFor } from '../helpers/wait.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let p: TestPlatform;
let upstream: FakeOpenAi;
beforeAll(async () => {
  p = await startTestPlatform();
  upstream = await startFakeOpenAi();
  await new ModelRoutes(p.engine.kv, () => p.engine.clock.now()).set(p.credentials.organization_id, {
    id: 'chat', endpoint: '/v1/chat/completions', provider: 'openai-compatible', base_url: upstream.baseUrl, upstream_model: 'gpt-fake', default: true,
  });
});
afterAll(async () => {
  await upstream.close();
  await p.close();
});

interface Listed {
  kind: string;
  route: string;
  request_id: string;
  operation_id: string | null;
}

async function activitySince(from: number): Promise<Listed[]> {
  await flushActivity(p.engine);
  const listed = await fetch(`${p.urls.data}/v1/activity?from=${from}`, { headers: bearer(p.credentials.secret_key) });
  return ((await listed.json()) as { items: Listed[] }).items;
}
afterEach(() => {
  useSettings(undefined);
  vi.restoreAllMocks();
});

/** The JSON lines written to stderr while `fn` runs, at LOG_LEVEL=info. */
async function logLines(fn: () => Promise<void>): Promise<Record<string, unknown>[]> {
  useSettings({ logLevel: 'info' });
  const lines: Record<string, unknown>[] = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    for (const line of String(chunk).split('\n')) if (line) lines.push(JSON.parse(line));
    return true;
  });
  await fn();
  // A buffered answer's line is written once it is queued, before the client reads it: nothing to wait for.
  return lines;
}

describe('x-request-id', () => {
  it('is on every answer of the AI, Data and Events APIs: successes, errors, 401s, unknown paths and preflights', async () => {
    const key = bearer(p.credentials.secret_key);
    const answers = await Promise.all([
      fetch(`${p.urls.ai}/v1/models`, { headers: key }),
      fetch(`${p.urls.ai}/v1/models`),
      fetch(`${p.urls.ai}/v1/chat/completions`, { method: 'POST', headers: { ...key, 'content-type': 'application/json' }, body: '{' }),
      fetch(`${p.urls.data}/v1/databases`, { headers: key }),
      fetch(`${p.urls.data}/healthz`),
      fetch(`${p.urls.data}/v1/databases`, { method: 'OPTIONS', headers: { origin: 'https://nobody.example', 'access-control-request-method': 'GET' } }),
      fetch(`${p.urls.events}/v1/workspaces/${p.credentials.workspace_id}/subscriptions`, { headers: key }),
      fetch(`${p.urls.events}/readyz`),
    ]);
    expect(answers.map((a) => a.status)).toEqual([200, 401, 400, 200, 401, 403, 200, 401]);
    const ids = answers.map((a) => a.headers.get('x-request-id'));
    for (const id of ids) expect(id).toMatch(UUID);
    expect(new Set(ids).size).toBe(answers.length);
  });

  it('is on the local server’s own refusal of a body over 10 MiB', async () => {
    const answer = await new Promise<{ status?: number; id?: string }>((resolve, reject) => {
      const req = request(`${p.urls.data}/v1/databases/db/collections`, {
        method: 'POST',
        headers: { ...bearer(p.credentials.secret_key), 'content-type': 'application/json', 'content-length': String(11 * 1024 * 1024) },
      });
      req.on('response', (res) => {
        res.resume();
        resolve({ status: res.statusCode, id: res.headers['x-request-id'] as string | undefined });
        req.destroy();
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    expect(answer.status).toBe(413);
    expect(answer.id).toMatch(UUID);
  });

  it('is the request_id of the call’s activity records, and of its record events', async () => {
    const from = Date.now();
    const put = await fetch(`${p.urls.data}/v1/databases/ids`, { method: 'PUT', headers: bearer(p.credentials.secret_key) });
    expect(put.status).toBe(201);
    const created = await fetch(`${p.urls.data}/v1/databases/ids/collections/notes/records`, {
      method: 'POST',
      headers: { ...bearer(p.credentials.secret_key), 'content-type': 'application/json' },
      body: JSON.stringify({ text: 'hello' }),
    });
    expect(created.status).toBe(201);
    const items = await activitySince(from);
    const ofCreate = items.filter((i) => i.request_id === created.headers.get('x-request-id'));
    expect(ofCreate.map((i) => i.kind).sort()).toEqual(['api.call', 'record.write']);
    expect(items.find((i) => i.request_id === put.headers.get('x-request-id'))).toMatchObject({ kind: 'api.call', route: '/v1/databases/{database}', operation_id: null });
  });

  it('is the request_id, beside the echoed operation_id, of an AI call’s api.call and ai.usage, streamed or not', async () => {
    const from = Date.now();
    const answers = [];
    for (const stream of [false, true]) {
      const res = await fetch(`${p.urls.ai}/v1/chat/completions`, {
        method: 'POST',
        headers: { ...bearer(p.credentials.secret_key), 'content-type': 'application/json', 'x-operation-id': `op-request-ids-${stream}-${from}` },
        body: JSON.stringify({ messages: [{ role: 'user', content: 'Hi' }], stream }),
      });
      await res.text();
      expect(res.status).toBe(200);
      answers.push(res);
    }
    // A streamed call's usage is recorded once the gateway settles it, which may follow the last chunk.
    let items: Listed[] = [];
    await waitFor('both calls’ ai.usage', async () => (items = await activitySince(from)).filter((i) => i.kind === 'ai.usage').length === 2, 5000, 20);
    for (const res of answers) {
      const ofCall = items.filter((i) => i.request_id === res.headers.get('x-request-id'));
      expect(ofCall.map((i) => [i.kind, i.operation_id]).sort()).toEqual([
        ['ai.usage', res.headers.get('x-operation-id')],
        ['api.call', res.headers.get('x-operation-id')],
      ]);
    }
  });
});

describe('the access log', () => {
  it('writes one JSON line per request at info: method, route id, status, duration, request id, organization', async () => {
    let ok: Response | undefined;
    let refused: Response | undefined;
    const lines = await logLines(async () => {
      ok = await fetch(`${p.urls.data}/v1/databases`, { headers: bearer(p.credentials.secret_key) });
      refused = await fetch(`${p.urls.events}/nowhere`);
    });
    const access = lines.filter((l) => l.message === 'request');
    expect(access).toHaveLength(2);
    expect(access[0]).toEqual({
      level: 'info',
      message: 'request',
      time: expect.any(String),
      method: 'GET',
      route: 'data.databases.list',
      status: 200,
      duration_ms: expect.any(Number),
      request_id: ok!.headers.get('x-request-id'),
      organization_id: p.credentials.organization_id,
    });
    // A 401 has no organization; an unmatched path is the API's fallback route.
    expect(access[1]).toMatchObject({ method: 'GET', route: 'events.fallback', status: 401, request_id: refused!.headers.get('x-request-id'), organization_id: null });
    for (const line of access) expect(line.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('writes nothing above info', async () => {
    const lines = await logLines(async () => {
      useSettings({ logLevel: 'warn' });
      expect((await fetch(`${p.urls.data}/v1/databases`, { headers: bearer(p.credentials.secret_key) })).status).toBe(200);
    });
    expect(lines.filter((l) => l.message === 'request')).toEqual([]);
  });
});
