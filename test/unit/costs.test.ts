/**
 * The cost model (scripts/costs.ts): its pricing arithmetic on known counts, DynamoDB's billing units
 * as the meter applies them, and a real record create counted through the metered engine.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createEmbeddedEngine } from '../../lambdas/engine/embedded/index.js';
import { indexWriteUnits, Meter, meteredEngine, noUsage, readUnits, sqsRequests, writeUnits } from '../../scripts/costs/meter.js';
import { millionCalls } from '../../scripts/costs/pricing.js';
import { startCostPlatform, type CostPlatform } from '../../scripts/costs/platform.js';
import { alarmMetrics, idleCosts, runsPerMonth } from '../../scripts/costs/idle.js';
import { replaceGenerated, BEGIN, END } from '../../scripts/costs/report.js';

describe('pricing a million calls', () => {
  it('prices known counts: Lambda by whole ms at 512 MB arm64, the HTTP API, CloudFront, request units, S3 and SQS requests', () => {
    const cost = millionCalls({
      usage: { ...noUsage(), readUnits: 2, writeUnits: 4, s3Puts: 2, s3Gets: 1, sqsRequests: 1 },
      durationMs: 9.2, // billed as 10 ms
      path: { httpApi: true, cloudFront: true, invocations: 1 },
    });
    // 1e6 × ($0.20 / 1e6 + 0.010 s × 0.5 GB × $0.0000133334)
    expect(cost.lambda).toBeCloseTo(0.2 + 0.066667, 5);
    expect(cost.apiGateway).toBeCloseTo(1, 9);
    expect(cost.cloudFront).toBeCloseTo(1, 9);
    // 2 × $0.125 + 4 × $0.625
    expect(cost.dynamo).toBeCloseTo(2.75, 9);
    // 2 × $5 + 1 × $0.40
    expect(cost.s3).toBeCloseTo(10.4, 9);
    expect(cost.sqs).toBeCloseTo(0.4, 9);
    expect(cost.total).toBeCloseTo(0.266667 + 1 + 1 + 2.75 + 10.4 + 0.4, 5);
  });

  it('meters API Gateway requests in 512 KB steps and bills no front door for a queue consumer', () => {
    const big = millionCalls({ usage: noUsage(), durationMs: 1, path: { httpApi: true, cloudFront: false, invocations: 1 }, requestBytes: 512 * 1024 + 1 });
    expect(big.apiGateway).toBeCloseTo(2, 9);
    const consumer = millionCalls({ usage: noUsage(), durationMs: 1, path: { httpApi: false, cloudFront: false, invocations: 1 } });
    expect(consumer.apiGateway + consumer.cloudFront + consumer.edgeFunction).toBe(0);
    // A file path's Lambda@Edge at 128 MB, 1 ms: $0.60 a million plus 0.001 s × 0.125 GB × $0.00005001.
    const file = millionCalls({ usage: noUsage(), durationMs: 1, path: { httpApi: true, cloudFront: true, invocations: 1, edgeFunctionMb: 128 } });
    expect(file.edgeFunction).toBeCloseTo(0.6 + 0.00625125, 8);
  });

  it('prices an idle stack from its census: per-resource fees and the scheduled runs', () => {
    const rows = idleCosts(
      { byType: { 'AWS::KMS::Key': 1, 'AWS::SecretsManager::Secret': 2, 'AWS::CloudWatch::Alarm': 9, 'AWS::CloudWatch::Dashboard': 1 }, schedules: ['rate(1 minute)'], pitrTables: 1, alarmMetrics: 10 },
      { usage: noUsage(), durationMs: 1 },
    );
    const of = (what: string) => rows.find((r) => r.what.startsWith(what))!.monthlyUsd;
    expect(of('KMS')).toBe(1);
    expect(of('Secrets')).toBeCloseTo(0.8, 9);
    expect(of('CloudWatch alarms')).toBeCloseTo(1, 9);
    expect(of('CloudWatch dashboards')).toBe(3);
    // 43,200 runs of 1 ms: the request and the duration.
    expect(of('scheduled')).toBeCloseTo(43_200 * (0.2e-6 + 0.001 * 0.5 * 0.0000133334), 9);
    expect(runsPerMonth('rate(5 minutes)')).toBe(8640);
    // A metric-math alarm reading errors and throttles bills two alarm metrics; a plain one, one.
    const mathAlarm = { Type: 'AWS::CloudWatch::Alarm', Properties: { Metrics: [{ Expression: 'errors + throttles' }, { MetricStat: {} }, { MetricStat: {} }] } };
    expect([alarmMetrics(mathAlarm), alarmMetrics({ Type: 'AWS::CloudWatch::Alarm', Properties: { MetricName: 'Errors' } })]).toEqual([2, 1]);
    expect(runsPerMonth('cron(0 * * * ? *)')).toBeUndefined();
  });

  it('replaces only the generated part of the document', () => {
    const doc = `# Costs\n\nprose\n\n${BEGIN}\nold\n${END}\n\nmore prose\n`;
    expect(replaceGenerated(doc, `${BEGIN}\nnew\n${END}`)).toBe(`# Costs\n\nprose\n\n${BEGIN}\nnew\n${END}\n\nmore prose\n`);
  });
});

describe("DynamoDB's billing units", () => {
  it('reads: 4 KB a unit, at least one, half for an eventually consistent index read', () => {
    expect([readUnits(0, true), readUnits(4096, true), readUnits(4097, true), readUnits(4097, false)]).toEqual([1, 1, 2, 1]);
  });

  it('writes: 1 KB a unit, at least one; SQS: 64 KB a request', () => {
    expect([writeUnits(0), writeUnits(1024), writeUnits(1025)]).toEqual([1, 1, 2]);
    expect([sqsRequests(10), sqsRequests(64 * 1024), sqsRequests(64 * 1024 + 1)]).toEqual([1, 1, 2]);
  });

  it('index writes: one to enter, leave or change in place, two when the index key moves', () => {
    const item = (gsi1sk?: string) => ({ pk: 'a', sk: 'b', ...(gsi1sk ? { gsi1pk: 'p', gsi1sk } : {}) });
    expect(indexWriteUnits(undefined, item())).toBe(0);
    expect(indexWriteUnits(undefined, item('x'))).toBe(1);
    expect(indexWriteUnits(item('x'), undefined)).toBe(1);
    expect(indexWriteUnits(item('x'), item('x'))).toBe(1);
    expect(indexWriteUnits(item('x'), item('y'))).toBe(2);
  });

  it('the metered engine bills a transactional write twice a plain one, a missing item one read, a failed condition one write', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'costs-meter-'));
    const engine = createEmbeddedEngine({ dataDir });
    const meter = new Meter();
    const kv = meteredEngine(engine, meter).kv;
    try {
      await kv.put({ pk: 'p', sk: '1', v: 'x'.repeat(1500) });
      expect(meter.take()).toMatchObject({ writeUnits: 2, dynamoCalls: 1 });
      meter.log = [];
      await kv.transact([{ put: { pk: 'p#1', sk: '2', v: 'x'.repeat(1500) } }]);
      expect(meter.take()).toMatchObject({ writeUnits: 4, dynamoCalls: 1 });
      expect(meter.log).toEqual([{ request: 'TransactWriteItems', on: 'p#', usage: { dynamoCalls: 1, writeUnits: 4 } }]);
      meter.log = undefined;
      await kv.get({ pk: 'p', sk: 'missing' });
      expect(meter.take()).toMatchObject({ readUnits: 1 });
      await expect(kv.put({ pk: 'p', sk: '3' }, { ifExists: true })).rejects.toThrow();
      expect(meter.take()).toMatchObject({ writeUnits: 1 });
    } finally {
      await engine.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});

describe('counting real calls', () => {
  let p: CostPlatform;
  beforeAll(async () => {
    p = await startCostPlatform();
  });
  afterAll(async () => {
    await p?.close();
  });

  it('a record create through its handler writes, and a get reads', async () => {
    const db = '/v1/databases/costs';
    p.meter.on = false;
    await p.call('data.databases.put', { path: db, params: { database: 'costs' }, expect: 201 });
    await p.call('data.collections.put', { path: `${db}/collections/items`, params: { database: 'costs', collection: 'items' }, body: { fields: [{ name: 'title', type: 'text' }] }, expect: 201 });
    p.meter.take();
    p.meter.on = true;
    const params = { database: 'costs', collection: 'items' };
    const created = await p.call('data.records.create', { path: `${db}/collections/items/records`, params, body: { title: 'counted' }, expect: 201 });
    const write = p.meter.take();
    expect(write.writeUnits).toBeGreaterThan(0);
    expect(write.dynamoCalls).toBeGreaterThan(0);
    const id = JSON.parse(String(created.body)).id;
    await p.call('data.records.get', { path: `${db}/collections/items/records/${id}`, params: { ...params, id }, expect: 200 });
    expect(p.meter.take().readUnits).toBeGreaterThan(0);
  });
});
