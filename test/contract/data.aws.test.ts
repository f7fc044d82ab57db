/**
 * The Data service contract on the AWS engine's adapters: DynamoDB on dynalite (TransactWriteItems
 * emulated, see test/helpers/dynalite-transactions.ts) and S3 on s3rver. The queue, connection gateway
 * and signer are not used by these routes; they come from an embedded engine in a temp dir.
 */
import { afterAll, expect, it } from 'vitest';
import type { TransactionEmulation } from '../helpers/dynalite-transactions.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { dataServiceContract } from './data-service-contract.js';

let emulation: TransactionEmulation | undefined;

dataServiceContract('aws (DynamoDB on dynalite, S3 on s3rver)', async () => {
  const started = await startAwsDataEngine('data-contract-aws');
  emulation = started.emulation;
  return started.engine;
});

// Runs after the contract (tests in a file run in order): the writes above really went through the emulation.
it('ran every write as a TransactWriteItems through the dynalite emulation', () => {
  expect(emulation!.stats.executed).toBeGreaterThan(20);
  expect(emulation!.stats.canceled).toBeGreaterThan(3);
});
afterAll(() => emulation?.restore());
