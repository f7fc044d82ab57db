/**
 * What the stack deploys, counted by resource type from its synthesized templates (nested stacks
 * included), without bundling the functions (the template tests' shortcut, test/infra/helpers.ts):
 * the idle stack's fixed costs are per resource (keys, secrets, alarms, dashboards, schedules).
 */
import { App } from 'aws-cdk-lib';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PlatformStack } from '../../lib/platform-stack.js';

import { alarmMetrics, type Resource } from './idle.js';

export interface StackCensus {
  /** Resources by CloudFormation type, over every template. */
  byType: Record<string, number>;
  /** Rules that run on a schedule (each invokes a function every period). */
  schedules: string[];
  /** Tables with point-in-time recovery on. */
  pitrTables: number;
  /** The metrics the alarms read: CloudWatch bills an alarm per metric, a metric-math alarm for each metric in its expression. */
  alarmMetrics: number;
}

export function synthesizedCensus(): StackCensus {
  const outdir = mkdtempSync(join(tmpdir(), 'platform-costs-synth-'));
  try {
    const app = new App({ outdir, context: { 'aws:cdk:bundling-stacks': [] } });
    // A region, as bin/app.ts names one (the Data distribution's Lambda@Edge needs it).
    new PlatformStack(app, 'PlatformStack', { env: { region: 'us-east-1' } });
    app.synth();
    const census: StackCensus = { byType: {}, schedules: [], pitrTables: 0, alarmMetrics: 0 };
    for (const file of readdirSync(outdir).filter((f) => f.endsWith('.template.json'))) {
      const template = JSON.parse(readFileSync(join(outdir, file), 'utf8')) as { Resources?: Record<string, Resource> };
      for (const r of Object.values(template.Resources ?? {})) {
        census.byType[r.Type] = (census.byType[r.Type] ?? 0) + 1;
        const schedule = r.Type === 'AWS::Events::Rule' ? r.Properties?.ScheduleExpression : undefined;
        if (typeof schedule === 'string') census.schedules.push(schedule);
        const pitr = r.Properties?.PointInTimeRecoverySpecification as { PointInTimeRecoveryEnabled?: boolean } | undefined;
        if (r.Type === 'AWS::DynamoDB::Table' && pitr?.PointInTimeRecoveryEnabled) census.pitrTables++;
        if (r.Type === 'AWS::CloudWatch::Alarm') census.alarmMetrics += alarmMetrics(r);
      }
    }
    return census;
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}
