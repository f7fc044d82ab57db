/**
 * The stream in AWS (docs/decisions/stream-url-aws.md): the WebSocket API's function ($connect,
 * $default, $disconnect) and the `streams` queue's consumer, driven with the events API Gateway and
 * SQS would send, over the AWS adapters: DynamoDB on dynalite (the platform table and the connection
 * table), SQS and the API Gateway Management API through aws-sdk-client-mock (they cannot run here).
 * Publishes and subscriptions go through the local server on the same engine, as the HTTP functions
 * would run them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { ApiGatewayManagementApiClient, DeleteConnectionCommand, GoneException, PostToConnectionCommand } from '@aws-sdk/client-apigatewaymanagementapi';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Context, SQSEvent } from 'aws-lambda';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { SqsQueue } from '../../lambdas/engine/aws/queue.js';
import { ApiGatewayConnectionGateway } from '../../lambdas/engine/aws/connections.js';
import { CONNECTION_TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { bootstrap } from '../../lambdas/local/bootstrap.js';
import { startPlatform } from '../../lambdas/local/platform.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { PublishableKeys } from '../../lambdas/auth/publishable-keys.js';
import { openStreamSlots, STREAM_LIMITS } from '../../lambdas/events/stream-slots.js';
import { settings } from '../../lambdas/shared/settings.js';
import { CONNECT_WAKE_DELAY_SECONDS } from '../../lambdas/events/stream-remote.js';
import { handler as socket, type SocketEvent } from '../../lambdas/http/handlers/events/stream-socket.js';
import { handler as streamsConsumer } from '../../lambdas/consumers/streams.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { bearer } from '../helpers/platform.js';
import { callApi, ok } from '../helpers/data-api.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';

const QUEUE = 'https://sqs.us-east-1.amazonaws.com/111122223333/';
const URLS = Object.fromEntries(['webhooks', 'webhooks-dead', 'jobs', 'jobs-dead', 'streams', 'streams-dead'].map((q) => [q, QUEUE + q]));
const sqs = mockClient(SQSClient);
const api = mockClient(ApiGatewayManagementApiClient);
const context = {} as Context;

let engine: Engine;
let close: () => Promise<void>;
let events: string;
let clock: ManualClock;
let creds: { secret_key: string; workspace_id: string; organization_id: string };
let key: Record<string, string>;
let gone: Set<string>;
let nextMessage = 0;

const call = (method: string, path: string, body?: unknown) => callApi(events, key, method, `/v1/workspaces/${creds.workspace_id}${path}`, body);
/** Each test's subscription takes its own event type, so another test's publishes never reach it. */
let type = 'order.paid';
let nextType = 0;
const subscribe = async (mode = 'websocket') => {
  type = `t${++nextType}.paid`;
  const delivery = mode === 'webhook' ? { mode, url: 'https://93.184.215.14/hooks' } : { mode };
  return (await ok(call('POST', '/subscriptions', { types: [type], delivery }), 201)).subscription_id as string;
};
const publish = async (n: number) =>
  (await ok(call('POST', '/events', { events: Array.from({ length: n }, (_, i) => ({ type, data: { i } })) }), 202)).accepted.map((a: { event_id: string }) => a.event_id) as string[];

/** The wakes sent to the streams queue since the last look. */
function takeWakes(): { subscription_id: string; delay?: number }[] {
  const wakes = sqs
    .commandCalls(SendMessageCommand)
    .map((c) => c.args[0].input)
    .filter((input) => input.QueueUrl === URLS.streams)
    .map((input) => ({ ...(JSON.parse(input.MessageBody!) as { subscription_id: string }), delay: input.DelaySeconds }));
  sqs.resetHistory();
  return wakes;
}

/** Runs the streams consumer over wakes, as the SQS event source would hand them over. */
async function consume(wakes: { subscription_id: string }[]) {
  const event = {
    Records: wakes.map((w) => ({ messageId: `m-${++nextMessage}`, body: JSON.stringify(w), receiptHandle: 'r', attributes: { ApproximateReceiveCount: '1' } })),
  } as unknown as SQSEvent;
  return streamsConsumer(event);
}

/** Frames posted since the last look, per connection. */
function takeFrames(): Map<string, Record<string, unknown>[]> {
  const frames = new Map<string, Record<string, unknown>[]>();
  for (const c of api.commandCalls(PostToConnectionCommand)) {
    const { ConnectionId, Data } = c.args[0].input;
    if (gone.has(ConnectionId!)) continue;
    frames.set(ConnectionId!, [...(frames.get(ConnectionId!) ?? []), JSON.parse(Buffer.from(Data as Uint8Array).toString())]);
  }
  api.resetHistory();
  return frames;
}

const streamPath = (subscriptionId: string, workspaceId = creds.workspace_id) => `/v1/workspaces/${workspaceId}/subscriptions/${subscriptionId}/stream`;

function connectEvent(connectionId: string, headers: Record<string, string>, query: Record<string, string> = {}): SocketEvent {
  return { requestContext: { routeKey: '$connect', connectionId, requestId: `req-${connectionId}` }, headers, queryStringParameters: query };
}

const connect = (connectionId: string, subscriptionId: string, extra: Record<string, string> = {}, query: Record<string, string> = {}) =>
  socket(connectEvent(connectionId, { Authorization: `Bearer ${creds.secret_key}`, 'Sec-WebSocket-Protocol': 'service.v1', 'x-stream-path': streamPath(subscriptionId), ...extra }, query), context);
const frame = (connectionId: string, body: string, isBase64Encoded = false) => socket({ requestContext: { routeKey: '$default', connectionId }, body, isBase64Encoded }, context);
const disconnect = (connectionId: string) => socket({ requestContext: { routeKey: '$disconnect', connectionId } }, context);

beforeAll(async () => {
  clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
  const started = await startAwsDataEngine('events-stream-aws', { clock, queue: new SqsQueue(new SQSClient({ region: 'us-east-1' }), URLS) });
  engine = started.engine;
  const connectionTable = 'connections-test';
  await started.dynamo.client.send(
    new CreateTableCommand({
      TableName: connectionTable,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: CONNECTION_TABLE_SCHEMA.partitionKey, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: CONNECTION_TABLE_SCHEMA.partitionKey, KeyType: 'HASH' }],
    }),
  );
  const documents = DynamoDBDocumentClient.from(new DynamoDBClient({ endpoint: started.dynamo.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } }));
  engine.connections = new ApiGatewayConnectionGateway(new ApiGatewayManagementApiClient({ region: 'us-east-1', endpoint: 'https://socket.example/v1' }), { documents, tableName: connectionTable, clock });
  const dataDir = mkdtempSync(join(tmpdir(), 'events-stream-aws-'));
  ({ credentials: creds } = await bootstrap(engine, dataDir));
  key = bearer(creds.secret_key);
  const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
  registerApiOrigins(platform.urls);
  events = platform.urls.events;
  close = async () => {
    await platform.close();
    documents.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  };
});

beforeEach(() => {
  gone = new Set();
  sqs.reset();
  sqs.on(SendMessageCommand).resolves({ MessageId: 'm' });
  api.reset();
  api.on(PostToConnectionCommand).callsFake((input: { ConnectionId: string }) => {
    if (gone.has(input.ConnectionId)) throw new GoneException({ message: 'gone', $metadata: { httpStatusCode: 410 } });
    return {};
  });
  api.on(DeleteConnectionCommand).resolves({});
});

afterAll(async () => {
  await close?.();
  sqs.restore();
  api.restore();
});

describe('$connect runs the stream route through the whole chain', () => {
  it('accepts with the service.v1 subprotocol, remembers the connection and wakes the subscription a second later', async () => {
    const sub = await subscribe();
    takeWakes();
    const answer = await connect('c-accept', sub, {}, { lease_seconds: '20' });
    expect(answer).toEqual({ statusCode: 200, headers: { 'Sec-WebSocket-Protocol': 'service.v1' } });
    expect(await engine.connections.recall('c-accept')).toMatchObject({ workspace_id: creds.workspace_id, subscription_id: sub, lease_seconds: 20 });
    expect(takeWakes()).toEqual([{ subscription_id: sub, delay: CONNECT_WAKE_DELAY_SECONDS }]);
    await disconnect('c-accept');
  });

  it.each([
    ['no credential', { Authorization: '' }, 401, 'missing_credentials'],
    ['no service.v1 subprotocol', { 'Sec-WebSocket-Protocol': 'chat' }, 426, 'upgrade_required'],
    ['another workspace', { 'x-stream-path': '/v1/workspaces/ws_nope/subscriptions/sub_x/stream' }, 403, 'forbidden'],
  ])('refuses %s with the route status and code', async (_what, headers, status, code) => {
    const sub = await subscribe();
    const answer = await connect(`c-${code}`, sub, headers as Record<string, string>);
    expect(answer.statusCode).toBe(status);
    expect(JSON.parse(answer.body!).error.code).toBe(code);
    expect(await engine.connections.recall(`c-${code}`)).toBeUndefined();
  });

  it('refuses a webhook subscription (409 wrong_delivery_mode), a bad lease (400 invalid_limit) and a path that is no stream (404)', async () => {
    const hook = await subscribe('webhook');
    expect(JSON.parse((await connect('c-hook', hook)).body!).error.code).toBe('wrong_delivery_mode');
    const sub = await subscribe();
    const bad = await connect('c-lease', sub, {}, { lease_seconds: '3' });
    expect([bad.statusCode, JSON.parse(bad.body!).error.code]).toEqual([400, 'invalid_limit']);
    expect((await connect('c-path', sub, { 'x-stream-path': `/v1/workspaces/${creds.workspace_id}/events` })).statusCode).toBe(404);
    expect((await connect('c-nopath', sub, { 'x-stream-path': '' })).statusCode).toBe(404);
  });

  it(`answers 429 too_many_streams past ${STREAM_LIMITS.perSubscription} sockets of a subscription, and frees a slot on $disconnect`, async () => {
    const sub = await subscribe();
    for (let i = 0; i < STREAM_LIMITS.perSubscription; i++) expect((await connect(`c-lim-${i}`, sub)).statusCode).toBe(200);
    const over = await connect('c-lim-over', sub);
    expect([over.statusCode, JSON.parse(over.body!).error.code]).toEqual([429, 'too_many_streams']);
    expect(await disconnect('c-lim-0')).toEqual({ statusCode: 200 });
    expect(await engine.connections.recall('c-lim-0')).toBeUndefined();
    expect((await connect('c-lim-again', sub)).statusCode).toBe(200);
    for (const id of ['c-lim-1', 'c-lim-2', 'c-lim-3', 'c-lim-4', 'c-lim-again']) await disconnect(id);
  });

  it('takes a browser publishable key as the bearer.<key> subprotocol from a listed origin only', async () => {
    const tenants = new Tenants(engine.kv, () => clock.now());
    const app = await tenants.createApplication(creds.workspace_id, 'browser app', []);
    const pk = await new PublishableKeys(engine.kv, () => clock.now()).create(app.id, ['https://app.example.com']);
    const sub = await subscribe();
    const browser = (id: string, origin: string) =>
      connect(id, sub, { Authorization: undefined as unknown as string, 'Sec-WebSocket-Protocol': `service.v1, bearer.${pk.key}`, Origin: origin });
    expect(await browser('c-browser', 'https://app.example.com')).toEqual({ statusCode: 200, headers: { 'Sec-WebSocket-Protocol': 'service.v1' } });
    const refused = await browser('c-browser-evil', 'https://evil.example.com');
    expect(refused.statusCode).toBe(403);
    await disconnect('c-browser');
  });
});

describe('frames, acks and leases', () => {
  it('sends each published envelope once, oldest first; unacknowledged frames come again after their lease', async () => {
    const sub = await subscribe();
    expect((await connect('c-frames', sub, {}, { lease_seconds: '10' })).statusCode).toBe(200);
    takeWakes();
    const ids = await publish(3);
    const wakes = takeWakes();
    expect(wakes).toEqual([{ subscription_id: sub, delay: undefined }]);

    expect(await consume(wakes)).toEqual({ batchItemFailures: [] });
    const first = takeFrames().get('c-frames')!;
    expect(first.map((f) => [f.event_id, f.delivery_count, f.type])).toEqual(ids.map((id) => [id, 1, type]));
    // The end of the lease is a queued wake.
    const leaseWake = takeWakes();
    expect(leaseWake).toEqual([{ subscription_id: sub, delay: 11 }]);

    // The client acknowledges the first: the ack's own invocation sends nothing new (the rest are leased).
    expect(await frame('c-frames', JSON.stringify({ ack: [ids[0]] }))).toEqual({ statusCode: 200 });
    expect(takeFrames().size).toBe(0);
    const stats = await ok(call('GET', '/stats'));
    expect(stats.completed).toBeGreaterThanOrEqual(1);

    // Before the lease ends the wake finds nothing; after it, the two unacknowledged come again.
    await consume(leaseWake);
    expect(takeFrames().size).toBe(0);
    clock.advance(11_000);
    await consume(leaseWake);
    expect(takeFrames().get('c-frames')!.map((f) => [f.event_id, f.delivery_count])).toEqual([
      [ids[1], 2],
      [ids[2], 2],
    ]);
    await frame('c-frames', JSON.stringify({ ack: [ids[1], ids[2]] }));
    takeWakes();
    clock.advance(11_000);
    await consume([{ subscription_id: sub }]);
    expect(takeFrames().size).toBe(0);
    await disconnect('c-frames');
  });

  it('an ack frees room: the ack invocation itself sends the next frames', async () => {
    const sub = await subscribe();
    await connect('c-room', sub);
    const ids = await publish(100);
    await consume(takeWakes());
    expect(takeFrames().get('c-room')).toHaveLength(100);
    const more = await publish(2);
    expect(await frame('c-room', JSON.stringify({ ack: ids.slice(0, 50) }))).toEqual({ statusCode: 200 });
    expect(takeFrames().get('c-room')!.map((f) => f.event_id)).toEqual(more);
    await disconnect('c-room');
  });

  it.each([
    ['not JSON', 'ack please', false],
    ['an unknown field', JSON.stringify({ ack: [], nack: [] }), false],
    ['a bad id', JSON.stringify({ ack: ['evt_bad'] }), false],
    ['a frame over 49,152 bytes', JSON.stringify({ ack: ['x'.repeat(49_200)] }), false],
    ['a binary frame', Buffer.from('{}').toString('base64'), true],
  ])('closes the connection on %s, freeing its slot', async (_what, body, binary) => {
    const sub = await subscribe();
    const id = `c-bad-${Math.random().toString(36).slice(2)}`;
    await connect(id, sub);
    expect(await frame(id, body, binary)).toEqual({ statusCode: 200 });
    expect(api.commandCalls(DeleteConnectionCommand).map((c) => c.args[0].input.ConnectionId)).toContain(id);
    expect(await engine.connections.recall(id)).toBeUndefined();
    // Its slot is free again: five new sockets fit.
    for (let i = 0; i < STREAM_LIMITS.perSubscription; i++) expect((await connect(`${id}-${i}`, sub)).statusCode).toBe(200);
    for (let i = 0; i < STREAM_LIMITS.perSubscription; i++) await disconnect(`${id}-${i}`);
  });

  it('a socket found gone is forgotten; its frames go to another socket once their lease ends', async () => {
    const sub = await subscribe();
    await connect('c-gone', sub, {}, { lease_seconds: '5' });
    gone.add('c-gone');
    const ids = await publish(2);
    await consume(takeWakes());
    expect(await engine.connections.recall('c-gone')).toBeUndefined();
    await connect('c-next', sub, {}, { lease_seconds: '5' });
    takeWakes();
    clock.advance(6_000);
    await consume([{ subscription_id: sub }]);
    expect(takeFrames().get('c-next')!.map((f) => [f.event_id, f.delivery_count])).toEqual([
      [ids[0], 2],
      [ids[1], 2],
    ]);
    await disconnect('c-next');
  });

  it('a frame from a connection the table does not know closes it', async () => {
    expect(await frame('c-unknown', JSON.stringify({ ack: [] }))).toEqual({ statusCode: 200 });
    expect(api.commandCalls(DeleteConnectionCommand).map((c) => c.args[0].input.ConnectionId)).toEqual(['c-unknown']);
  });

  it('returns a failed wake to the queue (partial batch response) and drops a malformed one', async () => {
    const sub = await subscribe();
    await connect('c-fail', sub);
    await publish(1);
    takeWakes();
    api.on(PostToConnectionCommand).rejects(Object.assign(new Error('throttled'), { name: 'LimitExceededException', $metadata: { httpStatusCode: 429 } }));
    const event = {
      Records: [
        { messageId: 'bad', body: 'not json', receiptHandle: 'r', attributes: { ApproximateReceiveCount: '1' } },
        { messageId: 'wake', body: JSON.stringify({ subscription_id: sub }), receiptHandle: 'r', attributes: { ApproximateReceiveCount: '1' } },
      ],
    } as unknown as SQSEvent;
    expect(await streamsConsumer(event)).toEqual({ batchItemFailures: [{ itemIdentifier: 'wake' }] });
    await disconnect('c-fail');
  });
});

it('a publish into a pull subscription with no stream open queues a wake that finds no socket and sends nothing', async () => {
  const sub = await subscribe('pull');
  takeWakes();
  await publish(1);
  const wakes = takeWakes();
  expect(wakes).toEqual([{ subscription_id: sub, delay: undefined }]);
  expect(await consume(wakes)).toEqual({ batchItemFailures: [] });
  expect(api.commandCalls(PostToConnectionCommand)).toHaveLength(0);
  // The message still waits for a pull.
  expect((await ok(call('POST', `/subscriptions/${sub}/pull`, {}))).messages).toHaveLength(1);
});

// ---------- a revoked credential (docs/events/stream.md "Credential changes") and acks of a stream's own leases ----------
// API Gateway holds the socket, so the check runs when the streams consumer is about to post frames and
// when a client frame comes in; a connection whose credential no longer holds is deleted
// (DeleteConnection) and gets no frame. The engine's manual clock ends the credential cache.

/** Past every credential cache entry made so far (the cache runs on the engine's clock). */
const pastCredentialCache = () => clock.advance(settings().credentialCacheMs + 1);
const deleted = () => api.commandCalls(DeleteConnectionCommand).map((c) => c.args[0].input.ConnectionId);

describe('a stream whose credential is revoked, in AWS', () => {
  it('the streams consumer deletes the connection of a disabled secret key and posts it no frame', async () => {
    const tenants = new Tenants(engine.kv, () => clock.now());
    const streamKey = await tenants.createSecretKey(creds.organization_id, undefined);
    const sub = await subscribe();
    // Leases longer than the clock moves here: nothing comes again on its own.
    expect((await connect('c-key', sub, { Authorization: `Bearer ${streamKey.key}` }, { lease_seconds: '300' })).statusCode).toBe(200);
    // A second socket on the bootstrap key, still valid: it keeps its frames.
    expect((await connect('c-ok', sub, {}, { lease_seconds: '300' })).statusCode).toBe(200);
    takeWakes();
    const [first] = await publish(1);
    await consume(takeWakes());
    const before = takeFrames();
    expect([...before.values()].flat().map((f) => f.event_id)).toEqual([first]);

    await tenants.setSecretKeyDisabled(streamKey.id, true);
    pastCredentialCache();
    const ids = await publish(3);
    for (let i = 0; i < 2; i++) await consume([{ subscription_id: sub }]);
    expect(deleted()).toEqual(['c-key']);
    const frames = takeFrames();
    expect(frames.get('c-key')).toBeUndefined();
    expect(frames.get('c-ok')!.map((f) => f.event_id)).toEqual(ids);
    expect(await engine.connections.recall('c-key')).toBeUndefined();
    expect(await openStreamSlots(engine, sub)).toEqual(['c-ok']);
    await disconnect('c-ok');
  });

  it('a client frame on the connection of a disabled publishable key deletes it without acknowledging', async () => {
    const tenants = new Tenants(engine.kv, () => clock.now());
    const app = await tenants.createApplication(creds.workspace_id, 'revoked browser app', []);
    const keys = new PublishableKeys(engine.kv, () => clock.now());
    const pk = await keys.create(app.id, ['https://app.example.com']);
    const sub = await subscribe();
    const answer = await connect('c-pk', sub, { Authorization: undefined as unknown as string, 'Sec-WebSocket-Protocol': `service.v1, bearer.${pk.key}`, Origin: 'https://app.example.com' });
    expect(answer.statusCode).toBe(200);
    // The credential waits in the connection table sealed, never in the clear.
    expect(JSON.stringify(await engine.connections.recall('c-pk'))).not.toContain(pk.key);
    takeWakes();
    const [id] = await publish(1);
    await consume(takeWakes());
    expect(takeFrames().get('c-pk')!.map((f) => f.event_id)).toEqual([id]);

    await keys.disable(pk.id);
    pastCredentialCache();
    expect(await frame('c-pk', JSON.stringify({ ack: [id] }))).toEqual({ statusCode: 200 });
    expect(deleted()).toEqual(['c-pk']);
    expect(takeFrames().size).toBe(0);
    expect(await engine.connections.recall('c-pk')).toBeUndefined();
    // Not acknowledged: its lease has ended (the clock moved 30 s), a pull gets it again.
    const pulled = await ok(call('POST', `/subscriptions/${sub}/pull`, { max: 10 }));
    expect(pulled.messages.map((m: { event_id: string; delivery_count: number }) => [m.event_id, m.delivery_count])).toEqual([[id, 2]]);
  });

  it('the consumer deletes the connections of a disabled organization', async () => {
    const tenants = new Tenants(engine.kv, () => clock.now());
    const org = await tenants.createOrganization('revoked org');
    const ws = await tenants.createWorkspace(org.id, 'w');
    const orgKey = await tenants.createSecretKey(org.id, undefined);
    const sub = (await ok(callApi(events, bearer(orgKey.key), 'POST', `/v1/workspaces/${ws.id}/subscriptions`, { types: ['ro.paid'], delivery: { mode: 'websocket' } }), 201)).subscription_id;
    const path = `/v1/workspaces/${ws.id}/subscriptions/${sub}/stream`;
    expect((await connect('c-org', sub, { Authorization: `Bearer ${orgKey.key}`, 'x-stream-path': path })).statusCode).toBe(200);
    await ok(callApi(events, bearer(orgKey.key), 'POST', `/v1/workspaces/${ws.id}/events`, { event: { type: 'ro.paid', data: {} } }), 202);

    await tenants.setOrganizationDisabled(org.id, true);
    pastCredentialCache();
    await consume([{ subscription_id: sub }]);
    expect(deleted()).toEqual(['c-org']);
    expect(takeFrames().size).toBe(0);
    expect(await engine.connections.recall('c-org')).toBeUndefined();
  });
});

describe('acks of a stream in AWS', () => {
  it("a connection's late ack does not remove a message another consumer leased after its lease ended; the holder's ack does", async () => {
    const sub = await subscribe();
    expect((await connect('c-late', sub, {}, { lease_seconds: '5' })).statusCode).toBe(200);
    takeWakes();
    const [id] = await publish(1);
    await consume(takeWakes());
    expect(takeFrames().get('c-late')!.map((f) => f.event_id)).toEqual([id]);
    // The stream's lease ends; a puller on the same subscription leases the message.
    clock.advance(6000);
    const pulled = (await ok(call('POST', `/subscriptions/${sub}/pull`, { max: 10, lease_seconds: 300 }), 200)).messages;
    expect(pulled.map((m: { event_id: string }) => m.event_id)).toEqual([id]);
    // The stream's client acks its frame late: nothing of the puller's lease is removed.
    expect(await frame('c-late', JSON.stringify({ ack: [id] }))).toEqual({ statusCode: 200 });
    const acked = await ok(call('POST', `/subscriptions/${sub}/ack`, { ids: [pulled[0].lease_id] }), 200);
    expect(acked).toEqual({ acked: 1, not_acked: [] });
    await disconnect('c-late');
  });
});
