import { afterAll } from 'vitest';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { startDynalite, type DynaliteTable } from '../helpers/dynalite.js';
import { idempotencyContract } from './idempotency-contract.js';

// One dynalite for the file: the contract gives every test its own tenant (so its own partitions),
// so they share the table.
let shared: Promise<DynaliteTable> | undefined;
afterAll(async () => (await shared)?.close());

idempotencyContract(
  'aws (DynamoDB on dynalite)',
  async () => {
    const db = await (shared ??= startDynalite());
    const clock = new ManualClock();
    return { kv: new DynamoKeyValueStore(db.client, db.tableName, clock), clock, cleanup: async () => {} };
  },
  // dynalite has no TransactWriteItems (kv.aws-transactions.test.ts covers the adapter's with a client mock).
  { transactions: false },
);
