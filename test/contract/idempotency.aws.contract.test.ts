import { dynaliteKvFixtures } from '../helpers/kv-fixtures.js';
import { idempotencyContract } from './idempotency-contract.js';

// One dynalite for the file: the contract gives every test its own tenant (so its own partitions).
const dynalite = dynaliteKvFixtures();

// dynalite has no TransactWriteItems (kv.aws-transactions.test.ts covers the adapter's with a client mock).
idempotencyContract('aws (DynamoDB on dynalite)', () => dynalite.fixture(), { transactions: false });
