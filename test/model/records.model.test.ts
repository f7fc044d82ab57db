/**
 * The records model (records-model.ts) through the real local server on the embedded engine (SQLite
 * and files): random command sequences compared step by step with an in-memory model of the Data API
 * reference. Replay a failure with FC_SEED=<seed> FC_PATH=<path> from fast-check's report.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestPlatform, type TestPlatform } from '../helpers/platform.js';
import { checkRecordsModel, httpCaller } from './records-model.js';

let p: TestPlatform;
beforeAll(async () => {
  p = await startTestPlatform();
});
afterAll(async () => p?.close());

it('records behave like the model over HTTP on the embedded engine', { timeout: 150_000 }, async () => {
  const started = Date.now();
  const done = await checkRecordsModel({
    numRuns: 25,
    maxCommands: 35,
    timeLimitMs: 120_000,
    sortsPerStep: 7,
    concurrency: 4,
    pivots: 3,
    // No narrowing: NUL in text keys (fields/text.ts) and "" in a unique text field on DynamoDB (record-writes.ts
    // guardSortKey), both found by this test, are fixed.
    narrowing: { excludeChars: [] },
    callerFor: (db) => httpCaller(p.urls.data, p.credentials.secret_key, db),
  });
  console.log(`records model (embedded, FC_SEED=${done.seed}): ${done.runs} runs, ${done.steps} steps, ${done.requests} requests in ${((Date.now() - started) / 1000).toFixed(1)} s`, done.stats);
  expect(done.steps).toBeGreaterThan(0);
});

// Found by the model: a batch op's `data` went through z.record, which drops a `__proto__` key, so the
// batch stored the record without it where the single-record routes answer 400 reserved_field.
it('refuses a __proto__ field in a batch op as the single-record routes do', async () => {
  const call = httpCaller(p.urls.data, p.credentials.secret_key, 'proto-batch');
  expect((await call('PUT', '')).status).toBe(201);
  const single = await call('POST', '/collections/free/records', '{"id":"a","__proto__":"x","b":1}');
  expect({ status: single.status, code: single.body?.error?.code }).toEqual({ status: 400, code: 'reserved_field' });
  const batch = await call('POST', '/batch', '{"ops":[{"op":"create","collection":"free","id":"a","data":{"__proto__":"x","b":1}}]}');
  expect({ status: batch.status, code: batch.body?.error?.code, param: batch.body?.error?.param }).toEqual({ status: 400, code: 'reserved_field', param: '__proto__' });
  expect((await call('GET', '/collections/free/records/a')).status).toBe(404);
});
