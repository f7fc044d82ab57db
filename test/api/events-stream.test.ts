/**
 * The Events API's WebSocket stream through the local server (docs/events/stream.md), with real `ws`
 * clients: the handshake and its refusals, one envelope per frame in order, acks, redelivery after the
 * lease (the engine's clock is a manual one: leases end without waiting), frame size, the socket
 * limits, and a socket held by one worker of LOCAL_WORKERS=2 receiving what the other accepted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import WebSocket from 'ws';
import { startTestPlatform, bearer, type TestPlatform } from '../helpers/platform.js';
import { callApi, expectError, ok } from '../helpers/data-api.js';
import { adminOk } from '../helpers/cli.js';
import { crashLocalProcess, startLocalProcess, type LocalProcess } from '../helpers/local-process.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { waitFor as waitUntil } from '../helpers/wait.js';

let p: TestPlatform;
let key: Record<string, string>;
let W: string;
const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
const call = (method: string, path: string, body?: unknown) => callApi(p.urls.events, key, method, `/v1/workspaces/${W}${path}`, body);

const subscribe = async (types: string[], mode = 'pull'): Promise<string> => (await ok(call('POST', '/subscriptions', { types, delivery: { mode } }), 201)).subscription_id;
const publish = async (events: Record<string, unknown>[]): Promise<string[]> => (await ok(call('POST', '/events', { events }), 202)).accepted.map((a: any) => a.event_id);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const until = (check: () => boolean, what: string, timeout = 5_000) => waitUntil(what, check, timeout, 10);
const completed = async (): Promise<number> => (await ok(call('GET', '/stats'))).completed;
/** Acks `ids` on the socket and waits until the server has counted them. */
async function acked(c: Client, ids: string[]): Promise<void> {
  const before = await completed();
  c.ack(ids);
  await waitUntil(`${ids.length} acked`, async () => (await completed()) >= before + ids.length, 5_000, 10);
}

/** An open stream: the frames it received (parsed), and how it closed. */
class Client {
  frames: any[] = [];
  /** The 101's headers. */
  upgradeHeaders: Record<string, string | string[] | undefined> = {};
  closed?: { code: number; reason: string };
  constructor(readonly ws: WebSocket) {
    ws.on('message', (data) => this.frames.push(JSON.parse(String(data))));
    ws.on('close', (code, reason) => (this.closed = { code, reason: String(reason) }));
    ws.on('error', () => undefined);
  }
  ids = () => this.frames.map((f) => f.event_id);
  frame = (n: number) => until(() => this.frames.length >= n, `${n} frames (have ${this.frames.length})`);
  ack = (ids: string[]) => this.ws.send(JSON.stringify({ ack: ids }));
  closing = () => until(() => this.closed !== undefined, 'the close').then(() => this.closed!);
  close = async () => {
    this.ws.close();
    await this.closing();
  };
}

type Opened = { client: Client; status?: undefined } | { client?: undefined; status: number; body: any };

interface OpenOptions {
  protocols?: string[];
  headers?: Record<string, string>;
  query?: string;
  base?: string;
  workspace?: string;
}

/** Opens the stream; resolves with the client, or with the HTTP answer that refused the upgrade. */
function open(sub: string, options: OpenOptions = {}): Promise<Opened> {
  const base = (options.base ?? p.urls.events).replace(/^http/, 'ws');
  const url = `${base}/v1/workspaces/${options.workspace ?? W}/subscriptions/${sub}/stream${options.query ?? ''}`;
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, options.protocols ?? ['service.v1'], { headers: options.headers ?? key });
    const client = new Client(ws);
    ws.once('upgrade', (res) => (client.upgradeHeaders = res.headers));
    ws.once('open', () => resolve({ client }));
    ws.once('unexpected-response', (_req, res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
    });
    ws.once('error', (error) => reject(error));
  });
}

async function opened(sub: string, options?: OpenOptions): Promise<Client> {
  const r = await open(sub, options);
  if (!r.client) throw new Error(`stream refused: ${r.status} ${JSON.stringify(r.body)}`);
  return r.client;
}

async function refused(sub: string, status: number, code: string, options?: OpenOptions) {
  const r = await open(sub, options);
  if (r.client) {
    await r.client.close();
    throw new Error(`stream opened; expected ${status} ${code}`);
  }
  expect({ status: r.status, code: r.body?.error?.code }, JSON.stringify(r.body)).toEqual({ status, code });
  expect(r.body.error).toEqual({ code, message: expect.any(String), type: expect.any(String), param: r.body.error.param });
}

beforeAll(async () => {
  p = await startTestPlatform({ clock });
  key = bearer(p.credentials.secret_key);
  W = p.credentials.workspace_id;
});
afterAll(async () => p?.close());

describe('opening a stream', () => {
  it('answers 426 upgrade_required without an upgrade, once the credential is checked', async () => {
    const sub = await subscribe(['open.a']);
    const res = await call('GET', `/subscriptions/${sub}/stream`);
    expectError(res, 426, 'upgrade_required');
    expect(res.body.error.message).toContain('service.v1');
    expectError(await callApi(p.urls.events, {}, 'GET', `/v1/workspaces/${W}/subscriptions/${sub}/stream`), 401, 'missing_credentials');
  });

  it('requires the service.v1 subprotocol and answers with it only', async () => {
    const sub = await subscribe(['open.b']);
    await refused(sub, 426, 'upgrade_required', { protocols: [] });
    await refused(sub, 426, 'upgrade_required', { protocols: ['other.v1'] });
    const client = await opened(sub, { protocols: ['other.v1', 'service.v1'] });
    expect(client.ws.protocol).toBe('service.v1');
    // The 101 names its request as every other answer does.
    expect(client.upgradeHeaders['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    await client.close();
  });

  it('refuses with the JSON error shape before the upgrade: 401, 404, 409 for a webhook subscription, 400 for a bad lease', async () => {
    const sub = await subscribe(['open.c']);
    await refused(sub, 401, 'missing_credentials', { headers: {} });
    await refused(sub, 401, 'invalid_credentials', { headers: bearer('aik_' + '0'.repeat(64)) });
    await refused('sub_' + '0'.repeat(26), 404, 'subscription_not_found');
    const webhook = (await ok(call('POST', '/subscriptions', { types: ['never.sent'], delivery: { mode: 'webhook', url: 'https://93.184.215.14/hooks' } }), 201)).subscription_id;
    await refused(webhook, 409, 'wrong_delivery_mode');
    await refused(sub, 400, 'invalid_limit', { query: '?lease_seconds=4' });
    await refused(sub, 400, 'invalid_limit', { query: '?lease_seconds=301' });
    await refused(sub, 400, 'invalid_query', { query: '?max=3' });
    // A server credential from a browser, as on every Events route.
    await refused(sub, 403, 'secret_key_in_browser', { headers: { ...key, origin: 'http://127.0.0.1:1' } });
  });

  it('needs events:stream.open (403 forbidden without it) and a workspace of the credential\'s own organization', async () => {
    const sub = await subscribe(['open.d']);
    const narrowed = adminOk(p.dataDir, 'key', 'create', '--org', p.credentials.organization_id, '--permissions', 'events:event.publish,events:message.pull');
    await refused(sub, 403, 'forbidden', { headers: bearer(narrowed.key) });
    const other = adminOk(p.dataDir, 'org', 'create', '--name', 'Other');
    const theirs = adminOk(p.dataDir, 'key', 'create', '--org', other.id);
    await refused(sub, 403, 'forbidden', { headers: bearer(theirs.key) });
    await refused(sub, 403, 'forbidden', { headers: bearer(theirs.key), workspace: 'ws_' + '0'.repeat(26) });
    const allowed = adminOk(p.dataDir, 'key', 'create', '--org', p.credentials.organization_id, '--permissions', 'events:stream.open');
    await (await opened(sub, { headers: bearer(allowed.key) })).close();
    // Four admin CLI processes: slow when the machine is busy.
  }, 120_000);
});

describe('frames', () => {
  it('streams a pull and a websocket subscription: one envelope per frame, in order, each once', async () => {
    const pullSub = await subscribe(['order.*']);
    const wsSub = await subscribe(['order.*'], 'websocket');
    const a = await opened(pullSub);
    const b = await opened(wsSub);
    const ids = await publish(Array.from({ length: 5 }, (_, i) => ({ type: 'order.paid', data: { i } })));
    for (let i = 5; i < 8; i++) ids.push(...(await publish([{ type: 'order.item.added', data: { i } }])));
    await a.frame(8);
    await b.frame(8);
    await sleep(500); // deliberate: no frame comes twice meanwhile
    for (const c of [a, b]) {
      expect(c.ids()).toEqual(ids);
      expect(c.frames.map((f) => f.data.i)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      expect(c.frames[0]).toEqual({
        event_id: ids[0],
        type: 'order.paid',
        source: p.credentials.key_id,
        time: new Date(clock.now()).toISOString(),
        tenant: { organization_id: p.credentials.organization_id, account_id: p.credentials.organization_id, workspace_id: W, application_id: null },
        idempotency_key: ids[0],
        data: { i: 0 },
        delivery_count: 1,
      });
    }
    await a.close();
    await b.close();
  });

  it('reaches an open stream promptly after a publish', async () => {
    const sub = await subscribe(['prompt.*']);
    const c = await opened(sub);
    await sleep(300); // deliberate: the stream goes idle, so the publish has to wake it
    const started = Date.now();
    await publish([{ type: 'prompt.now', data: 1 }]);
    await c.frame(1);
    expect(Date.now() - started).toBeLessThan(1_000);
    await c.close();
  });

  it('an ack removes a message; an unacked frame comes again after its lease, with delivery_count 2', async () => {
    const sub = await subscribe(['lease.*']);
    const c = await opened(sub);
    const [first, second] = await publish([{ type: 'lease.a', data: 1 }, { type: 'lease.b', data: 2 }]);
    await c.frame(2);
    await acked(c, [first]);
    expect(c.frames).toHaveLength(2);
    clock.advance(31_000);
    await c.frame(3);
    expect(c.frames[2]).toMatchObject({ event_id: second, delivery_count: 2 });
    await acked(c, [second]);
    clock.advance(31_000);
    await sleep(500); // deliberate: nothing comes again meanwhile
    expect(c.ids()).toEqual([first, second, second]);
    // Both acked: nothing is left for a pull either.
    clock.advance(31_000);
    expect((await ok(call('POST', `/subscriptions/${sub}/pull`, {}))).messages).toEqual([]);
    await c.close();
  });

  it('takes the lease from lease_seconds (5 to 300)', async () => {
    const sub = await subscribe(['short.*']);
    const c = await opened(sub, { query: '?lease_seconds=5' });
    const [id] = await publish([{ type: 'short.one', data: 1 }]);
    await c.frame(1);
    clock.advance(4_000);
    await sleep(300); // deliberate: nothing comes again before the lease ends
    expect(c.frames).toHaveLength(1);
    clock.advance(1_500);
    await c.frame(2);
    expect(c.frames[1]).toMatchObject({ event_id: id, delivery_count: 2 });
    await c.close();
  });

  it('accepts a 49,152-byte client frame and closes the socket with 1009 on a 49,153-byte one', async () => {
    const sub = await subscribe(['big.*']);
    const c = await opened(sub);
    const ack = JSON.stringify({ ack: ['evt_' + '0'.repeat(26)] });
    c.ws.send(ack + ' '.repeat(49_152 - ack.length));
    await sleep(300); // deliberate: no close comes meanwhile
    expect(c.closed).toBeUndefined();
    await publish([{ type: 'big.after', data: 1 }]);
    await c.frame(1);
    c.ws.send(ack + ' '.repeat(49_153 - ack.length));
    expect((await c.closing()).code).toBe(1009);
  });

  it('closes with 1008 on a malformed client frame and 1003 on a binary one', async () => {
    const sub = await subscribe(['bad.*']);
    for (const frame of ['not json', '[1]', '{"ack": "evt_x"}', '{"ack": []}', '{"ack": ["nope"]}', '{"ids": ["evt_00000000000000000000000000"]}']) {
      const c = await opened(sub);
      c.ws.send(frame);
      const closed = await c.closing();
      expect(closed.code, frame).toBe(1008);
      expect(closed.reason.length).toBeGreaterThan(0);
    }
    const c = await opened(sub);
    c.ws.send(Buffer.from('{"ack": []}'), { binary: true });
    expect((await c.closing()).code).toBe(1003);
  });

  it('allows 5 open sockets per subscription: the 6th gets 429 too_many_streams, and closing one frees a slot', async () => {
    const sub = await subscribe(['many.*']);
    const clients: Client[] = [];
    for (let i = 0; i < 5; i++) clients.push(await opened(sub));
    await refused(sub, 429, 'too_many_streams');
    await clients.pop()!.close();
    // The server frees the slot once it sees the close.
    let reopened: Opened | undefined;
    await waitUntil('a freed slot', async () => (reopened = await open(sub)).client !== undefined, 5_000, 20);
    clients.push(reopened!.client!);
    // The sockets share the subscription: each message goes to one of them at a time.
    const ids = await publish(Array.from({ length: 10 }, (_, i) => ({ type: 'many.x', data: i })));
    await until(() => clients.reduce((n, c) => n + c.frames.length, 0) >= 10, '10 frames');
    await sleep(300); // deliberate: no frame comes twice meanwhile
    expect(clients.flatMap((c) => c.ids()).sort()).toEqual([...ids].sort());
    for (const c of clients) await c.close();
  });
});

describe('LOCAL_WORKERS=2', () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'stream-workers-'));
  let local: LocalProcess;
  let secret = '';
  let workspace = '';

  /** One call on a connection of its own: node:cluster hands each new connection to the next worker. */
  const fresh = (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> =>
    new Promise((resolve, reject) => {
      const data = body === undefined ? undefined : JSON.stringify(body);
      const req = request(`${local.urls.events}/v1/workspaces/${workspace}${path}`, { method, agent: false, headers: { authorization: `Bearer ${secret}`, ...(data ? { 'content-type': 'application/json' } : {}) } }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : undefined }));
      });
      req.on('error', reject);
      req.end(data);
    });

  beforeAll(async () => {
    local = await startLocalProcess({ DATA_DIR: dataDir, LOG_LEVEL: 'warn', LOCAL_WORKERS: '2' });
    const credentials = JSON.parse(readFileSync(join(dataDir, 'credentials.json'), 'utf8'));
    secret = credentials.secret_key;
    workspace = credentials.workspace_id;
  }, 40_000);

  afterAll(async () => {
    await crashLocalProcess(local);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('delivers to a socket whichever worker answered the publish, and counts sockets across workers', async () => {
    const created = await fresh('POST', '/subscriptions', { types: ['w.*'], delivery: { mode: 'websocket' } });
    expect(created.status).toBe(201);
    const sub = created.body.subscription_id;
    const options = { base: local.urls.events, workspace, headers: bearer(secret) };
    // Two sockets on connections of their own: one in each worker.
    const clients = [await opened(sub, options), await opened(sub, options)];
    // Ten publishes on ten new connections, handed to the two workers in turn.
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await fresh('POST', '/events', { event: { type: 'w.x', data: i } });
      expect(r.status).toBe(202);
      ids.push(r.body.accepted[0].event_id);
    }
    await until(() => clients.reduce((n, c) => n + c.frames.length, 0) >= 10, 'frames from both workers', 10_000);
    await sleep(300); // deliberate: no frame comes twice meanwhile
    expect(clients.flatMap((c) => c.ids()).sort()).toEqual([...ids].sort());
    // The 5-socket limit holds across the two workers: three more open, the sixth is refused.
    for (let i = 0; i < 3; i++) clients.push(await opened(sub, options));
    const sixth = await open(sub, options);
    if (sixth.client) await sixth.client.close();
    expect({ status: sixth.status, code: sixth.client ? undefined : sixth.body?.error?.code }).toEqual({ status: 429, code: 'too_many_streams' });
    for (const c of clients) await c.close();
  }, 30_000);
});
