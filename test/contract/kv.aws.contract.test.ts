import { afterAll, describe, expect, it } from 'vitest';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { ConditionFailedError } from '../../lambdas/engine/errors.js';
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

// Not yet in the contract (SQLite does this by construction): DynamoDB keeps an expired item until TTL
// deletes it, and an update must not resurrect its attributes.
describe('aws (DynamoDB on dynalite): expiry and updates', () => {
  it('updates an expired item as if it were absent', async () => {
    const db = await (shared ??= startDynalite());
    const clock = new ManualClock();
    const kv = new DynamoKeyValueStore(db.client, db.tableName, clock);
    const key = { pk: `exp${Date.now()}`, sk: 'window' };
    await kv.update({ key, add: { n: 5 }, set: { expires_at: Math.floor(clock.now() / 1000) + 10 } });
    clock.advance(11_000);
    expect(await kv.update({ key, add: { n: 1 } })).toEqual({ ...key, n: 1 });
    await expect(kv.update({ key, set: { x: 1 }, condition: { ifEquals: { n: 5 } } })).rejects.toBeInstanceOf(ConditionFailedError);
    expect(await kv.get(key)).toEqual({ ...key, n: 1 });
  });
});
