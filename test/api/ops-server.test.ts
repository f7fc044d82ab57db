/**
 * The operations port (lambdas/local/ops-server.ts): `/healthz` while the process serves, `/readyz`
 * while the store answers (`degraded` when background work waits too long), nothing else; the APIs themselves keep answering 401 to such paths. And
 * `npm start` as a process manager sees it: the port printed, the access line on stderr.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { createOpsServer } from '../../lambdas/local/ops-server.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useSettings } from '../../lambdas/shared/settings.js';
import { startLocalProcess, stopLocalProcess } from '../helpers/local-process.js';

// The 503 below logs a warning; the started process gets its own LOG_LEVEL.
process.env.LOG_LEVEL ??= 'silent';

const dirs: string[] = [];
const servers: Server[] = [];
const engines: EmbeddedEngine[] = [];
afterAll(async () => {
  for (const s of servers) s.close();
  for (const e of engines) await e.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'ops-'));
  dirs.push(dir);
  return dir;
};

const engine = () => {
  const e = createEmbeddedEngine({ dataDir: tempDir() });
  engines.push(e);
  return e;
};

async function listen(server: Server): Promise<string> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const status = async (url: string, init?: RequestInit) => {
  const res = await fetch(url, init);
  return [res.status, res.headers.get('content-type'), init?.method === 'HEAD' ? null : await res.json()];
};

describe('the operations port', () => {
  it('answers /healthz while the process serves and /readyz while the store answers; 503 once it does not', async () => {
    const store = engine();
    const url = await listen(createOpsServer(store));
    expect(await status(`${url}/healthz`)).toEqual([200, 'application/json', { status: 'ok' }]);
    expect(await status(`${url}/readyz`)).toMatchObject([200, 'application/json', { status: 'ok', checks: { store: 'ok', background: { status: 'ok' } } }]);
    expect(await status(`${url}/readyz?probe=1`, { method: 'HEAD' })).toEqual([200, 'application/json', null]);
    await store.close();
    expect(await status(`${url}/readyz`)).toEqual([503, 'application/json', { status: 'unavailable', checks: { store: 'unreachable' } }]);
    expect(await status(`${url}/healthz`)).toEqual([200, 'application/json', { status: 'ok' }]);
  });

  it('says degraded, still 200, with each queue\'s backlog once background work waited longer than BACKLOG_DEGRADED_S', async () => {
    useSettings({ backlogDegradedSeconds: 30 });
    const clock = new ManualClock(Date.parse('2026-12-01T00:00:00Z'));
    const e = createEmbeddedEngine({ dataDir: tempDir(), clock });
    engines.push(e);
    const url = await listen(createOpsServer(e));
    const ready = async () => (await status(`${url}/readyz`)).slice(0, 3);
    const queues = (knowledge: object, webhooks = { waiting: 0, oldest_wait_seconds: 0 }) => ({ knowledge, webhooks, jobs: { waiting: 0, oldest_wait_seconds: 0 }, streams: { waiting: 0, oldest_wait_seconds: 0 }, 'upload-checks': { waiting: 0, oldest_wait_seconds: 0 } });
    const body = (status: string, knowledge: object) => ({
      status,
      checks: { store: 'ok', background: { status, degraded_after_seconds: 30, queues: queues(knowledge) } },
    });
    expect(await ready()).toEqual([200, 'application/json', body('ok', { waiting: 0, oldest_wait_seconds: 0 })]);
    await e.queue.send('knowledge', '{}', { group: 'org_a' });
    await e.queue.send('webhooks', '{}', { delaySeconds: 60 }); // not deliverable yet: not waiting
    clock.advance(30_000);
    expect(await ready()).toEqual([200, 'application/json', body('ok', { waiting: 1, oldest_wait_seconds: 30 })]);
    clock.advance(1_000);
    expect(await ready()).toEqual([200, 'application/json', body('degraded', { waiting: 1, oldest_wait_seconds: 31 })]);
    // Taken by a background process: nothing waits any more.
    const [taken] = await e.queue.receive('knowledge', { max: 1, visibilitySeconds: 60 });
    expect(await ready()).toEqual([200, 'application/json', body('ok', { waiting: 0, oldest_wait_seconds: 0 })]);
    await e.queue.delete('knowledge', taken.receipt);
    useSettings();
  });

  it('serves nothing else: 404', async () => {
    const url = await listen(createOpsServer(engine()));
    for (const [path, method] of [['/', 'GET'], ['/health', 'GET'], ['/v1/models', 'GET'], ['/healthz', 'POST'], ['/readyz', 'DELETE']]) {
      const [code, , body] = await status(`${url}${path}`, { method });
      expect([path, method, code, (body as { error: { code: string } }).error.code]).toEqual([path, method, 404, 'not_found']);
    }
  });

  it('is printed by npm start, which logs an access line per API request at info', async () => {
    const dataDir = tempDir();
    const started = await startLocalProcess({ DATA_DIR: dataDir, LOCAL_WORKERS: '1', LOG_LEVEL: 'info' });
    try {
      const ops = /Operations\s+(http:\S+)/.exec(started.output())?.[1];
      expect(ops).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect((await fetch(`${ops}/healthz`)).status).toBe(200);
      expect((await fetch(`${ops}/readyz`)).status).toBe(200);
      // Not on the APIs: their unknown paths stay 401 without a credential (spec 5 rule 1).
      const refused = await fetch(`${started.urls.ai}/healthz`);
      expect(refused.status).toBe(401);
      const id = refused.headers.get('x-request-id');
      const line = async () => started.output().split('\n').find((l) => l.includes(`"request_id":"${id}"`) && l.includes('"message":"request"'));
      for (let i = 0; i < 50 && !(await line()); i++) await new Promise((r) => setTimeout(r, 20));
      expect(JSON.parse((await line())!)).toMatchObject({ level: 'info', method: 'GET', route: 'ai.fallback', status: 401, organization_id: null });
    } finally {
      expect(await stopLocalProcess(started, 'SIGTERM')).toBe(0);
    }
  }, 30_000);
});
