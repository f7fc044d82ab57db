/**
 * An open stream whose credential is revoked (spec 5 rule 5; docs/events/stream.md "Credential
 * changes"), through `npm start` with LOCAL_WORKERS=2 and CREDENTIAL_CACHE_MS=1000, with real `ws`
 * clients: disabling the stream's secret key, its organization, or its publishable key closes the
 * socket with 4403 within the cache time (plus a generous margin for a loaded machine), and an event
 * published after the change is not sent to it (it stays in the inbox, never leased).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import WebSocket from 'ws';
import { adminOk } from '../helpers/cli.js';
import { useLocalProcess } from '../helpers/local-process.js';
import { callApi, ok } from '../helpers/data-api.js';
import { bearer } from '../helpers/platform.js';
import { waitFor as waitUntil } from '../helpers/wait.js';

const CACHE_MS = 1_000;
/** The check runs before each pull (every 150 ms) once the cache entry expired: the margin is for a loaded machine. */
const CLOSE_WITHIN_MS = CACHE_MS + 6_000;
const ORIGIN = 'http://app.example';

const used = useLocalProcess('stream-revoke-', { LOCAL_WORKERS: '2', CREDENTIAL_CACHE_MS: String(CACHE_MS) });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const until = (check: () => boolean, what: string, timeout = 10_000) => waitUntil(what, check, timeout, 10);

class Client {
  frames: any[] = [];
  closed?: { code: number; reason: string; at: number };
  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.frames.push(JSON.parse(String(data))));
    ws.on('close', (code, reason) => (this.closed = { code, reason: String(reason), at: Date.now() }));
    ws.on('error', () => undefined);
  }
  ids = () => this.frames.map((f) => f.event_id);
}

function open(workspace: string, sub: string, protocols: string[], headers: Record<string, string>): Promise<Client> {
  const url = `${used.local.urls.events.replace(/^http/, 'ws')}/v1/workspaces/${workspace}/subscriptions/${sub}/stream`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, protocols, { headers });
    const client = new Client(ws);
    ws.once('open', () => resolve(client));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`stream refused: ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

const workspaceOf = () => JSON.parse(readFileSync(join(used.dataDir, 'credentials.json'), 'utf8')).workspace_id as string;
const api = (key: string, workspace: string, method: string, path: string, body?: unknown) =>
  callApi(used.local.urls.events, bearer(key), method, `/v1/workspaces/${workspace}${path}`, body);
const subscribe = async (key: string, workspace: string, type: string) =>
  (await ok(api(key, workspace, 'POST', '/subscriptions', { types: [type], delivery: { mode: 'websocket' } }), 201)).subscription_id as string;
const publish = async (key: string, workspace: string, type: string, data: unknown) =>
  (await ok(api(key, workspace, 'POST', '/events', { event: { type, data } }), 202)).accepted[0].event_id as string;

/** The stream works, then `revoke()`; the socket closes with 4403 `<code>: …` within the cache time. */
async function expectClosedAfter(client: Client, revoke: () => void, code: string): Promise<number> {
  revoke();
  const revokedAt = Date.now();
  await until(() => client.closed !== undefined, `the close after ${code}`, CLOSE_WITHIN_MS + 5_000);
  expect(client.closed!.code).toBe(4403);
  expect(client.closed!.reason).toMatch(new RegExp(`^${code}: `));
  expect(client.closed!.at - revokedAt).toBeLessThan(CLOSE_WITHIN_MS);
  return revokedAt;
}

/**
 * Once every worker's cache entry of the revoked credential is older than the revocation, publishes
 * one more event and shows it is not sent to the closed socket: it waits in the inbox (returned).
 */
async function publishAfterRevocation(workspace: string, sub: string, type: string, revokedAt: number) {
  await sleep(Math.max(0, revokedAt + CACHE_MS + 200 - Date.now()));
  const after = await publish(used.key, workspace, type, 2);
  await sleep(1_000); // deliberate: the event would reach the stream meanwhile, were it still served
  const pulled = await ok(api(used.key, workspace, 'POST', `/subscriptions/${sub}/pull`, { max: 10 }), 200);
  return { after, pulled: pulled.messages as { event_id: string; delivery_count: number }[] };
}

describe('an open stream whose credential is revoked (LOCAL_WORKERS=2, CREDENTIAL_CACHE_MS=1000)', () => {
  it('closes with 4403 key_disabled once its secret key is disabled, and sends no event published after', async () => {
    const workspace = workspaceOf();
    const streamKey = adminOk(used.dataDir, 'key', 'create', '--org', used.org);
    const sub = await subscribe(used.key, workspace, 'rk.a');
    const client = await open(workspace, sub, ['service.v1'], bearer(streamKey.key));
    const before = await publish(used.key, workspace, 'rk.a', 1);
    await until(() => client.ids().includes(before), 'the frame before the disable');
    client.ws.send(JSON.stringify({ ack: [before] }));

    const revokedAt = await expectClosedAfter(client, () => adminOk(used.dataDir, 'key', 'disable', '--key-id', streamKey.id), 'key_disabled');
    const { after, pulled } = await publishAfterRevocation(workspace, sub, 'rk.a', revokedAt);
    expect(client.ids()).toEqual([before]);
    // It waits in the inbox, never leased (delivery_count 1 on its first pull).
    expect(pulled.map((m) => [m.event_id, m.delivery_count])).toEqual([[after, 1]]);
    // The key opens no new stream.
    await expect(open(workspace, sub, ['service.v1'], bearer(streamKey.key))).rejects.toThrow('stream refused: 403');
  }, 60_000);

  it('closes with 4403 organization_disabled once its organization is disabled', async () => {
    const org = adminOk(used.dataDir, 'org', 'create', '--name', 'revoked-org').id as string;
    const workspace = adminOk(used.dataDir, 'workspace', 'create', '--org', org, '--name', 'w').id as string;
    const key = adminOk(used.dataDir, 'key', 'create', '--org', org).key as string;
    const sub = await subscribe(key, workspace, 'ro.a');
    const client = await open(workspace, sub, ['service.v1'], bearer(key));
    const before = await publish(key, workspace, 'ro.a', 1);
    await until(() => client.ids().includes(before), 'the frame before the disable');
    await expectClosedAfter(client, () => adminOk(used.dataDir, 'org', 'disable', '--org', org), 'organization_disabled');
    expect(client.ids()).toEqual([before]);
  }, 60_000);

  it('closes with 4403 key_disabled once its publishable key is disabled, and sends no event published after', async () => {
    const workspace = workspaceOf();
    const app = adminOk(used.dataDir, 'app', 'create', '--workspace', workspace, '--name', 'browser-app').id as string;
    const publishable = adminOk(used.dataDir, 'publishable-key', 'create', '--app', app, '--origins', ORIGIN);
    const sub = await subscribe(used.key, workspace, 'rp.a');
    const client = await open(workspace, sub, ['service.v1', `bearer.${publishable.key}`], { origin: ORIGIN });
    const before = await publish(used.key, workspace, 'rp.a', 1);
    await until(() => client.ids().includes(before), 'the frame before the disable');
    client.ws.send(JSON.stringify({ ack: [before] }));

    const revokedAt = await expectClosedAfter(client, () => adminOk(used.dataDir, 'publishable-key', 'disable', '--key-id', publishable.id), 'key_disabled');
    const { after, pulled } = await publishAfterRevocation(workspace, sub, 'rp.a', revokedAt);
    expect(client.ids()).toEqual([before]);
    expect(pulled.map((m) => m.event_id)).toEqual([after]);
  }, 60_000);
});
