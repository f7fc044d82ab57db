import { sqliteKvFixture } from '../helpers/kv-fixtures.js';
import { countersContract } from './counters-contract.js';

countersContract('embedded (SQLite on disk)', async () => sqliteKvFixture('counters-'));
