/**
 * Connection gateways: the embedded one against a real `ws` server and client on loopback, the API
 * Gateway one against a mocked ApiGatewayManagementApiClient.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { WebSocket, WebSocketServer } from 'ws';
import { mockClient } from 'aws-sdk-client-mock';
import {
  ApiGatewayManagementApiClient,
  ApiGatewayManagementApiServiceException,
  DeleteConnectionCommand,
  ForbiddenException,
  GoneException,
  LimitExceededException,
  PostToConnectionCommand,
} from '@aws-sdk/client-apigatewaymanagementapi';
import { LocalConnectionGateway } from '../../lambdas/engine/embedded/connections.js';
import { ApiGatewayConnectionGateway } from '../../lambdas/engine/aws/connections.js';
import { EngineUnavailableError } from '../../lambdas/engine/errors.js';
import { CreateTableCommand } from '@aws-sdk/client-dynamodb';
import { DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { CONNECTION_TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import type { ConnectionGateway } from '../../lambdas/engine/ports.js';
import { startDynalite } from '../helpers/dynalite.js';

describe('LocalConnectionGateway (real ws server and client)', () => {
  let server: WebSocketServer;
  let gateway: LocalConnectionGateway;
  let next = 0;
  const clients: WebSocket[] = [];

  beforeEach(async () => {
    gateway = new LocalConnectionGateway();
    server = new WebSocketServer({ host: '127.0.0.1', port: 0 });
    server.on('connection', (socket) => {
      const id = `conn-${++next}`;
      gateway.register(id, socket);
      socket.on('close', () => gateway.unregister(id));
      socket.send(JSON.stringify({ connectionId: id }));
    });
    await once(server, 'listening');
  });

  afterEach(async () => {
    for (const c of clients.splice(0)) c.terminate();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  /** Connects a client; resolves with its connection id and the frames it receives afterwards. */
  async function connect() {
    const { port } = server.address() as AddressInfo;
    const client = new WebSocket(`ws://127.0.0.1:${port}`);
    clients.push(client);
    const frames: string[] = [];
    const hello = new Promise<string>((resolve) => {
      client.once('message', (data) => {
        resolve((JSON.parse(data.toString()) as { connectionId: string }).connectionId);
        client.on('message', (d) => frames.push(d.toString()));
      });
    });
    return { client, frames, connectionId: await hello };
  }

  it('delivers posted frames in order to the right client', async () => {
    const a = await connect();
    const b = await connect();
    expect(await gateway.post(a.connectionId, 'one')).toBe(true);
    expect(await gateway.post(a.connectionId, JSON.stringify({ two: 2 }))).toBe(true);
    expect(await gateway.post(b.connectionId, 'for b')).toBe(true);
    await vi.waitFor(() => expect(a.frames).toEqual(['one', '{"two":2}']));
    await vi.waitFor(() => expect(b.frames).toEqual(['for b']));
  });

  it('answers false for an unknown connection and after the client closes', async () => {
    expect(await gateway.post('nobody', 'x')).toBe(false);
    const a = await connect();
    a.client.close();
    await once(a.client, 'close');
    await vi.waitFor(async () => expect(await gateway.post(a.connectionId, 'late')).toBe(false));
  });

  it('answers false for a socket that is closing even before the server unregisters it', async () => {
    const gw = new LocalConnectionGateway();
    const send = vi.fn();
    gw.register('c', { send, close: vi.fn(), readyState: WebSocket.CLOSING });
    expect(await gw.post('c', 'x')).toBe(false);
    expect(send).not.toHaveBeenCalled();
  });

  it('disconnect closes the client connection', async () => {
    const a = await connect();
    const closed = once(a.client, 'close');
    await gateway.disconnect(a.connectionId);
    await closed;
    expect(await gateway.post(a.connectionId, 'x')).toBe(false);
    await gateway.disconnect(a.connectionId); // unknown now: not an error
  });
});

describe('ApiGatewayConnectionGateway (client mock)', () => {
  const api = mockClient(ApiGatewayManagementApiClient);
  let gateway: ApiGatewayConnectionGateway;
  beforeEach(() => {
    api.reset();
    gateway = new ApiGatewayConnectionGateway(
      new ApiGatewayManagementApiClient({
        region: 'us-east-1',
        endpoint: 'https://abc123.execute-api.us-east-1.amazonaws.com/prod',
        credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
      }),
    );
  });
  afterEach(() => api.reset());

  it('posts the frame as UTF-8 bytes to the connection', async () => {
    api.on(PostToConnectionCommand).resolves({});
    expect(await gateway.post('c-1', 'héllo')).toBe(true);
    const calls = api.commandCalls(PostToConnectionCommand);
    expect(calls).toHaveLength(1);
    const input = calls[0].args[0].input;
    expect(input.ConnectionId).toBe('c-1');
    expect(Buffer.from(input.Data as Uint8Array).toString('utf8')).toBe('héllo');
  });

  it('answers false when the connection is gone', async () => {
    api.on(PostToConnectionCommand).rejects(new GoneException({ message: 'gone', $metadata: { httpStatusCode: 410 } }));
    expect(await gateway.post('c-1', 'x')).toBe(false);
  });

  it('deletes the connection on disconnect, ignoring one already gone', async () => {
    api.on(DeleteConnectionCommand).resolvesOnce({}).rejects(new GoneException({ message: 'gone', $metadata: { httpStatusCode: 410 } }));
    await gateway.disconnect('c-1');
    await gateway.disconnect('c-1');
    expect(api.commandCalls(DeleteConnectionCommand).map((c) => c.args[0].input)).toEqual([{ ConnectionId: 'c-1' }, { ConnectionId: 'c-1' }]);
  });

  it('maps throttling, 5xx and network failures to EngineUnavailableError and leaves other errors alone', async () => {
    for (const error of [
      new LimitExceededException({ message: 'slow down', $metadata: { httpStatusCode: 429 } }),
      new ApiGatewayManagementApiServiceException({
        name: 'InternalServerErrorException',
        $fault: 'server',
        message: 'oops',
        $metadata: { httpStatusCode: 500 },
      }),
      Object.assign(new Error('getaddrinfo EAI_AGAIN'), { code: 'EAI_AGAIN' }),
    ]) {
      api.reset();
      api.onAnyCommand().rejects(error);
      await expect(gateway.post('c-1', 'x')).rejects.toBeInstanceOf(EngineUnavailableError);
      await expect(gateway.disconnect('c-1')).rejects.toBeInstanceOf(EngineUnavailableError);
    }
    api.reset();
    const forbidden = new ForbiddenException({ message: 'forbidden', $metadata: { httpStatusCode: 403 } });
    api.onAnyCommand().rejects(forbidden);
    await expect(gateway.post('c-1', 'x')).rejects.toBe(forbidden);
    await expect(gateway.disconnect('c-1')).rejects.toBe(forbidden);
  });
});

/** Connection records (remember, recall, forget): the same contract on both gateways, expiry by the engine's clock. */
function connectionRecordContract(name: string, make: (clock: ManualClock) => Promise<{ gateway: ConnectionGateway; close(): Promise<void> }>) {
  describe(`connection records: ${name}`, () => {
    let clock: ManualClock;
    let target: { gateway: ConnectionGateway; close(): Promise<void> };
    beforeEach(async () => {
      clock = new ManualClock(Date.UTC(2026, 10, 26, 12));
      target = await make(clock);
    });
    afterEach(async () => target.close());

    it('recalls what was remembered, strings and numbers, until forgotten', async () => {
      const { gateway } = target;
      expect(await gateway.recall('c-1')).toBeUndefined();
      await gateway.remember('c-1', { subscription_id: 'sub_1', lease_seconds: 30 }, 60);
      await gateway.remember('c-2', { subscription_id: 'sub_2', lease_seconds: 5 }, 60);
      expect(await gateway.recall('c-1')).toEqual({ subscription_id: 'sub_1', lease_seconds: 30 });
      await gateway.forget('c-1');
      await gateway.forget('c-1');
      expect(await gateway.recall('c-1')).toBeUndefined();
      expect(await gateway.recall('c-2')).toEqual({ subscription_id: 'sub_2', lease_seconds: 5 });
    });

    it('treats a record past its time to live as gone, before any TTL sweep', async () => {
      await target.gateway.remember('c-ttl', { subscription_id: 'sub_1' }, 60);
      clock.advance(59_000);
      expect(await target.gateway.recall('c-ttl')).toEqual({ subscription_id: 'sub_1' });
      clock.advance(1_000);
      expect(await target.gateway.recall('c-ttl')).toBeUndefined();
    });
  });
}

connectionRecordContract('LocalConnectionGateway (memory)', async (clock) => ({ gateway: new LocalConnectionGateway(clock), close: async () => {} }));

connectionRecordContract('ApiGatewayConnectionGateway (connection table on dynalite)', async (clock) => {
  const dynamo = await startDynalite();
  await dynamo.client.send(
    new CreateTableCommand({
      TableName: 'connections',
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [{ AttributeName: CONNECTION_TABLE_SCHEMA.partitionKey, AttributeType: 'S' }],
      KeySchema: [{ AttributeName: CONNECTION_TABLE_SCHEMA.partitionKey, KeyType: 'HASH' }],
    }),
  );
  const documents = DynamoDBDocumentClient.from(dynamo.client);
  const client = new ApiGatewayManagementApiClient({ region: 'us-east-1', endpoint: 'https://abc123.execute-api.us-east-1.amazonaws.com/v1', credentials: { accessKeyId: 'x', secretAccessKey: 'y' } });
  return { gateway: new ApiGatewayConnectionGateway(client, { documents, tableName: 'connections', clock }), close: () => dynamo.close() };
});
