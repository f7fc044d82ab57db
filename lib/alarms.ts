import { Duration } from 'aws-cdk-lib';
import { Alarm, ComparisonOperator, MathExpression, Metric, Stats, TreatMissingData, type IAlarmAction, type IMetric } from 'aws-cdk-lib/aws-cloudwatch';
import type { HttpApi } from 'aws-cdk-lib/aws-apigatewayv2';
import type { ITable } from 'aws-cdk-lib/aws-dynamodb';
import type { CfnFunction, IFunction } from 'aws-cdk-lib/aws-lambda';
import type { Construct } from 'constructs';
import { QUEUES, type QueueName } from '../lambdas/engine/queues.js';
import type { PlatformQueue } from './queues.js';
import { platformStackName } from './stack-name.js';

/**
 * The stack's alarms, one builder per kind of thing watched; each alarm notifies the alarm topic
 * when it fires and when it clears. What each means and what to do: docs/decisions/operations.md.
 */

/** How long a rate or a count is gathered before it is judged. */
export const ALARM_PERIOD = Duration.minutes(5);

/**
 * The oldest message of each work queue may wait this long before it alarms. Each is above what the
 * queue's own retries make a message wait when its consumer reports it failed (its longest send
 * delay, plus maxReceives x retrySeconds of lambdas/engine/queues.ts; test/infra/queue-timeouts.test.ts
 * checks), so an alarm means the consumer is missing, failing or too slow, not a retry in progress. A
 * consumer that times out or crashes holds its batch for the whole visibility timeout (six times its
 * timeout) each time: its function's `-errors` alarm fires at the first one.
 */
export const QUEUE_AGE_ALARM_SECONDS: Readonly<Record<QueueName, number>> = {
  /** Retries wait at most 600 s (retryDelaySeconds in lambdas/events/delivery.ts), a failed message 6 x 60 s. */
  webhooks: 900,
  /** Wakes: 5 receives 30 s apart; a frame later than 5 minutes is of no use to a live stream. */
  streams: 300,
  /** Jobs: 5 receives 300 s apart; more means nobody takes them. */
  jobs: 1800,
  /**
   * Items: a message the consumer fails (the store failed) is seen 5 times, 900 s apart, after a delayed
   * retry's 300 s at most: 4,800 s; an hour and a half means nobody takes them.
   */
  knowledge: 5400,
  /**
   * Upload checks: received 2 to 27 s after they are sent, a failed one seen 5 times 60 s apart, a
   * running one in flight up to 600 s: half an hour means nobody finishes them (uploads stay `verifying`).
   */
  'upload-checks': 1800,
  /**
   * Job steps: sent with no delay, a failed one seen 5 times 60 s apart; a step that runs its whole
   * STEP_BUDGET_MS sends itself again. Half an hour means nobody takes them.
   */
  'knowledge-jobs': 1800,
};

/** A 5xx (or failed-execution) rate alarms past this many percent of calls... */
export const ERROR_RATE_PERCENT = 5;
/** ...when at least this many calls came in the period (two failures of three calls are not a trend). */
export const ERROR_RATE_MIN_CALLS = 20;

interface AlarmSpec {
  /** After `<stack>-`: the alarm's name. */
  readonly name: string;
  readonly description: string;
  readonly metric: IMetric;
  readonly threshold: number;
}

/** `scope/id`: fires when `metric` passes `threshold` in one period; missing data (no traffic) is fine. */
function alarm(scope: Construct, id: string, spec: AlarmSpec, action: IAlarmAction): Alarm {
  const created = new Alarm(scope, id, {
    alarmName: `${platformStackName(scope)}-${spec.name}`,
    alarmDescription: spec.description,
    metric: spec.metric,
    threshold: spec.threshold,
    comparisonOperator: ComparisonOperator.GREATER_THAN_THRESHOLD,
    evaluationPeriods: 1,
    treatMissingData: TreatMissingData.NOT_BREACHING,
  });
  created.addAlarmAction(action);
  created.addOkAction(action);
  return created;
}

/**
 * A function's invocation errors (uncaught errors, timeouts, crashes: the chain turns every error it
 * catches into an answer, so these are not 5xx answers) plus its throttles, in one alarm
 * (`<function scope>/Alarm`, so in the function's own template).
 */
export function functionAlarm(fn: IFunction, action: IAlarmAction): Alarm {
  const name = (fn.node.defaultChild as CfnFunction).functionName!.slice(platformStackName(fn).length + 1);
  const metric = new MathExpression({
    expression: 'errors + throttles',
    usingMetrics: { errors: fn.metricErrors({ statistic: Stats.SUM }), throttles: fn.metricThrottles({ statistic: Stats.SUM }) },
    period: ALARM_PERIOD,
    label: 'errors + throttles',
  });
  return alarm(fn.node.scope!, 'Alarm', { name: `${name}-errors`, description: `Function ${name}: invocations failed (uncaught error, timeout) or were throttled.`, metric, threshold: 0 }, action);
}

/** A queue's dead-letter depth and the age of its oldest message (`scope/<Name>DeadLetters`, `scope/<Name>OldestMessage`). */
export function queueAlarms(scope: Construct, name: QueueName, { queue, deadLetterQueue }: PlatformQueue, action: IAlarmAction): Alarm[] {
  const id = name[0].toUpperCase() + name.slice(1);
  const maximum = { period: Duration.minutes(1), statistic: Stats.MAXIMUM };
  return [
    alarm(
      scope,
      `${id}DeadLetters`,
      {
        name: `${name}-dead-letters`,
        description: `${name}-dead holds messages: its consumer failed on them ${QUEUES[name].maxReceives} times. Inspect, fix, then redrive them to ${name}.`,
        metric: deadLetterQueue.metricApproximateNumberOfMessagesVisible(maximum),
        threshold: 0,
      },
      action,
    ),
    alarm(
      scope,
      `${id}OldestMessage`,
      {
        name: `${name}-oldest-message`,
        description: `A ${name} queue message waits for more than ${QUEUE_AGE_ALARM_SECONDS[name]} s: its consumer is missing, failing or falls behind.`,
        metric: queue.metricApproximateAgeOfOldestMessage(maximum),
        threshold: QUEUE_AGE_ALARM_SECONDS[name],
      },
      action,
    ),
  ];
}

/** `IF(calls >= min, 100 * errors / calls, 0)`: a rate that a handful of calls cannot trip. */
function errorRate(errors: IMetric, calls: IMetric, label: string): MathExpression {
  return new MathExpression({ expression: `IF(calls >= ${ERROR_RATE_MIN_CALLS}, 100 * errors / calls, 0)`, usingMetrics: { errors, calls }, period: ALARM_PERIOD, label });
}

/** An HTTP API's 5xx answers, as a share of its calls (`scope/ServerErrorsAlarm`). */
export function httpApiAlarm(scope: Construct, api: string, httpApi: HttpApi, action: IAlarmAction): Alarm {
  const sum = { statistic: Stats.SUM, period: ALARM_PERIOD };
  return alarm(
    scope,
    'ServerErrorsAlarm',
    {
      name: `${api}-api-5xx`,
      description: `The ${api} HTTP API answered more than ${ERROR_RATE_PERCENT} % of its calls with 5xx in ${ALARM_PERIOD.toMinutes()} minutes (at least ${ERROR_RATE_MIN_CALLS} calls).`,
      metric: errorRate(httpApi.metricServerError(sum), httpApi.metricCount(sum), '5xx %'),
      threshold: ERROR_RATE_PERCENT,
    },
    action,
  );
}

/** A WebSocket API stage's metric (AWS/ApiGateway by ApiId and Stage). */
export const socketMetric = (apiId: string, stage: string, metricName: string) =>
  new Metric({ namespace: 'AWS/ApiGateway', metricName, dimensionsMap: { ApiId: apiId, Stage: stage }, statistic: Stats.SUM, period: ALARM_PERIOD });

/**
 * The WebSocket API's failed executions (its function failed, timed out or was throttled: the
 * WebSocket form of a 5xx), as a share of its connects and messages (`scope/ExecutionErrorsAlarm`).
 */
export function socketApiAlarm(scope: Construct, apiId: string, stage: string, action: IAlarmAction): Alarm {
  const calls = new MathExpression({
    expression: 'connects + messages',
    usingMetrics: { connects: socketMetric(apiId, stage, 'ConnectCount'), messages: socketMetric(apiId, stage, 'MessageCount') },
    period: ALARM_PERIOD,
  });
  return alarm(
    scope,
    'ExecutionErrorsAlarm',
    {
      name: 'events-socket-errors',
      description: `The Events WebSocket API failed more than ${ERROR_RATE_PERCENT} % of its connects and messages in ${ALARM_PERIOD.toMinutes()} minutes (at least ${ERROR_RATE_MIN_CALLS}).`,
      metric: new MathExpression({
        expression: `IF(calls >= ${ERROR_RATE_MIN_CALLS}, 100 * errors / calls, 0)`,
        usingMetrics: { errors: socketMetric(apiId, stage, 'ExecutionError'), calls },
        period: ALARM_PERIOD,
        label: 'failed executions %',
      }),
      threshold: ERROR_RATE_PERCENT,
    },
    action,
  );
}

/** A table's throttled reads and writes (on-demand tables throttle too, past their partitions' or account's limits). */
export function tableAlarm(scope: Construct, name: string, table: ITable, action: IAlarmAction): Alarm {
  const sum = { statistic: Stats.SUM, period: ALARM_PERIOD };
  return alarm(
    scope,
    'ThrottlesAlarm',
    {
      name: `${name}-table-throttles`,
      description: `DynamoDB throttled reads or writes of the ${name} table.`,
      metric: new MathExpression({
        expression: 'reads + writes',
        usingMetrics: { reads: table.metric('ReadThrottleEvents', sum), writes: table.metric('WriteThrottleEvents', sum) },
        period: ALARM_PERIOD,
        label: 'throttle events',
      }),
      threshold: 0,
    },
    action,
  );
}
