import { Duration, Stack } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, Stats, TreatMissingData, Unit, type IAlarmAction } from 'aws-cdk-lib/aws-cloudwatch';
import { FilterPattern, MetricFilter } from 'aws-cdk-lib/aws-logs';
import type { Table } from 'aws-cdk-lib/aws-dynamodb';
import type { NodejsFunction } from 'aws-cdk-lib/aws-lambda-nodejs';
import type { Rule } from 'aws-cdk-lib/aws-events';
import { Construct } from 'constructs';
import { PolicyStatement } from 'aws-cdk-lib/aws-iam';
import { ENV } from '../lambdas/shared/settings.js';
import { consumerFunction, grantItems, schedule, sqsSource } from './function-defaults.js';
import type { Queues } from './queues.js';
import type { ServerSecret } from './server-secret.js';
import { acknowledgeEventBusGrant } from './nag.js';

/**
 * Partition key prefixes of the Events items each consumer touches (lambdas/events/keys.ts and the
 * modules it names); test/infra/webhook-delivery.test.ts checks them against the domain's key
 * functions, so a renamed prefix fails a test instead of a delivery in AWS.
 */
/** ... and the organizations' event-bus allow-lists (evbus#<org>, lambdas/events/eventbridge.ts), checked at every eventbridge delivery. */
export const DELIVERY_READ_KEYS = ['evsub#*', 'evt#*', 'evbus#*'];
/**
 * Dead letters (evdead: one per event, naming the subscriptions that died), the workspace counters
 * (evstat), the markers of outcomes counted (evdone: a duplicate attempt counts nothing) and the
 * delivery log (evdlv: each delivery's status, attempts and last error, lambdas/events/delivery-log.ts).
 */
export const DELIVERY_WRITE_KEYS = ['evdead#*', 'evdlv#*', 'evdone#*', 'evstat#*'];
/** Outbox entries (evout#<shard>). */
export const OUTBOX_KEYS = ['evout#*'];
/** The Data API's platform-event outbox items (dchg#<shard>, lambdas/data/change-outbox.ts). */
export const CHANGE_OUTBOX_KEYS = ['dchg#*'];

/**
 * What the platform-events sweep may do, by action, to which partition keys: it reads and removes
 * the change outbox, and publishes each item's changes through the Events API's publish path
 * (lambdas/events/publish.ts). No other action, no other item; no secret (publish opens none). Besides
 * these it sends to the `webhooks` queue (deliveries) and the `streams` queue (wakes), work queues only.
 */
export const PLATFORM_EVENTS_SWEEP_KEYS: Readonly<Record<string, readonly string[]>> = {
  /** The change outbox's shards; the workspace's subscriptions (Subscriptions.list). */
  'dynamodb:Query': [...CHANGE_OUTBOX_KEYS, 'evsub#*'],
  /** A re-published event's idempotency key, for the original event's id (the duplicate's answer). */
  'dynamodb:GetItem': ['evkey#*'],
  /**
   * Each event's transaction: its idempotency key (a conditional put, not a ConditionCheck), the event,
   * the pull and WebSocket subscriptions' inbox messages, the webhook outbox entries. IAM authorizes
   * TransactWriteItems per item, by its action (Put: PutItem); there is no TransactWriteItems action.
   */
  'dynamodb:PutItem': ['evkey#*', 'evt#*', 'inbox#*', ...OUTBOX_KEYS],
  /** The workspace's counters (published, depth). */
  'dynamodb:UpdateItem': ['evstat#*'],
  /** A change outbox item once published; a webhook outbox entry once its delivery is queued. */
  'dynamodb:DeleteItem': [...CHANGE_OUTBOX_KEYS, ...OUTBOX_KEYS],
};

/** Every event bus, any region and account: what the delivery function may PutEvents on (the allow-list narrows it). */
export const eventBusArns = (scope: Construct) => Stack.of(scope).formatArn({ service: 'events', region: '*', account: '*', resource: 'event-bus', resourceName: '*' });

/**
 * Sizing of the delivery function. One attempt waits at most 10 s for its receiver and every message
 * of a batch is attempted at once, so a batch takes about 10 s plus the store's writes; 30 s leaves
 * room for a cold start; the queue's visibility timeout is six times that (sqsSource).
 */
export const DELIVERY = {
  timeoutSeconds: 30,
  batchSize: 10,
  maxBatchingWindowSeconds: 1,
  /**
   * At most this many instances poll the queue (10 deliveries each in flight): enough for thousands
   * of deliveries a second to receivers that answer in 100 ms, and a bound on what a backlog can take
   * from the account's concurrency that the HTTP routes share. The event source stops polling instead
   * of being throttled, so no message burns a receive on a throttle.
   */
  maxConcurrency: 20,
} as const;

/** The sweeps of the two outboxes (webhook deliveries, platform events): every minute; a run reads 16 shards of at most 100 entries. */
export const SWEEP = { timeoutSeconds: 60, everyMinutes: 1 } as const;

/**
 * Failed attempts (each logged as `logMessage`) above `attempts` in `period` alarm. One receiver that
 * is down fails one attempt per event and retry, a few a minute at ordinary volume; a hundred in five
 * minutes is many receivers at once, or one flooding (docs/decisions/operations.md says how to tell).
 */
export const WEBHOOK_FAILURES = { logMessage: 'webhook attempt failed', attempts: 100, period: Duration.minutes(5) } as const;

export interface WebhookDeliveryProps {
  readonly table: Table;
  readonly queues: Queues;
  /** Signing secrets are sealed with a key derived from the server secret (secret:read). */
  readonly secret: ServerSecret;
  /** What the failing-deliveries alarm notifies (the alarm topic). */
  readonly alarmAction: IAlarmAction;
}

/**
 * Webhook delivery in AWS: the `webhooks` queue's consumer function with
 * partial batch responses, the outbox sweep on a schedule, the platform-events sweep on a schedule
 * (the Data API's changes a write left in its outbox, docs/events/platform-events.md), and the alarm
 * on failing attempts (the queue's own alarms are with every queue's, lib/alarms.ts). Each function gets exactly the items, queues
 * and secret its work needs.
 */
export class WebhookDelivery extends Construct {
  readonly deliveryFunction: NodejsFunction;
  readonly sweepFunction: NodejsFunction;
  readonly sweepSchedule: Rule;
  readonly platformEventsSweepFunction: NodejsFunction;
  readonly platformEventsSweepSchedule: Rule;
  /** Webhook attempts failing (receivers refusing or out of reach); the queue's own alarms are lib/alarms.ts queueAlarms. */
  readonly failedAttemptsAlarm: Alarm;

  constructor(scope: Construct, id: string, props: WebhookDeliveryProps) {
    super(scope, id);
    const stackName = Stack.of(this).stackName;
    const { queue } = props.queues.byName.webhooks;
    // Only the work queue: retries are sent to it with a delay; SQS alone moves messages to the DLQ.
    const queueUrls = Stack.of(this).toJsonString({ webhooks: queue.queueUrl });

    // Delivery: reads the subscription and the event; adds to the counters and, when it dies, to the
    // event's dead letter (both atomic updates: a completed delivery writes only its count).
    const delivery = consumerFunction(new Construct(this, 'Delivery'), {
      module: 'consumers/webhooks',
      name: 'webhooks-delivery',
      tag: 'webhooks',
      description: 'events: delivers webhooks queue messages (one attempt each, partial batch responses)',
      timeoutSeconds: DELIVERY.timeoutSeconds,
      environment: { [ENV.tableName]: props.table.tableName, [ENV.queueUrls]: queueUrls, [ENV.serverSecretArn]: props.secret.secret.secretArn },
    });
    this.deliveryFunction = delivery.fn;
    this.deliveryFunction.addEventSource(sqsSource(queue, DELIVERY));
    grantItems(delivery.role, props.table, ['dynamodb:GetItem'], DELIVERY_READ_KEYS);
    grantItems(delivery.role, props.table, ['dynamodb:UpdateItem'], DELIVERY_WRITE_KEYS);
    queue.grantSendMessages(delivery.role);
    props.secret.grantRead(delivery.role);
    // eventbridge subscriptions (docs/events/eventbridge.md): PutEvents on any bus, because the buses are
    // registered at run time per organization (`org eventbridge-allow`); the allow-list in the table is
    // the check, at creation and at every delivery. A cross-account bus also needs its resource policy.
    delivery.role.addToPrincipalPolicy(new PolicyStatement({ actions: ['events:PutEvents'], resources: [eventBusArns(this)] }));
    acknowledgeEventBusGrant(delivery.role, eventBusArns(this));

    // Outbox sweep: reads and removes outbox entries, queues their deliveries. A failed run is not
    // retried: the next one, a minute later, sweeps the same entries.
    const sweepScope = new Construct(this, 'OutboxSweep');
    const sweep = consumerFunction(sweepScope, {
      module: 'consumers/outbox-sweep',
      name: 'outbox-sweep',
      tag: 'outbox-sweep',
      description: 'events: queues webhook deliveries a publish committed but did not queue (every minute)',
      timeoutSeconds: SWEEP.timeoutSeconds,
      retryAttempts: 0,
      environment: { [ENV.tableName]: props.table.tableName, [ENV.queueUrls]: queueUrls },
    });
    this.sweepFunction = sweep.fn;
    grantItems(sweep.role, props.table, ['dynamodb:Query', 'dynamodb:DeleteItem'], OUTBOX_KEYS);
    queue.grantSendMessages(sweep.role);
    this.sweepSchedule = schedule(sweepScope, sweep.fn, SWEEP.everyMinutes, `${stackName}: runs the outbox sweep`);

    // Platform-events sweep: publishes the Data API's changes a write left in its outbox, then removes
    // the items. Publishing reads the workspace's subscriptions, commits each event (idempotency key,
    // event, inbox messages, webhook outbox entries), adds to the counters, queues the webhook
    // deliveries (then removes their outbox entries) and wakes the streams of the inboxes it wrote
    // (lambdas/events/stream-remote.ts): a publish's grants, on its items and the two work queues only.
    // As the outbox sweep: the next run takes what a failed one left (a re-publish is a duplicate).
    const streamsQueue = props.queues.byName.streams.queue;
    const platformScope = new Construct(this, 'PlatformEventsSweep');
    const platform = consumerFunction(platformScope, {
      module: 'consumers/platform-events-sweep',
      name: 'platform-events-sweep',
      tag: 'platform-events-sweep',
      description: 'events: publishes the Data API changes a write committed but did not publish (every minute)',
      timeoutSeconds: SWEEP.timeoutSeconds,
      retryAttempts: 0,
      environment: { [ENV.tableName]: props.table.tableName, [ENV.queueUrls]: Stack.of(this).toJsonString({ webhooks: queue.queueUrl, streams: streamsQueue.queueUrl }) },
    });
    this.platformEventsSweepFunction = platform.fn;
    for (const [action, keys] of Object.entries(PLATFORM_EVENTS_SWEEP_KEYS)) grantItems(platform.role, props.table, [action], [...keys]);
    queue.grantSendMessages(platform.role);
    streamsQueue.grantSendMessages(platform.role);
    this.platformEventsSweepSchedule = schedule(platformScope, platform.fn, SWEEP.everyMinutes, `${stackName}: runs the platform-events sweep`);

    // Failed attempts, counted from the lines the delivery function logs (ATTEMPT_FAILED_LOG in
    // lambdas/events/delivery.ts): a receiver that fails is the subscriber's; many at once are ours.
    const failedAttempts = new MetricFilter(this, 'FailedAttemptsMetric', {
      logGroup: delivery.fn.logGroup,
      filterPattern: FilterPattern.stringValue('$.message', '=', WEBHOOK_FAILURES.logMessage),
      metricNamespace: stackName,
      metricName: 'WebhookAttemptsFailed',
      metricValue: '1',
      unit: Unit.COUNT,
    });
    this.failedAttemptsAlarm = new Alarm(this, 'FailedAttemptsAlarm', {
      alarmName: `${stackName}-webhooks-failing`,
      alarmDescription: `More than ${WEBHOOK_FAILURES.attempts} webhook attempts failed in ${WEBHOOK_FAILURES.period.toMinutes()} minutes: many receivers refuse or time out, or this stack cannot reach them.`,
      metric: failedAttempts.metric({ statistic: Stats.SUM, period: WEBHOOK_FAILURES.period }),
      threshold: WEBHOOK_FAILURES.attempts,
      comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: TreatMissingData.NOT_BREACHING,
    });
    this.failedAttemptsAlarm.addAlarmAction(props.alarmAction);
    this.failedAttemptsAlarm.addOkAction(props.alarmAction);
  }
}
