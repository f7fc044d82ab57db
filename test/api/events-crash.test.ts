/**
 * Crash safety of Events (issue 10): every process of the local platform is killed with SIGKILL while
 * clients publish to a webhook and a pull subscription; after a restart on the same DATA_DIR every
 * accepted event reaches both, at least once. Deliveries leased by a killed worker come back when their
 * lease ends (60 s), outbox entries a killed publish left are swept (after 10 s): the test waits for both.
 */
import { afterAll, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';

const dataDir = mkdtempSync(join(tmpdir(), 'events-crash-'));
let server: LocalProcess | undefined;
const received = new Set<string>();
const receiver = http.createServer((req, res) => {
  const id = req.headers['x-event-id'];
  req.resume();
  req.on('end', () => {
    if (typeof id === 'string') received.add(id);
    res.statusCode = 204;
    res.end();
  });
});

afterAll(async () => {
  if (server) await crashLocalProcess(server);
  await new Promise((r) => receiver.close(r));
  rmSync(dataDir, { recursive: true, force: true });
});

const start = () => startLocalProcess({ DATA_DIR: dataDir, LOCAL_WORKERS: '2', EVENTS_ALLOW_LOOPBACK_WEBHOOKS: '1', EVENTS_RATE_LIMIT_PER_MINUTE: '0' });

it('delivers every accepted event at least once after a SIGKILL of every process mid-publish', async () => {
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', () => r()));
  const hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  server = await start();
  const { secret_key, workspace_id } = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
  const headers = { authorization: `Bearer ${secret_key}`, 'content-type': 'application/json' };
  const ws = (s: LocalProcess) => `${s.urls.events}/v1/workspaces/${workspace_id}`;
  const create = async (delivery: unknown) => {
    const res = await fetch(`${ws(server!)}/subscriptions`, { method: 'POST', headers, body: JSON.stringify({ types: ['crash.*'], delivery }) });
    expect(res.status).toBe(201);
    return ((await res.json()) as any).subscription_id as string;
  };
  const pullSub = await create({ mode: 'pull' });
  await create({ mode: 'webhook', url: hook });

  // Four clients publish batches of 10 until the crash; only 202 answers count as accepted.
  const accepted = new Set<string>();
  let crashed = false;
  const client = async (c: number) => {
    for (let seq = 0; !crashed; seq++) {
      try {
        const res = await fetch(`${ws(server!)}/events`, { method: 'POST', headers, body: JSON.stringify({ events: Array.from({ length: 10 }, (_, i) => ({ type: 'crash.item', data: { c, seq, i } })) }) });
        if (res.status === 202) for (const a of ((await res.json()) as any).accepted) accepted.add(a.event_id);
      } catch {
        return; // the connection died with the server
      }
    }
  };
  const clients = Array.from({ length: 4 }, (_, c) => client(c));
  await new Promise((r) => setTimeout(r, 1500));
  crashed = true;
  await crashLocalProcess(server);
  await Promise.all(clients);
  expect(accepted.size).toBeGreaterThan(50);

  server = await start();
  // The pull subscription: every accepted event is in its inbox (pulled with long leases, never acked).
  const pulled = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${ws(server)}/subscriptions/${pullSub}/pull`, { method: 'POST', headers, body: JSON.stringify({ max: 100, lease_seconds: 300 }) });
    const messages = ((await res.json()) as any).messages as { event_id: string }[];
    for (const m of messages) pulled.add(m.event_id);
    if (!messages.length) break;
  }
  expect([...accepted].filter((id) => !pulled.has(id))).toEqual([]);
  // The webhook: every accepted event arrives, at the latest when leases of killed workers end.
  const until = Date.now() + 100_000;
  while ([...accepted].some((id) => !received.has(id)) && Date.now() < until) await new Promise((r) => setTimeout(r, 250));
  expect([...accepted].filter((id) => !received.has(id))).toEqual([]);
}, 150_000);
