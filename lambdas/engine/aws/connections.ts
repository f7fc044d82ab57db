/**
 * WebSocket connection gateway on the API Gateway Management API (the client targets the stage's
 * https endpoint), with the connection table in DynamoDB: API Gateway holds the sockets, and each
 * $default and $disconnect invocation knows only the connection id, so what a connection serves is
 * kept there (partition key `connection_id`, TTL `expires_at`).
 */
import { DeleteConnectionCommand, PostToConnectionCommand, type ApiGatewayManagementApiClient } from '@aws-sdk/client-apigatewaymanagementapi';
import { DeleteCommand, GetCommand, PutCommand, type DynamoDBDocumentClient } from '@aws-sdk/lib-dynamodb';
import type { Clock, ConnectionGateway, ConnectionRecord } from '../ports.js';
import { callAws, isGone } from './errors.js';
import { CONNECTION_TABLE_SCHEMA } from './table.js';

const PK = CONNECTION_TABLE_SCHEMA.partitionKey;
const TTL = CONNECTION_TABLE_SCHEMA.ttlAttribute;

export class ApiGatewayConnectionGateway implements ConnectionGateway {
  readonly holdsSockets = false;
  private readonly encoder = new TextEncoder();

  constructor(
    private readonly client: ApiGatewayManagementApiClient,
    private readonly table?: { documents: DynamoDBDocumentClient; tableName: string; clock: Clock },
  ) {}

  /** False when the connection is gone (GoneException). */
  async post(connectionId: string, data: string): Promise<boolean> {
    try {
      await callAws('API Gateway PostToConnection', () =>
        this.client.send(new PostToConnectionCommand({ ConnectionId: connectionId, Data: this.encoder.encode(data) })),
      );
      return true;
    } catch (error) {
      if (isGone(error)) return false;
      throw error;
    }
  }

  /** A connection already gone is not an error. */
  async disconnect(connectionId: string): Promise<void> {
    try {
      await callAws('API Gateway DeleteConnection', () => this.client.send(new DeleteConnectionCommand({ ConnectionId: connectionId })));
    } catch (error) {
      if (isGone(error)) return;
      throw error;
    }
  }

  async remember(connectionId: string, record: ConnectionRecord, ttlSeconds: number): Promise<void> {
    const { documents, tableName, clock } = this.connectionTable();
    const item = { ...record, [PK]: connectionId, [TTL]: Math.floor(clock.now() / 1000) + ttlSeconds };
    await callAws('DynamoDB PutItem', () => documents.send(new PutCommand({ TableName: tableName, Item: item })));
  }

  /** TTL deletes lag (up to days): an expired record is treated as gone, as the KV store treats items. */
  async recall(connectionId: string): Promise<ConnectionRecord | undefined> {
    const { documents, tableName, clock } = this.connectionTable();
    const { Item } = await callAws('DynamoDB GetItem', () =>
      documents.send(new GetCommand({ TableName: tableName, Key: { [PK]: connectionId }, ConsistentRead: true })),
    );
    if (!Item || !(Number(Item[TTL]) > clock.now() / 1000)) return undefined;
    const { [PK]: _id, [TTL]: _ttl, ...record } = Item;
    return record as ConnectionRecord;
  }

  async forget(connectionId: string): Promise<void> {
    const { documents, tableName } = this.connectionTable();
    await callAws('DynamoDB DeleteItem', () => documents.send(new DeleteCommand({ TableName: tableName, Key: { [PK]: connectionId } })));
  }

  private connectionTable() {
    if (!this.table) throw new Error('the connection table is not configured (CONNECTIONS_TABLE)');
    return this.table;
  }
}
