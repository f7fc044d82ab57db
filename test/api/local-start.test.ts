/**
 * The local server's lifecycle, run through the tsx CLI (as `npx tsx bin/local.ts` runs it; `npm
 * start` itself is in local-start-signals.test.ts): the bootstrap printed once and written 0600, state
 * reused on the next start, and a clean exit on SIGTERM and SIGINT.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLocalProcess, stopLocalProcess } from '../helpers/local-process.js';

const dataDir = mkdtempSync(join(tmpdir(), 'start-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

const start = () => startLocalProcess({ DATA_DIR: dataDir }, { via: 'tsx' });

describe('npm start', () => {
  it('bootstraps once, serves the APIs, reuses its state, and shuts down cleanly', async () => {
    const first = await start();
    const creds = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    expect(creds).toMatchObject({ organization_id: expect.stringMatching(/^org_/), workspace_id: expect.stringMatching(/^ws_/), secret_key: expect.stringMatching(/^aik_[0-9a-f]{64}$/) });
    expect(statSync(join(dataDir, 'credentials.json')).mode & 0o777).toBe(0o600);
    expect(first.output()).toContain(creds.secret_key); // printed once, on the first start
    const res = await fetch(`${first.urls.ai}/v1/models`, { headers: { authorization: `Bearer ${creds.secret_key}` } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as any).object).toBe('list');
    expect(await stopLocalProcess(first, 'SIGTERM')).toBe(0);
    expect(first.output()).toContain('SIGTERM');

    const second = await start();
    expect(second.output()).not.toContain(creds.secret_key);
    expect(second.output()).toContain('Reusing');
    const again = await fetch(`${second.urls.ai}/v1/models`, { headers: { authorization: `Bearer ${creds.secret_key}` } });
    expect(again.status).toBe(200);
    expect(await stopLocalProcess(second, 'SIGINT')).toBe(0);
  }, 60_000);
});
