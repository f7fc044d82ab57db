import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { dynaliteKvFixtures } from '../helpers/kv-fixtures.js';
import { countersContract } from './counters-contract.js';

// One dynalite for the file: the contract gives every test its own names, so they share the table.
const dynalite = dynaliteKvFixtures();

countersContract('aws (DynamoDB on dynalite)', async () => {
  const { kv, clock, table } = await dynalite.fixture();
  const clients: DynamoDBClient[] = [];
  return {
    kv,
    clock,
    // Its own client (own connections), as another Lambda instance has.
    another: () => {
      const client = new DynamoDBClient({ endpoint: table.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
      clients.push(client);
      return new DynamoKeyValueStore(client, table.tableName, clock);
    },
    cleanup: async () => {
      for (const client of clients) client.destroy();
    },
  };
});
