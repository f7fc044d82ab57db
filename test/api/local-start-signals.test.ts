/**
 * `npm start` under a process manager: SIGTERM goes to the `npm start` process alone (as systemd,
 * Docker or pm2 send it), and every platform process must stop, not only npm.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const ROOT = join(import.meta.dirname, '..', '..');
const dataDir = mkdtempSync(join(tmpdir(), 'start-signals-'));

/** Live processes of a process group (a zombie has exited: only its parent has not read its status). */
function groupProcesses(pgid: number): number[] {
  return readdirSync('/proc').flatMap((entry) => {
    if (!/^\d+$/.test(entry)) return [];
    try {
      // pid (comm) state ppid pgrp …: comm may hold spaces, so read after its closing parenthesis.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const [state, , pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      return Number(pgrp) === pgid && state !== 'Z' ? [Number(entry)] : [];
    } catch {
      return [];
    }
  });
}

const answers = (url: string) =>
  fetch(url, { signal: AbortSignal.timeout(2_000) }).then(
    () => true,
    () => false,
  );

let leftover: number | undefined;
afterAll(() => {
  // A failed run must not leave servers behind for the rest of the suite.
  if (leftover !== undefined) for (const pid of groupProcesses(leftover)) process.kill(pid, 'SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

describe('npm start under a process manager', () => {
  it('stops every platform process (npm, the server and its workers) on SIGTERM to the npm process', async () => {
    // A group of its own, so that every process it starts can be found (and cleaned up) by its group id.
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...process.env, DATA_DIR: dataDir, AI_PORT: '0', DATA_PORT: '0', EVENTS_PORT: '0', OPS_PORT: '0', CONSOLE_PORT: '0', LOG_LEVEL: 'silent', LOCAL_WORKERS: '2' },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    leftover = npm.pid!;
    let out = '';
    npm.stdout!.on('data', (d) => (out += d));
    npm.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => npm.once('exit', (code) => resolve(code)));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no start within 40 s: ${out}`)), 40_000);
      npm.stdout!.on('data', () => {
        if (/Events API\s+http:\S+/.test(out)) {
          clearTimeout(timer);
          resolve();
        }
      });
      void exited.then((code) => reject(new Error(`exited ${code}: ${out}`)));
    });
    // Every port it printed: the three APIs' and any other it serves.
    const urls = [...new Set([...out.matchAll(/http:\/\/[\d.]+:\d+/g)].map((m) => m[0]))];
    expect(urls.length).toBeGreaterThanOrEqual(3);
    for (const url of urls) expect(await answers(url), url).toBe(true);
    const started = groupProcesses(npm.pid!);
    // npm, its shell or not, the server and its two workers.
    expect(started.length).toBeGreaterThanOrEqual(4);

    process.kill(npm.pid!, 'SIGTERM');
    expect(await exited).toBe(0);
    // npm waits for its child: once it exited, nothing of the platform may be left.
    const deadline = Date.now() + 10_000;
    while (groupProcesses(npm.pid!).length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(groupProcesses(npm.pid!)).toEqual([]);
    for (const url of urls) expect(await answers(url), url).toBe(false);
    leftover = undefined;
  }, 90_000);
});
