/**
 * The records model (records-model.ts) through the local server on the AWS engine's adapters:
 * DynamoDB on dynalite (TransactWriteItems emulated, test/helpers/dynalite-transactions.ts) and S3 on
 * s3rver, as test/contract/data.aws.test.ts runs the data contract. Slower per request than SQLite, so
 * fewer and shorter runs. Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import { createRequire } from 'node:module';
import { afterAll, beforeAll, expect, it } from 'vitest';
import type { Engine } from '../../lambdas/engine/ports.js';
import { Tenants } from '../../lambdas/auth/tenants.js';
import { startPlatform, type RunningPlatform } from '../../lambdas/local/platform.js';
import type { TransactionEmulation } from '../helpers/dynalite-transactions.js';
import { startAwsDataEngine } from '../helpers/aws-data-engine.js';
import { checkRecordsModel, httpCaller } from './records-model.js';
import { registerApiOrigins } from '../helpers/platform-origins.js';

/**
 * dynalite checks a query's ExclusiveStartKey against its sort-key condition with JavaScript's `<`
 * (UTF-16 code units), while it reads items, as DynamoDB does, in UTF-8 byte order. A start key like
 * "\uFFFF…" under `sk <= "😀…"` is inside the range by bytes (DynamoDB) but not by UTF-16, so dynalite
 * refuses the second page's cursor ("The provided starting key does not match the range key predicate").
 * An emulator quirk, not the platform's: while this file runs, string key comparisons in that check
 * compare UTF-8 bytes (each string mapped to its bytes as latin1, whose `<` is byte order).
 */
function compareStartKeysByBytes(): () => void {
  const db = createRequire(import.meta.url)('dynalite/db/index.js') as { compare: (comp: string, val: unknown, compVals: unknown) => boolean };
  const original = db.compare;
  const bytes = (v: any) => (v && typeof v.S === 'string' ? { S: Buffer.from(v.S, 'utf8').toString('latin1') } : v);
  db.compare = (comp, val, compVals) => original(comp, bytes(val), Array.isArray(compVals) ? compVals.map(bytes) : bytes(compVals));
  return () => {
    db.compare = original;
  };
}
const restoreCompare = compareStartKeysByBytes();

let platform: RunningPlatform | undefined;
let engine: Engine | undefined;
let emulation: TransactionEmulation | undefined;
let key: string;

beforeAll(async () => {
  const started = await startAwsDataEngine('records-model-aws');
  emulation = started.emulation;
  const aws = started.engine;
  engine = aws;
  const tenants = new Tenants(aws.kv, () => aws.clock.now());
  const org = (await tenants.createOrganization('Model')).id;
  await tenants.createWorkspace(org, 'default');
  key = (await tenants.createSecretKey(org)).key;
  platform = await startPlatform({ engine: aws, ports: { ai: 0, data: 0, events: 0 } });
  registerApiOrigins(platform.urls);
});
afterAll(async () => {
  if (platform) await platform.close();
  else await engine?.close();
  emulation?.restore();
  restoreCompare();
});

it('records behave like the model over HTTP on the AWS adapters (dynalite, s3rver)', { timeout: 150_000 }, async () => {
  const started = Date.now();
  const done = await checkRecordsModel({
    numRuns: 10,
    maxCommands: 22,
    timeLimitMs: 120_000,
    sortsPerStep: 2,
    concurrency: 4,
    pivots: 1,
    // No narrowing: NUL in text keys (fields/text.ts) and "" in a unique text field on DynamoDB (record-writes.ts
    // guardSortKey), both found by this test, are fixed.
    narrowing: { excludeChars: [] },
    callerFor: (db) => httpCaller(platform!.urls.data, key, db),
  });
  console.log(`records model (aws, FC_SEED=${done.seed}): ${done.runs} runs, ${done.steps} steps, ${done.requests} requests in ${((Date.now() - started) / 1000).toFixed(1)} s`, done.stats);
  expect(done.steps).toBeGreaterThan(0);
});
