/**
 * Crash safety of Events: every process of the local platform is killed with SIGKILL while
 * clients publish to a webhook and a pull subscription; after a restart on the same DATA_DIR every
 * accepted event reaches both, at least once; and every Data write acknowledged before the kill has its
 * platform event. Deliveries leased by a killed worker come back when their lease ends (60 s), outbox
 * entries a killed publish or write left are swept (after 10 s): the test waits for both.
 */
import { afterAll, expect, it } from 'vitest';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { Tenants } from '../../lambdas/auth/tenants.js';

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

  // An application-bound key (made beside the running server, on the same SQLite file): its Data writes
  // publish platform events into the workspace, where a pull subscription takes record.*.
  const side = createEmbeddedEngine({ dataDir });
  const tenants = new Tenants(side.kv, () => Date.now());
  const { organization_id } = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
  const app = await tenants.createApplication(workspace_id, 'crash-app', []);
  const appKey = (await tenants.createSecretKey(organization_id, app.id)).key;
  await side.close();
  const appHeaders = { authorization: `Bearer ${appKey}`, 'content-type': 'application/json' };
  const data = (s: LocalProcess, path: string, method = 'PUT', body?: unknown) =>
    fetch(`${s.urls.data}/v1/databases/crashdb${path}`, { method, headers: appHeaders, body: body === undefined ? undefined : JSON.stringify(body) });
  expect((await data(server, '')).status).toBe(201);
  expect((await data(server, '/collections/items', 'PUT', { mode: 'free' })).status).toBe(201);
  const changes = await fetch(`${ws(server)}/subscriptions`, { method: 'POST', headers: appHeaders, body: JSON.stringify({ types: ['record.*'], delivery: { mode: 'pull' } }) });
  expect(changes.status).toBe(201);
  const changesSub = ((await changes.json()) as any).subscription_id as string;
  const written = new Set<string>();

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
  const writer = async () => {
    for (let n = 0; !crashed; n++) {
      try {
        const res = await data(server!, '/collections/items/records', 'POST', { n });
        if (res.status === 201) written.add(((await res.json()) as any).id);
      } catch {
        return;
      }
    }
  };
  const clients = [...Array.from({ length: 4 }, (_, c) => client(c)), writer(), writer()];
  await new Promise((r) => setTimeout(r, 1500)); // deliberate: the load runs a while before the crash
  crashed = true;
  await crashLocalProcess(server);
  await Promise.all(clients);
  expect(accepted.size).toBeGreaterThan(50);
  expect(written.size).toBeGreaterThan(10);

  server = await start();
  // The pull subscription: every accepted event is in its inbox (pulled with long leases, never acked).
  const pulled = new Set<string>();
  const ack = (sub: string, ids: string[], h = headers) => fetch(`${ws(server!)}/subscriptions/${sub}/ack`, { method: 'POST', headers: h, body: JSON.stringify({ ids }) });
  for (let i = 0; i < 200; i++) {
    const res = await fetch(`${ws(server)}/subscriptions/${pullSub}/pull`, { method: 'POST', headers, body: JSON.stringify({ max: 100, lease_seconds: 300 }) });
    const messages = ((await res.json()) as any).messages as { event_id: string }[];
    for (const m of messages) pulled.add(m.event_id);
    if (!messages.length) break;
    await ack(pullSub, messages.map((m) => m.event_id));
  }
  expect([...accepted].filter((id) => !pulled.has(id))).toEqual([]);
  // The webhook: every accepted event arrives, at the latest when leases of killed workers end.
  const until = Date.now() + 100_000;
  while ([...accepted].some((id) => !received.has(id)) && Date.now() < until) await new Promise((r) => setTimeout(r, 250));
  expect([...accepted].filter((id) => !received.has(id))).toEqual([]);
  // Every acknowledged Data write has its record.created event (swept after the restart if the kill
  // came between the write's commit and its publish).
  const changed = new Set<string>();
  const changesUntil = Date.now() + 40_000;
  while ([...written].some((id) => !changed.has(id)) && Date.now() < changesUntil) {
    const res = await fetch(`${ws(server)}/subscriptions/${changesSub}/pull`, { method: 'POST', headers: appHeaders, body: JSON.stringify({ max: 100, lease_seconds: 300 }) });
    const messages = ((await res.json()) as any).messages as { event_id: string; type: string; data: { record: { id: string } } }[];
    for (const m of messages) if (m.type === 'record.created') changed.add(m.data.record.id);
    if (!messages.length) await new Promise((r) => setTimeout(r, 500));
    else await ack(changesSub, messages.map((m) => m.event_id), appHeaders);
  }
  expect([...written].filter((id) => !changed.has(id))).toEqual([]);
}, 200_000);
