/**
 * `npm start` as a new user runs it: a child process on free ports, the bootstrap printed once and
 * written 0600, state reused on the next start, and a clean exit on SIGTERM and SIGINT.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const dataDir = mkdtempSync(join(tmpdir(), 'start-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

async function start(): Promise<{ child: ChildProcess; output: () => string; ai: string }> {
  const [ai, data, events] = [await freePort(), await freePort(), await freePort()];
  const child = spawn(join(ROOT, 'node_modules', '.bin', 'tsx'), ['bin/local.ts'], {
    cwd: ROOT,
    env: { ...process.env, DATA_DIR: dataDir, AI_PORT: String(ai), DATA_PORT: String(data), EVENTS_PORT: String(events), LOG_LEVEL: 'silent' },
  });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no start: ${out}`)), 20_000);
    child.stdout!.on('data', () => {
      if (out.includes('Events API')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${out}`)));
  });
  return { child, output: () => out, ai: `http://127.0.0.1:${ai}` };
}

const stop = (child: ChildProcess, signal: NodeJS.Signals) =>
  new Promise<number | null>((resolve) => {
    child.once('exit', (code) => resolve(code));
    child.kill(signal);
  });

describe('npm start', () => {
  it('bootstraps once, serves the APIs, reuses its state, and shuts down cleanly', async () => {
    const first = await start();
    const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    expect(creds).toMatchObject({ organization_id: expect.stringMatching(/^org_/), workspace_id: expect.stringMatching(/^ws_/), secret_key: expect.stringMatching(/^aik_[0-9a-f]{64}$/) });
    expect(statSync(join(dataDir, 'credentials.json')).mode & 0o777).toBe(0o600);
    expect(first.output()).toContain(creds.secret_key); // printed once, on the first start
    const res = await fetch(`${first.ai}/v1/models`, { headers: { authorization: `Bearer ${creds.secret_key}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).object).toBe('list');
    expect(await stop(first.child, 'SIGTERM')).toBe(0);
    expect(first.output()).toContain('SIGTERM');

    const second = await start();
    expect(second.output()).not.toContain(creds.secret_key);
    expect(second.output()).toContain('Reusing');
    const again = await fetch(`${second.ai}/v1/models`, { headers: { authorization: `Bearer ${creds.secret_key}` } });
    expect(again.status).toBe(200);
    expect(await stop(second.child, 'SIGINT')).toBe(0);
  }, 60_000);
});
