/**
 * `npm start` with several worker processes (LOCAL_WORKERS=2): new connections go to the workers in
 * turn, the activity log shows every call answered before a read whichever worker recorded it, a
 * worker that dies is replaced, and SIGTERM stops every process with exit 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { request } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const dataDir = mkdtempSync(join(tmpdir(), 'workers-'));
let child: ChildProcess;
let out = '';
let ai = '';
let data = '';
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

/** The primary's children running bin/local.ts (tsx also starts an esbuild service beside them). */
const workerPids = () =>
  execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(child.pid)], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes('bin/local.ts'))
    .map((line) => Number(line.trim().split(/\s+/)[0]));

beforeAll(async () => {
  child = spawn(process.execPath, ['--import', 'tsx', 'bin/local.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, AI_PORT: '0', DATA_PORT: '0', EVENTS_PORT: '0', LOG_LEVEL: 'warn', LOCAL_WORKERS: '2' },
  });
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start: ${out}`)), 30_000);
    child.stdout!.on('data', () => {
      if (out.includes('Events API')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
  });
  ai = /AI API\s+(http:\S+)/.exec(out)![1];
  data = /Data API\s+(http:\S+)/.exec(out)![1];
  key = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8')).secret_key;
}, 40_000);

afterAll(() => {
  if (child.exitCode === null) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

describe('npm start with LOCAL_WORKERS=2', () => {
  it('says so, and runs two worker processes', () => {
    expect(out).toContain('2 worker processes');
    expect(workerPids()).toHaveLength(2);
  });

  it('lists every call answered before the read, whichever worker recorded it', async () => {
    const from = Date.now();
    for (let i = 0; i < 10; i++) expect((await call(`${ai}/v1/models`, { 'x-operation-id': `op_workers_${i}` })).status).toBe(200);
    // At once: the other worker still holds its share in memory (it writes every 100 ms).
    const page = await call(`${data}/v1/activity?kind=api.call&from=${from}&limit=100`);
    expect(page.status).toBe(200);
    const models = page.body.items.filter((i: { route: string }) => i.route === '/v1/models');
    expect(models).toHaveLength(10);
  });

  it('replaces a worker that dies', async () => {
    const [victim, survivor] = workerPids();
    process.kill(victim, 'SIGKILL');
    await expect.poll(() => workerPids().filter((pid) => pid !== victim), { timeout: 15_000, interval: 100 }).toHaveLength(2);
    expect(workerPids()).toContain(survivor);
    await expect.poll(() => out, { timeout: 5_000 }).toContain('local worker exited; starting another');
    await expect.poll(() => out, { timeout: 15_000 }).toContain('local worker replaced');
    // Fresh connections go to both workers in turn, the replacement included.
    for (let i = 0; i < 4; i++) expect((await call(`${ai}/v1/models`)).status).toBe(200);
  }, 40_000);

  it('stops every process on SIGTERM, with exit code 0', async () => {
    const pids = workerPids();
    const code = await new Promise<number | null>((resolve) => {
      child.once('exit', (c) => resolve(c));
      child.kill('SIGTERM');
    });
    expect(code).toBe(0);
    for (const pid of pids) expect(() => process.kill(pid, 0)).toThrow();
  }, 20_000);
});
