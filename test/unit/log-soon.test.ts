/**
 * logSoon: the lines of one event-loop turn (the local server's access lines) go out in one stderr
 * write at the end of the turn, with the content a log line has, and none below the level.
 */
import { afterEach, beforeEach, expect, it, vi } from 'vitest';
import { setImmediate as turn } from 'node:timers/promises';
import { logSoon } from '../../lambdas/shared/log.js';
import { useSettings } from '../../lambdas/shared/settings.js';

let writes: string[];
beforeEach(() => {
  useSettings({ logLevel: 'info' });
  writes = [];
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
    writes.push(String(chunk));
    return true;
  });
});
afterEach(() => {
  vi.restoreAllMocks();
  useSettings();
});

it("writes a turn's lines together at its end, each a whole JSON line", async () => {
  logSoon('info', 'request', { route: 'a', status: 200 });
  logSoon('debug', 'not at info');
  logSoon('warn', 'request', { route: 'b', status: 500 });
  expect(writes).toEqual([]);
  await turn();
  expect(writes).toHaveLength(1);
  const lines = writes[0].trimEnd().split('\n').map((l) => JSON.parse(l));
  expect(lines).toEqual([
    { level: 'info', message: 'request', time: expect.any(String), route: 'a', status: 200 },
    { level: 'warn', message: 'request', time: expect.any(String), route: 'b', status: 500 },
  ]);
  logSoon('info', 'next turn');
  await turn();
  expect(writes).toHaveLength(2);
});

it('writes at once past 64 KB of lines, not holding a burst in memory', () => {
  for (let i = 0; i < 1000; i++) logSoon('info', 'request', { filler: 'x'.repeat(100) });
  expect(writes.length).toBeGreaterThan(0);
  expect(writes.join('').split('\n').filter(Boolean).every((l) => JSON.parse(l).message === 'request')).toBe(true);
});
