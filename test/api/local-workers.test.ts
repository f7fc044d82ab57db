/**
 * `npm start` with several worker processes (LOCAL_WORKERS=2) and a background process: new
 * connections go to the workers in turn, the activity log shows every call answered before a read
 * whichever worker recorded it, a worker or background process that dies is replaced, and SIGTERM
 * stops every process with exit 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crashLocalProcess, localChildren, servingPids, startLocalProcess, stopLocalProcess, type LocalProcess } from '../helpers/local-process.js';

const dataDir = mkdtempSync(join(tmpdir(), 'workers-'));
let local: LocalProcess;
let key = '';

/** One request on a connection of its own, as a new client makes it: node:cluster hands each to the next worker. */
function call(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent: false, headers: { authorization: `Bearer ${key}`, ...headers } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
    });
    req.on('error', reject);
    req.end();
  });
}

const children = () => localChildren(local);
/** The workers serving the APIs. */
const workerPids = () => servingPids(local);
/** The background processes (queue consumers and sweeps). */
const backgroundPids = () => children().filter((c) => c.background).map((c) => c.pid);

beforeAll(async () => {
  local = await startLocalProcess({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', LOCAL_WORKERS: '2' });
  key = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8')).secret_key;
}, 40_000);

afterAll(async () => {
  await crashLocalProcess(local);
  rmSync(dataDir, { recursive: true, force: true });
});

describe('npm start with LOCAL_WORKERS=2', () => {
  it('says so, and runs two worker processes and one background process at a lower priority', () => {
    expect(local.output()).toContain('2 worker processes serving');
    expect(local.output()).toContain('1 background process for queued work');
    expect(workerPids()).toHaveLength(2);
    const all = children();
    expect(all.filter((c) => c.background)).toHaveLength(1);
    const workerNice = all.find((c) => !c.background)!.nice;
    expect(all.find((c) => c.background)!.nice).toBeGreaterThan(workerNice);
  });

  it('lists every call answered before the read, whichever worker recorded it', async () => {
    const from = Date.now();
    for (let i = 0; i < 10; i++) expect((await call(`${local.urls.ai}/v1/models`, { 'x-operation-id': `op_workers_${i}` })).status).toBe(200);
    // At once: the other worker still holds its share in memory (it writes every 100 ms).
    const page = await call(`${local.urls.data}/v1/activity?kind=api.call&from=${from}&limit=100`);
    expect(page.status).toBe(200);
    const models = page.body.items.filter((i: { route: string }) => i.route === '/v1/models');
    expect(models).toHaveLength(10);
  });

  it('replaces a worker that dies', async () => {
    const [victim, survivor] = workerPids();
    process.kill(victim, 'SIGKILL');
    await expect.poll(() => workerPids().filter((pid) => pid !== victim), { timeout: 15_000, interval: 100 }).toHaveLength(2);
    expect(workerPids()).toContain(survivor);
    await expect.poll(() => local.output(), { timeout: 5_000 }).toContain('local worker exited; starting another');
    await expect.poll(() => local.output(), { timeout: 15_000 }).toContain('local worker replaced');
    // Fresh connections go to both workers in turn, the replacement included.
    for (let i = 0; i < 4; i++) expect((await call(`${local.urls.ai}/v1/models`)).status).toBe(200);
  }, 40_000);

  it('replaces a background process that dies, leaving the workers as they were', async () => {
    const workers = workerPids();
    const [victim] = backgroundPids();
    process.kill(victim, 'SIGKILL');
    await expect.poll(() => backgroundPids().filter((pid) => pid !== victim), { timeout: 15_000, interval: 100 }).toHaveLength(1);
    await expect.poll(() => local.output(), { timeout: 5_000 }).toContain('local background process exited; starting another');
    await expect.poll(() => local.output(), { timeout: 15_000 }).toContain('local background process replaced');
    expect(workerPids().sort()).toEqual(workers.sort());
  }, 40_000);

  it('stops every process on SIGTERM, with exit code 0', async () => {
    const pids = children().map((c) => c.pid);
    expect(await stopLocalProcess(local, 'SIGTERM')).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 20_000);
});
