/**
 * An open stream in AWS whose credential is revoked (docs/events/stream.md "Credential changes"):
 * API Gateway holds the socket, so the check runs when the streams consumer is about to post frames
 * and when a client frame comes in; a connection whose credential no longer holds is deleted
 * (DeleteConnection) and gets no frame. Same setup as events-stream.aws.test.ts: DynamoDB on
 * dynalite, SQS and the API Gateway Management API mocked with aws-sdk-client-mock; the engine's
 * manual clock ends the credential cache (CREDENTIAL_CACHE_MS) without waiting.
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
import { openStreamSlots } from '../../lambdas/events/stream.js';
import { settings } from '../../lambdas/shared/settings.js';
import { handler as socket, type SocketEvent } from '../../lambdas/http/handlers/events/stream-socket.js';
import { handler as streamsConsumer } from '../../lambdas/consumers/streams.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { bearer } from '../helpers/platform.js';
import { callApi, ok } from '../helpers/data-api.js';

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
  const started = await startAwsDataEngine('events-stream-revoke-aws', { clock, queue: new SqsQueue(new SQSClient({ region: 'us-east-1' }), URLS) });
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
  const dataDir = mkdtempSync(join(tmpdir(), 'events-stream-revoke-aws-'));
  ({ credentials: creds } = await bootstrap(engine, dataDir));
  key = bearer(creds.secret_key);
  const platform = await startPlatform({ engine, ports: { ai: 0, data: 0, events: 0 } });
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

describe('acks of a stream in AWS (issue 20, defect 4)', () => {
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
