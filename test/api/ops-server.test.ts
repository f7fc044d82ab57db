/**
 * The operations port (lambdas/local/ops-server.ts): `/healthz` while the process serves, `/readyz`
 * while the store answers (`degraded` when background work waits too long), the OpenAPI documents
 * and `/docs` (its page in a browser: test/browser/api-docs.test.ts), nothing else; the APIs
 * themselves keep answering 401 to such paths. And `npm start` as a process manager sees it: the port
 * printed, the access line on stderr.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, sep } from 'node:path';
import { createEmbeddedEngine, type EmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { createOpsServer, OPS_PATHS } from '../../lambdas/local/ops-server.js';
import { DEFAULT_OPENAPI_DIR } from '../../lambdas/local/api-docs.js';
import { testDocument, writeTestDocuments } from '../helpers/openapi-documents.js';
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

const ROOT = join(import.meta.dirname, '..', '..');

/** A directory holding the documents of `apis`, as docs/openapi/ does. */
const openapiDir = (apis: string[]) => writeTestDocuments(tempDir(), apis);

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
    const queues = (knowledge: object, webhooks = { waiting: 0, oldest_wait_seconds: 0 }) => ({ knowledge, webhooks, jobs: { waiting: 0, oldest_wait_seconds: 0 }, streams: { waiting: 0, oldest_wait_seconds: 0 }, 'knowledge-jobs': { waiting: 0, oldest_wait_seconds: 0 }, 'upload-checks': { waiting: 0, oldest_wait_seconds: 0 } });
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

  it('serves the OpenAPI documents of its directory, read once, with an ETag (304 when unchanged) and HEAD', async () => {
    const dir = openapiDir(['ai', 'data', 'events']);
    const url = await listen(createOpsServer(engine(), { openapiDir: dir }));
    for (const api of ['ai', 'data', 'events']) {
      const res = await fetch(`${url}/openapi/${api}.json`);
      expect([api, res.status, res.headers.get('content-type'), res.headers.get('cache-control')]).toEqual([api, 200, 'application/json', 'no-cache']);
      expect(await res.json()).toEqual(testDocument(api));
      const etag = res.headers.get('etag');
      expect(etag).toMatch(/^"[\w-]{20,}"$/);
      const head = await fetch(`${url}/openapi/${api}.json`, { method: 'HEAD' });
      expect([head.status, head.headers.get('etag'), head.headers.get('content-length'), await head.text()]).toEqual([200, etag, String(statSync(join(dir, `${api}.json`)).size), '']);
      for (const ifNoneMatch of [etag!, `W/${etag}`, `"other", ${etag}`, '*']) {
        const again = await fetch(`${url}/openapi/${api}.json`, { headers: { 'if-none-match': ifNoneMatch } });
        expect([ifNoneMatch, again.status, again.headers.get('etag'), await again.text()]).toEqual([ifNoneMatch, 304, etag, '']);
      }
      const changed = await fetch(`${url}/openapi/${api}.json`, { headers: { 'if-none-match': '"other"' } });
      expect(changed.status).toBe(200);
    }
    // Read once: a file changed on disk is not read again by this process (a restart serves it).
    const first = await (await fetch(`${url}/openapi/ai.json`)).text();
    writeFileSync(join(dir, 'ai.json'), JSON.stringify({ ...testDocument('ai'), info: { title: 'Changed', version: '2' } }));
    expect(await (await fetch(`${url}/openapi/ai.json`)).text()).toBe(first);
  });

  it('answers 404 in the error shape for a document missing from its directory (found once written), and for any other /openapi/ path', async () => {
    const dir = openapiDir(['ai']);
    const url = await listen(createOpsServer(engine(), { openapiDir: dir }));
    const [code, type, body] = await status(`${url}/openapi/events.json`);
    expect([code, type]).toEqual([404, 'application/json']);
    expect(body).toMatchObject({ error: { code: 'not_found', type: 'not_found_error', message: expect.stringContaining('npm run openapi') } });
    expect(await status(`${url}/openapi/events.json`, { method: 'HEAD' })).toEqual([404, 'application/json', null]);
    writeFileSync(join(dir, 'events.json'), JSON.stringify(testDocument('events')));
    expect(await status(`${url}/openapi/events.json`)).toEqual([200, 'application/json', testDocument('events')]);
    for (const path of ['/openapi/x.json', '/openapi/ai', '/openapi/', '/openapi/ai.json/', '/openapi/../package.json', '/openapi/%2e%2e%2fpackage.json']) {
      const [missing, , error] = await status(`${url}${path}`);
      expect([path, missing, (error as { error: { code: string } }).error.code]).toEqual([path, 404, 'not_found']);
    }
  });

  it('reads docs/openapi/ beside its own module by default, whatever the working directory', () => {
    expect(DEFAULT_OPENAPI_DIR).toBe(join(ROOT, 'docs', 'openapi') + sep);
  });

  it('serves /docs, a page loading Scalar\'s bundle from this port, under a policy allowing this origin only', async () => {
    const url = await listen(createOpsServer(engine(), { openapiDir: openapiDir([]) }));
    const page = await fetch(`${url}/docs?api=data`);
    expect([page.status, page.headers.get('content-type'), page.headers.get('cache-control')]).toEqual([200, 'text/html; charset=utf-8', 'no-cache']);
    const csp = page.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'self'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("connect-src 'self';");
    const html = await page.text();
    const scripts = [...html.matchAll(/<script src="([^"]+)"><\/script>/g)].map((m) => m[1]);
    expect(scripts).toEqual(['/docs/assets/scalar-standalone.js', '/docs/assets/docs.js']);
    // No script or style of the page's own text: the policy allows none.
    expect(html).not.toMatch(/<script>|<style|https?:\/\//);
    const bundle = await fetch(`${url}${scripts[0]}`);
    const installed = join(dirname(createRequire(import.meta.url).resolve('@scalar/api-reference')), 'browser', 'standalone.js');
    expect([bundle.status, bundle.headers.get('content-type')]).toEqual([200, 'text/javascript; charset=utf-8']);
    expect(Buffer.from(await bundle.arrayBuffer()).equals(readFileSync(installed))).toBe(true);
    const init = await (await fetch(`${url}${scripts[1]}`)).text();
    expect(init).toContain('/openapi/events.json');
    expect(init).toContain('"withDefaultFonts": false');
    const etag = bundle.headers.get('etag')!;
    expect((await fetch(`${url}${scripts[0]}`, { method: 'HEAD', headers: { 'if-none-match': etag } })).status).toBe(304);
    expect((await fetch(`${url}/docs/`)).status).toBe(404);
    expect((await fetch(`${url}/docs/assets/webpack-stats.json`)).status).toBe(404);
  });

  it('serves nothing else: 404, naming what it serves', async () => {
    const url = await listen(createOpsServer(engine()));
    for (const [path, method] of [['/', 'GET'], ['/health', 'GET'], ['/v1/models', 'GET'], ['/healthz', 'POST'], ['/readyz', 'DELETE'], ['/openapi/ai.json', 'POST'], ['/docs', 'PUT']]) {
      const [code, , body] = await status(`${url}${path}`, { method });
      expect([path, method, code, (body as { error: { code: string } }).error.code]).toEqual([path, method, 404, 'not_found']);
    }
    const [, , body] = await status(`${url}/nothing`);
    for (const path of OPS_PATHS) expect((body as { error: { message: string } }).error.message).toContain(path);
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
      // The documents are served from docs/openapi/ as committed (a 404 names `npm run openapi` until then).
      expect((await fetch(`${ops}/openapi/data.json`)).status).toBe(existsSync(join(ROOT, 'docs', 'openapi', 'data.json')) ? 200 : 404);
      expect((await fetch(`${ops}/docs`)).status).toBe(200);
      // Not on the APIs: without a credential every path there is 401 (spec 5 rule 1), these too.
      for (const api of ['ai', 'data', 'events'] as const) {
        for (const path of ['/openapi/ai.json', `/openapi/${api}.json`, '/docs', '/docs/assets/scalar-standalone.js']) {
          const res = await fetch(`${started.urls[api]}${path}`);
          expect([api, path, res.status, ((await res.json()) as { error: { code: string } }).error.code]).toEqual([api, path, 401, expect.any(String)]);
        }
      }
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
