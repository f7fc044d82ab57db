/** An in-process dynalite holding the platform table (TABLE_SCHEMA), for tests of the AWS adapter. */
import type { AddressInfo } from 'node:net';
import dynalite from 'dynalite';
import { CreateTableCommand, DescribeTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';

export interface DynaliteTable {
  endpoint: string;
  client: DynamoDBClient;
  tableName: string;
  close(): Promise<void>;
}

export async function startDynalite(tableName = 'platform-test'): Promise<DynaliteTable> {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const client = new DynamoDBClient({
    endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
  });

  const string = (name: string) => ({ AttributeName: name, AttributeType: 'S' as const });
  const indexes = Object.entries(TABLE_SCHEMA.indexes);
  await client.send(
    new CreateTableCommand({
      TableName: tableName,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: [
        string(TABLE_SCHEMA.partitionKey),
        string(TABLE_SCHEMA.sortKey),
        ...indexes.flatMap(([, keys]) => [string(keys.partitionKey), string(keys.sortKey)]),
      ],
      KeySchema: [
        { AttributeName: TABLE_SCHEMA.partitionKey, KeyType: 'HASH' },
        { AttributeName: TABLE_SCHEMA.sortKey, KeyType: 'RANGE' },
      ],
      GlobalSecondaryIndexes: indexes.map(([IndexName, keys]) => ({
        IndexName,
        KeySchema: [
          { AttributeName: keys.partitionKey, KeyType: 'HASH' as const },
          { AttributeName: keys.sortKey, KeyType: 'RANGE' as const },
        ],
        Projection: { ProjectionType: 'ALL' as const },
      })),
    }),
  );
  // Even with createTableMs 0 the table turns ACTIVE on a later tick.
  while ((await client.send(new DescribeTableCommand({ TableName: tableName }))).Table?.TableStatus !== 'ACTIVE') {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }

  return {
    endpoint,
    client,
    tableName,
    async close() {
      client.destroy(); // drops keep-alive sockets, which would otherwise hold the server open
      await new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
    },
  };
}
