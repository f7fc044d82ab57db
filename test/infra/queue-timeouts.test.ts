/**
 * AWS's rules for SQS event sources (issue 33, B1), on every mapping of the synthesized stack: the
 * queue's visibility timeout at least six times its function's timeout, and at least 5 receives before
 * a message is dead; and the oldest-message alarms above what a queue's retries make a message wait.
 */
import { App, Duration, Stack } from 'aws-cdk-lib';
import type { Template } from 'aws-cdk-lib/assertions';
import { Queue } from 'aws-cdk-lib/aws-sqs';
import { beforeAll, describe, expect, it } from 'vitest';
import { QUEUES, type QueueName } from '../../lambdas/engine/queues.js';
import { QUEUE_AGE_ALARM_SECONDS } from '../../lib/alarms.js';
import { sqsSource } from '../../lib/function-defaults.js';
import { flatTemplate, synthStack } from './helpers.js';

let template: Template;
// Synthesis takes seconds, a minute and more on a loaded machine.
beforeAll(() => {
  template = flatTemplate(synthStack().stack);
}, 240_000);

type Resource = { Type: string; Properties: Record<string, any> };

/** The logical id a `Ref` or `Fn::GetAtt` points at. */
const target = (v: any): string => v?.Ref ?? v?.['Fn::GetAtt']?.[0];

describe('every SQS event source mapping', () => {
  it('reads a queue whose visibility timeout is at least 6 times its function timeout, dead after at least 5 receives', () => {
    const mappings = Object.entries(template.findResources('AWS::Lambda::EventSourceMapping') as Record<string, Resource>);
    const functions = template.findResources('AWS::Lambda::Function') as Record<string, Resource>;
    const queues = template.findResources('AWS::SQS::Queue') as Record<string, Resource>;
    // One mapping per work queue at least (webhooks, streams, jobs, knowledge).
    expect(mappings.length).toBeGreaterThanOrEqual(Object.keys(QUEUES).length);
    for (const [id, mapping] of mappings) {
      const fn = functions[target(mapping.Properties.FunctionName)];
      const queue = queues[target(mapping.Properties.EventSourceArn)];
      expect(fn, `${id}: its function`).toBeDefined();
      expect(queue, `${id}: its queue`).toBeDefined();
      // A function without Timeout runs Lambda's default 3 s.
      const timeout = fn.Properties.Timeout ?? 3;
      expect(queue.Properties.VisibilityTimeout, `${id}: visibility timeout vs ${fn.Properties.FunctionName}'s ${timeout} s`).toBeGreaterThanOrEqual(6 * timeout);
      expect(queue.Properties.RedrivePolicy?.maxReceiveCount, `${id}: maxReceiveCount`).toBeGreaterThanOrEqual(5);
    }
  });

  it('every queue with a dead-letter queue has maxReceiveCount 5 or more', () => {
    for (const [id, queue] of Object.entries(template.findResources('AWS::SQS::Queue') as Record<string, Resource>)) {
      if (queue.Properties.RedrivePolicy) expect(queue.Properties.RedrivePolicy.maxReceiveCount, id).toBeGreaterThanOrEqual(5);
    }
  });

  it('is refused at synthesis when the queue is too short for the function', () => {
    const stack = new Stack(new App(), 'Short');
    const queue = new Queue(stack, 'Q', { visibilityTimeout: Duration.seconds(179) });
    expect(() => sqsSource(queue, { batchSize: 1, maxBatchingWindowSeconds: 0, maxConcurrency: 2, timeoutSeconds: 30 })).toThrow(/at least 6 times its consumer's timeout \(30 s\)/);
    expect(() => sqsSource(new Queue(stack, 'Long', { visibilityTimeout: Duration.seconds(180) }), { batchSize: 1, maxBatchingWindowSeconds: 0, maxConcurrency: 2, timeoutSeconds: 30 })).not.toThrow();
  });
});

describe('oldest-message alarms', () => {
  it.each(Object.keys(QUEUES) as QueueName[])('%s: fires only past what its failed messages wait (maxReceives x retrySeconds)', (name) => {
    const { maxReceives, retrySeconds, visibilitySeconds } = QUEUES[name];
    expect(QUEUE_AGE_ALARM_SECONDS[name]).toBeGreaterThan(maxReceives * retrySeconds);
    // Retries are meant to come sooner than the lease a receive takes.
    expect(retrySeconds).toBeLessThan(visibilitySeconds);
    const [alarm] = Object.values(template.findResources('AWS::CloudWatch::Alarm', { Properties: { AlarmName: `PlatformStack-${name}-oldest-message` } }) as Record<string, Resource>);
    expect(alarm.Properties.Threshold).toBe(QUEUE_AGE_ALARM_SECONDS[name]);
  });
});
