import { describe, expect, it } from 'vitest';
import { ConditionFailedError } from '../../lambdas/engine/errors.js';
import { dynaliteKvFixtures } from '../helpers/kv-fixtures.js';
import { kvContract } from './kv-contract.js';

// One dynalite for the file: the contract gives every test its own partition, so they share the table.
const dynalite = dynaliteKvFixtures();

kvContract('aws (DynamoDB on dynalite)', () => dynalite.fixture(), { transactions: false });

// Not yet in the contract (SQLite does this by construction): DynamoDB keeps an expired item until TTL
// deletes it, and an update must not resurrect its attributes.
describe('aws (DynamoDB on dynalite): expiry and updates', () => {
  it('updates an expired item as if it were absent', async () => {
    const { kv, clock } = await dynalite.fixture();
    const key = { pk: `exp${Date.now()}`, sk: 'window' };
    await kv.update({ key, add: { n: 5 }, set: { expires_at: Math.floor(clock.now() / 1000) + 10 } });
    clock.advance(11_000);
    expect(await kv.update({ key, add: { n: 1 } })).toEqual({ ...key, n: 1 });
    await expect(kv.update({ key, set: { x: 1 }, condition: { ifEquals: { n: 5 } } })).rejects.toBeInstanceOf(ConditionFailedError);
    expect(await kv.get(key)).toEqual({ ...key, n: 1 });
  });
});
