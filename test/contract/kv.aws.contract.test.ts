import { afterAll } from 'vitest';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { startDynalite, type DynaliteTable } from '../helpers/dynalite.js';
import { kvContract } from './kv-contract.js';

// One dynalite for the file: the contract gives every test its own partition, so they share the table.
let shared: Promise<DynaliteTable> | undefined;
afterAll(async () => (await shared)?.close());

kvContract(
  'aws (DynamoDB on dynalite)',
  async () => {
    const db = await (shared ??= startDynalite());
    const clock = new ManualClock();
    return { kv: new DynamoKeyValueStore(db.client, db.tableName, clock), clock, cleanup: async () => {} };
  },
  { transactions: false },
);
