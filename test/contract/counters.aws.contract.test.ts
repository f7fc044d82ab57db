import { afterAll } from 'vitest';
import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { startDynalite, type DynaliteTable } from '../helpers/dynalite.js';
import { countersContract } from './counters-contract.js';

// One dynalite for the file: the contract gives every test its own names, so they share the table.
let shared: Promise<DynaliteTable> | undefined;
afterAll(async () => (await shared)?.close());

countersContract('aws (DynamoDB on dynalite)', async () => {
  const db = await (shared ??= startDynalite());
  const clock = new ManualClock();
  const clients: DynamoDBClient[] = [];
  return {
    kv: new DynamoKeyValueStore(db.client, db.tableName, clock),
    clock,
    // Its own client (own connections), as another Lambda instance has.
    another: () => {
      const client = new DynamoDBClient({
        endpoint: db.endpoint,
        region: 'us-east-1',
        credentials: { accessKeyId: 'test', secretAccessKey: 'test' },
      });
      clients.push(client);
      return new DynamoKeyValueStore(client, db.tableName, clock);
    },
    cleanup: async () => {
      for (const client of clients) client.destroy();
    },
  };
});
