/**
 * The live tail's reader (lambdas/events/event-log.ts) on the AWS engine's store: DynamoDB on dynalite.
 * Events are published through the local server's Events API over that engine; the reader's sort-key
 * ranges (a BETWEEN from the cursor to the settle horizon, the newest page read backwards) must answer
 * as they do on SQLite (test/api/console-tail.test.ts), and a cursor at or past the horizon must not
 * become a range DynamoDB refuses (its BETWEEN needs ordered bounds).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ManualClock } from '../../lambdas/engine/clock.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { bootstrap, type DevCredentials } from '../../lambdas/local/bootstrap.js';
import { startPlatform } from '../../lambdas/local/platform.js';
import { EVENT_LOG_SETTLE_MS, recentEvents } from '../../lambdas/events/event-log.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';
import { bearer } from '../helpers/platform.js';
import { callApi, ok } from '../helpers/data-api.js';

const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
let engine: Engine;
let credentials: DevCredentials;
let platform: Awaited<ReturnType<typeof startPlatform>>;
let dataDir: string;

beforeAll(async () => {
  ({ engine } = await startAwsDataEngine('event-log-aws', { clock }));
  dataDir = mkdtempSync(join(tmpdir(), 'event-log-aws-creds-'));
  ({ credentials } = await bootstrap(engine, dataDir));
  platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
  registerApiOrigins(platform.urls);
});
afterAll(async () => {
  await platform?.close();
  rmSync(dataDir, { recursive: true, force: true });
});

const publish = async (n: number, type: string): Promise<string[]> => {
  const events = Array.from({ length: n }, (_, i) => ({ type, data: { i } }));
  const answer = await ok(callApi(platform.urls.events, bearer(credentials.secret_key), 'POST', `/v1/workspaces/${credentials.workspace_id}/events`, { events }), 202);
  return answer.accepted.map((a: { event_id: string }) => a.event_id);
};
const read = (options: { after?: string; limit: number }) => recentEvents(engine, credentials.workspace_id, options);

it('reads the events after a cursor in order, pages, and the newest page without one, on DynamoDB', async () => {
  const start = await read({ limit: 10 });
  expect(start.events).toEqual([]);
  const first = await publish(3, 'aws.first');
  // Not settled yet; a cursor past the horizon (the newest id) is an empty answer, not a refused range.
  expect((await read({ after: start.next_cursor, limit: 10 })).events).toEqual([]);
  expect(await read({ after: first[2], limit: 10 })).toEqual({ events: [], next_cursor: first[2], has_more: false });
  clock.advance(EVENT_LOG_SETTLE_MS + 1);
  const a = await read({ after: start.next_cursor, limit: 2 });
  expect(a.events.map((e) => e.event_id)).toEqual(first.slice(0, 2));
  expect(a).toMatchObject({ next_cursor: first[1], has_more: true });
  expect(a.events[0]).toMatchObject({ type: 'aws.first', data: { i: 0 }, tenant: { workspace_id: credentials.workspace_id } });
  const b = await read({ after: a.next_cursor, limit: 2 });
  expect(b.events.map((e) => e.event_id)).toEqual(first.slice(2));
  expect(b.has_more).toBe(false);
  const second = await publish(4, 'aws.second');
  clock.advance(EVENT_LOG_SETTLE_MS + 1);
  expect((await read({ after: b.next_cursor, limit: 100 })).events.map((e) => e.event_id)).toEqual(second);
  expect((await read({ limit: 5 })).events.map((e) => e.event_id)).toEqual([...first, ...second].slice(-5));
  // Another workspace's partition is its own.
  expect((await recentEvents(engine, 'ws_00000000000000000000000000', { limit: 100 })).events).toEqual([]);
});
