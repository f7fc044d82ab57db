/**
 * What the stack costs a month with no traffic at all: what is billed per resource (keys, secrets,
 * alarms, dashboards), what runs on its own (the scheduled sweeps, the queue pollers), and what grows
 * with stored data only (table storage, backups, logs), priced from the stack's census (template.ts).
 */
import type { Usage } from './meter.js';
import { awsWaitMs, lambdaUsd } from './pricing.js';
import { PRICES } from './prices.js';

const usd = (n: number) => `$${n.toFixed(2)}`;
import type { StackCensus } from './template.js';

/** A resource of a synthesized template. */
export type Resource = { Type: string; Properties?: Record<string, unknown> };

/** The metrics an alarm reads, as CloudWatch bills alarms: one, or each metric (not each expression) of its metric math. */
export function alarmMetrics(alarm: Resource): number {
  const queries = alarm.Properties?.Metrics as { MetricStat?: unknown }[] | undefined;
  return queries ? queries.filter((q) => q.MetricStat !== undefined).length : 1;
}

export interface IdleRow {
  what: string;
  count: number;
  /** USD a month for all of them. */
  monthlyUsd: number;
  basis: string;
}

const MINUTES_A_MONTH = 30 * 24 * 60;

/**
 * An event source mapping keeps polling its queue while it is empty: Lambda starts with five pollers,
 * each a long poll of up to 20 seconds, so about three requests a minute each. An assumption from
 * Lambda's documented behaviour, not a measurement.
 */
export const IDLE_POLLS_PER_MAPPING_A_MONTH = 5 * 3 * MINUTES_A_MONTH;

/** Runs a month of a `rate(N minute[s])` schedule, or undefined for another expression. */
export function runsPerMonth(expression: string): number | undefined {
  const m = /^rate\((\d+) minutes?\)$/.exec(expression);
  return m ? MINUTES_A_MONTH / Number(m[1]) : undefined;
}

/** One scheduled run with nothing to do: what it read and wrote, and how long it ran. */
export interface IdleRun {
  usage: Usage;
  durationMs: number;
}

export function idleCosts(c: StackCensus, sweep: IdleRun): IdleRow[] {
  const n = (type: string) => c.byType[type] ?? 0;
  const runs = c.schedules.map(runsPerMonth).reduce<number>((sum, r) => sum + (r ?? 0), 0);
  // Its queries waited for, as the routes' "AWS waits" total counts them.
  const runMs = sweep.durationMs + awsWaitMs(sweep.usage);
  const perRun = lambdaUsd(runMs) + sweep.usage.readUnits * PRICES.dynamoReadUnit.usd + sweep.usage.writeUnits * PRICES.dynamoWriteUnit.usd;
  const mappings = n('AWS::Lambda::EventSourceMapping');
  return [
    { what: 'KMS keys', count: n('AWS::KMS::Key'), monthlyUsd: n('AWS::KMS::Key') * PRICES.kmsKeyMonth.usd, basis: `${usd(PRICES.kmsKeyMonth.usd)} a key` },
    { what: 'Secrets Manager secrets', count: n('AWS::SecretsManager::Secret'), monthlyUsd: n('AWS::SecretsManager::Secret') * PRICES.secretMonth.usd, basis: `${usd(PRICES.secretMonth.usd)} a secret; each upstream API key an operator stores adds one` },
    {
      what: 'CloudWatch alarms',
      count: n('AWS::CloudWatch::Alarm'),
      monthlyUsd: c.alarmMetrics * PRICES.alarmMonth.usd,
      basis: `${usd(PRICES.alarmMonth.usd)} an alarm metric, ${c.alarmMetrics} metrics (a metric-math alarm bills each metric it reads; the account's first 10 are free)`,
    },
    { what: 'CloudWatch dashboards', count: n('AWS::CloudWatch::Dashboard'), monthlyUsd: n('AWS::CloudWatch::Dashboard') * PRICES.dashboardMonth.usd, basis: `${usd(PRICES.dashboardMonth.usd)} a dashboard (the account's first 3 are free)` },
    {
      what: 'scheduled sweeps with nothing to sweep',
      count: c.schedules.length,
      monthlyUsd: runs * perRun,
      basis: `${Math.round(runs).toLocaleString('en-US')} runs (${c.schedules.join(', ')}), each ${sweep.usage.readUnits} read units and ${sweep.durationMs.toFixed(1)} ms measured, ${runMs.toFixed(0)} ms with AWS waits`,
    },
    {
      what: 'SQS polls of empty queues by event source mappings',
      count: mappings,
      monthlyUsd: mappings * IDLE_POLLS_PER_MAPPING_A_MONTH * PRICES.sqsRequest.usd,
      basis: `${IDLE_POLLS_PER_MAPPING_A_MONTH.toLocaleString('en-US')} requests a mapping (5 pollers, 20 s long polls; assumed); the account's first million requests are free`,
    },
    { what: 'DynamoDB tables: storage and PITR', count: n('AWS::DynamoDB::Table'), monthlyUsd: 0, basis: `${usd(PRICES.dynamoStorageGbMonth.usd)} + ${usd(PRICES.dynamoPitrGbMonth.usd)} (PITR on ${c.pitrTables}) a GB-month stored; nothing when empty` },
    { what: 'log groups', count: n('AWS::Logs::LogGroup'), monthlyUsd: 0, basis: `no minimum; ${usd(PRICES.logStorageGbMonth.usd)} a GB-month kept, ${usd(PRICES.logIngestGb.usd)} a GB written` },
    {
      what: 'functions, APIs, distributions, buckets, queues',
      count: n('AWS::Lambda::Function') + n('AWS::ApiGatewayV2::Api') + n('AWS::CloudFront::Distribution') + n('AWS::S3::Bucket') + n('AWS::SQS::Queue'),
      monthlyUsd: 0,
      basis: 'billed per request only',
    },
  ];
}
