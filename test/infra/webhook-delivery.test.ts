/**
 * Webhook delivery in AWS (lib/webhook-delivery.ts): the `webhooks` queue's consumer function and its
 * event source mapping, the outbox sweep and the platform-events sweep on a schedule, the alarms, and
 * IAM as narrow as the work, down to the partition keys the domain code really touches (the
 * platform-events sweep's handler runs over the AWS adapters in platform-events-sweep.test.ts).
 */
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Engine, KvItem } from '../../lambdas/engine/ports.js';
import { QUEUES } from '../../lambdas/engine/queues.js';
import { CHANGE_OUTBOX_SHARDS, changeOutboxPartition } from '../../lambdas/data/change-outbox.js';
import { ATTEMPT_FAILED_LOG, MAX_ATTEMPTS, attemptDelivery, retryDelaySeconds } from '../../lambdas/events/delivery.js';
import { deadLetterKey } from '../../lambdas/events/dead-letters.js';
import { deliveryLogKey } from '../../lambdas/events/delivery-log.js';
import { eventKey, idempotencyKeyItem, inboxKey, subscriptionKey, subscriptionsPartition } from '../../lambdas/events/keys.js';
import { OUTBOX_SHARDS, outboxKey, sweepOutbox } from '../../lambdas/events/outbox.js';
import { sealSigningSecret } from '../../lambdas/events/secret-box.js';
import { countedKey, statsKey } from '../../lambdas/events/stats.js';
import { newId } from '../../lambdas/shared/ids.js';
import { ENV } from '../../lambdas/shared/settings.js';
import type { PlatformStack } from '../../lib/platform-stack.js';
import { QUEUE_AGE_ALARM_SECONDS } from '../../lib/alarms.js';
import { CHANGE_OUTBOX_KEYS, DELIVERY, DELIVERY_READ_KEYS, DELIVERY_WRITE_KEYS, OUTBOX_KEYS, PLATFORM_EVENTS_SWEEP_KEYS, SWEEP, WEBHOOK_FAILURES } from '../../lib/webhook-delivery.js';
import { actionsOf, allowedStatements, synthStack, type AllowStatement, leadingKeyPattern, consumerFunction, logicalIdIn, flatTemplate, RUNTIME_ENV_NAMES } from './helpers.js';

let stack: PlatformStack;
let template: Template;

beforeAll(() => {
  ({ stack } = synthStack());
  template = flatTemplate(stack);
});

const logicalId = (c: { node: { defaultChild?: unknown } }) => logicalIdIn(stack, c);
const consumer = (name: string) => consumerFunction(template, name);
const webhooks = () => stack.queues.byName.webhooks;
/** Logical ids of every queue but the `webhooks` work queue: its DLQ, the jobs queue and its DLQ. */
const otherQueueIds = () =>
  Object.entries(stack.queues.byName).flatMap(([name, q]) => (name === 'webhooks' ? [logicalId(q.deadLetterQueue)] : [logicalId(q.queue), logicalId(q.deadLetterQueue)]));

const like = leadingKeyPattern;
const covered = (patterns: string[], pk: string) => patterns.some((p) => like(p).test(pk));

/** The leading-key patterns a function's role allows `action` on, per statement; every DynamoDB statement must carry them. */
function leadingKeysFor(statements: AllowStatement[], action: string): string[] {
  return statements
    .filter((s) => s.actions.includes(action))
    .flatMap((s) => {
      const keys = s.condition?.['ForAllValues:StringLike']?.['dynamodb:LeadingKeys'];
      if (!Array.isArray(keys)) throw new Error(`${action} is granted without a dynamodb:LeadingKeys condition`);
      return keys as string[];
    });
}

function expectItemLevelTableAccess(statements: AllowStatement[]) {
  const table = logicalId(stack.storage.table);
  for (const s of statements.filter((x) => x.actions.some((a) => a.startsWith('dynamodb:')))) {
    expect(s.condition, s.actions.join()).toBeDefined();
    // The table itself, no index and no wildcard.
    expect(JSON.parse(s.resources)).toEqual({ 'Fn::GetAtt': [table, 'Arn'] });
  }
}

describe('delivery function', () => {
  it('consumes the webhooks queue with ReportBatchItemFailures, small batches, a batch window and a concurrency bound', () => {
    const fn = consumer('webhooks');
    // One mapping on the webhooks queue, and the delivery function consumes nothing else.
    const mappings = Object.values(template.findResources('AWS::Lambda::EventSourceMapping') as Record<string, { Properties: Record<string, unknown> }>);
    const onWebhooks = mappings.filter((m) => JSON.stringify(m.Properties.EventSourceArn) === JSON.stringify({ 'Fn::GetAtt': [logicalId(webhooks().queue), 'Arn'] }));
    expect(onWebhooks).toHaveLength(1);
    expect(mappings.filter((m) => JSON.stringify(m.Properties.FunctionName) === JSON.stringify({ Ref: fn.logicalId }))).toHaveLength(1);
    template.hasResourceProperties('AWS::Lambda::EventSourceMapping', {
      FunctionName: { Ref: fn.logicalId },
      EventSourceArn: { 'Fn::GetAtt': [logicalId(webhooks().queue), 'Arn'] },
      FunctionResponseTypes: ['ReportBatchItemFailures'],
      BatchSize: 10,
      MaximumBatchingWindowInSeconds: 1,
      ScalingConfig: { MaximumConcurrency: DELIVERY.maxConcurrency },
    });
    expect(DELIVERY.maxConcurrency).toBeGreaterThanOrEqual(2); // SQS mappings take 2 to 1000
  });

  it('times out after a whole batch of 10 s attempts, and before the queue would hand its messages out again', () => {
    const fn = consumer('webhooks');
    const queue = template.findResources('AWS::SQS::Queue')[logicalId(webhooks().queue)] as { Properties: { VisibilityTimeout: number } };
    expect(queue.Properties.VisibilityTimeout).toBe(QUEUES.webhooks.visibilitySeconds);
    expect(fn.props.Timeout).toBeGreaterThan(10);
    expect(fn.props.Timeout).toBeLessThan(queue.Properties.VisibilityTimeout);
  });

  it('runs like the route functions (Node.js 22+, arm64, bundled handler) with only the environment its work needs', () => {
    const { props } = consumer('webhooks');
    expect(Number(/^nodejs(\d+)\.x$/.exec(props.Runtime)?.[1])).toBeGreaterThanOrEqual(22);
    expect(props.Architectures).toEqual(['arm64']);
    expect(props.Handler).toBe('index.handler');
    const env = props.Environment.Variables as Record<string, unknown>;
    expect(Object.keys(env).sort()).toEqual([ENV.engine, ENV.queueUrls, ENV.serverSecretArn, ENV.tableName, ...RUNTIME_ENV_NAMES].sort());
    expect(env[ENV.engine]).toBe('aws');
    // The work queue's URL only: no dead-letter queue, no other queue.
    const urls = JSON.stringify(env[ENV.queueUrls]);
    expect(urls).toContain('\\"webhooks\\":');
    for (const id of otherQueueIds()) expect(urls).not.toContain(id);
  });

  it('sends to and consumes the webhooks work queue only, never a dead-letter queue', () => {
    const statements = allowedStatements(template, consumer('webhooks')).filter((s) => s.actions.some((a) => a.startsWith('sqs:')));
    const sends = statements.filter((s) => s.actions.includes('sqs:SendMessage'));
    expect(sends.length).toBeGreaterThanOrEqual(1);
    for (const s of statements) {
      expect(s.resources).toContain(logicalId(webhooks().queue));
      for (const id of otherQueueIds()) expect(s.resources).not.toContain(id);
    }
    // The event source mapping receives and deletes; nothing purges or reconfigures the queue.
    expect(actionsOf(statements)).toEqual(expect.arrayContaining(['sqs:ReceiveMessage', 'sqs:DeleteMessage']));
    expect(actionsOf(statements).filter((a) => /Purge|SetQueueAttributes|\*/.test(a))).toEqual([]);
  });

  it('reads the server secret (signing secrets are sealed with it) and uses no KMS key, signing least of all', () => {
    const { props } = consumer('webhooks');
    const statements = allowedStatements(template, consumer('webhooks'));
    const secretId = logicalId(stack.secret.secret);
    expect(actionsOf(statements.filter((s) => s.resources.includes(secretId))).sort()).toEqual(['secretsmanager:DescribeSecret', 'secretsmanager:GetSecretValue']);
    expect(JSON.stringify(props.Environment.Variables[ENV.serverSecretArn])).toContain(secretId);
    expect(actionsOf(statements).filter((a) => a.startsWith('kms:'))).toEqual([]);
    expect(actionsOf(statements)).not.toContain('kms:Sign');
  });

  it('reads subscriptions and events, and updates dead letters and counters only, by partition key', () => {
    const statements = allowedStatements(template, consumer('webhooks'));
    expectItemLevelTableAccess(statements);
    const dynamo = actionsOf(statements).filter((a) => a.startsWith('dynamodb:'));
    expect([...new Set(dynamo)].sort()).toEqual(['dynamodb:GetItem', 'dynamodb:UpdateItem']);
    expect(leadingKeysFor(statements, 'dynamodb:GetItem')).toEqual(DELIVERY_READ_KEYS);
    expect(leadingKeysFor(statements, 'dynamodb:UpdateItem')).toEqual(DELIVERY_WRITE_KEYS);
  });

  it('grants the very partition keys the domain uses: a delivery that retries and one that dies touch nothing else', async () => {
    const statements = allowedStatements(template, consumer('webhooks'));
    const { engine, touched, sent } = await recordingEngine();
    const m = { workspace_id: WS, subscription_id: SUB, event_id: EVT };
    // 10.0.0.1 is refused before any connection (url_destination_blocked): a failed attempt, offline.
    expect(await attemptDelivery(engine, { ...m, attempt: 1 })).toBe('retrying');
    expect(await attemptDelivery(engine, { ...m, attempt: 5 })).toBe('dead');
    expect(sent).toEqual(['webhooks']);
    const actions = new Set(touched.map((t) => t.action));
    expect([...actions].sort()).toEqual(['dynamodb:GetItem', 'dynamodb:UpdateItem']);
    for (const { action, pk } of touched) expect(covered(leadingKeysFor(statements, action), pk), `${action} ${pk}`).toBe(true);
    // The completed path writes the counters and the delivery log only, items the failed attempts wrote too.
    for (const pk of [statsKey(WS).pk, deadLetterKey(WS, EVT).pk, countedKey(WS, 'x').pk, deliveryLogKey(WS, SUB, EVT).pk]) expect(covered(DELIVERY_WRITE_KEYS, pk), pk).toBe(true);
    for (const pk of [subscriptionKey(WS, SUB).pk, eventKey(WS, EVT).pk]) expect(covered(DELIVERY_READ_KEYS, pk), pk).toBe(true);
  });
});

describe('outbox sweep', () => {
  it('runs every minute from an EventBridge rule that may invoke it', () => {
    const fn = consumer('outbox-sweep');
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: 'rate(1 minute)',
      State: 'ENABLED',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [fn.logicalId, 'Arn'] } })],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      FunctionName: { 'Fn::GetAtt': [fn.logicalId, 'Arn'] },
      Principal: 'events.amazonaws.com',
    });
    expect(fn.props.Timeout).toBeLessThanOrEqual(60);
  });

  it('queries and deletes outbox items only, sends to the webhooks work queue only, reads no secret', () => {
    const fn = consumer('outbox-sweep');
    const statements = allowedStatements(template, fn);
    expectItemLevelTableAccess(statements);
    expect([...new Set(actionsOf(statements).filter((a) => a.startsWith('dynamodb:')))].sort()).toEqual(['dynamodb:DeleteItem', 'dynamodb:Query']);
    expect(leadingKeysFor(statements, 'dynamodb:Query')).toEqual(OUTBOX_KEYS);
    expect(leadingKeysFor(statements, 'dynamodb:DeleteItem')).toEqual(OUTBOX_KEYS);
    const sqs = statements.filter((s) => s.actions.some((a) => a.startsWith('sqs:')));
    expect(actionsOf(sqs)).toContain('sqs:SendMessage');
    expect(actionsOf(sqs).filter((a) => /Receive|Delete|Purge/.test(a))).toEqual([]);
    for (const s of sqs) {
      expect(s.resources).toContain(logicalId(webhooks().queue));
      for (const id of otherQueueIds()) expect(s.resources).not.toContain(id);
    }
    expect(actionsOf(statements).filter((a) => a.startsWith('secretsmanager:') || a.startsWith('kms:'))).toEqual([]);
    expect(Object.keys(fn.props.Environment.Variables).sort()).toEqual([ENV.engine, ENV.queueUrls, ENV.tableName, ...RUNTIME_ENV_NAMES].sort());
  });

  it('grants the very partition keys the sweep touches', async () => {
    const statements = allowedStatements(template, consumer('outbox-sweep'));
    const { engine, touched, sent } = await recordingEngine();
    expect(await sweepOutbox(engine)).toBe(1);
    expect(sent).toEqual(['webhooks']);
    expect(touched.length).toBeGreaterThan(0);
    for (const { action, pk } of touched) expect(covered(leadingKeysFor(statements, action), pk), `${action} ${pk}`).toBe(true);
  });
});

describe('platform-events sweep', () => {
  const fn = () => consumer('platform-events-sweep');
  /** The work queues a publish sends to: webhook deliveries, and wakes of the streams whose inboxes it wrote. */
  const sendsTo = ['webhooks', 'streams'] as const;

  it('runs every minute from an EventBridge rule that may invoke it, with no retry', () => {
    const { logicalId: id, props } = fn();
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: `rate(${SWEEP.everyMinutes} minute)`,
      State: 'ENABLED',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [id, 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } })],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', {
      Action: 'lambda:InvokeFunction',
      FunctionName: { 'Fn::GetAtt': [id, 'Arn'] },
      Principal: 'events.amazonaws.com',
    });
    template.hasResourceProperties('AWS::Lambda::EventInvokeConfig', { FunctionName: { Ref: id }, MaximumRetryAttempts: 0 });
    expect(props.Timeout).toBeLessThanOrEqual(60);
    expect(props.Handler).toBe('index.handler');
    expect(props.Architectures).toEqual(['arm64']);
  });

  it("holds a publish's grants on its items only: each action on exactly its partition keys, nothing else", () => {
    const statements = allowedStatements(template, fn());
    expectItemLevelTableAccess(statements);
    const dynamo = [...new Set(actionsOf(statements).filter((a) => a.startsWith('dynamodb:')))].sort();
    // Written out, not read back from the constant: a widened grant fails here.
    const expected: Record<string, string[]> = {
      'dynamodb:DeleteItem': ['dchg#*', 'evout#*'],
      'dynamodb:GetItem': ['evkey#*'],
      'dynamodb:PutItem': ['evkey#*', 'evout#*', 'evt#*', 'inbox#*'],
      'dynamodb:Query': ['dchg#*', 'evsub#*'],
      'dynamodb:UpdateItem': ['evstat#*'],
    };
    expect(dynamo).toEqual(Object.keys(expected));
    for (const action of dynamo) expect([...leadingKeysFor(statements, action)].sort(), action).toEqual(expected[action]);
    expect(Object.fromEntries(Object.entries(PLATFORM_EVENTS_SWEEP_KEYS).map(([a, k]) => [a, [...k].sort()]))).toEqual(expected);
  });

  it('grants the partition keys of the domain key functions a sweep and its publish use, and no others', () => {
    const statements = allowedStatements(template, fn());
    const allows = (action: string, pk: string) => covered(leadingKeysFor(statements, action), pk);
    const used: [string, string][] = [
      ...Array.from({ length: CHANGE_OUTBOX_SHARDS }, (_, shard) => ['dynamodb:Query', changeOutboxPartition(shard)] as [string, string]),
      ['dynamodb:DeleteItem', changeOutboxPartition(CHANGE_OUTBOX_SHARDS - 1)],
      ['dynamodb:Query', subscriptionsPartition(WS)],
      ['dynamodb:GetItem', idempotencyKeyItem(WS, 'rec:shop:notes:r1:l:v1').pk],
      ['dynamodb:PutItem', idempotencyKeyItem(WS, 'rec:shop:notes:r1:l:v1').pk],
      ['dynamodb:PutItem', eventKey(WS, EVT).pk],
      ['dynamodb:PutItem', inboxKey(SUB, EVT).pk],
      ['dynamodb:PutItem', outboxKey(WS, EVT, SUB).pk],
      ['dynamodb:DeleteItem', outboxKey(WS, EVT, SUB).pk],
      ['dynamodb:UpdateItem', statsKey(WS).pk],
    ];
    for (const [action, pk] of used) expect(allows(action, pk), `${action} ${pk}`).toBe(true);
    for (const pk of Array.from({ length: CHANGE_OUTBOX_SHARDS }, (_, s) => changeOutboxPartition(s))) expect(covered(CHANGE_OUTBOX_KEYS, pk), pk).toBe(true);
    for (const pk of Array.from({ length: OUTBOX_SHARDS }, (_, s) => `evout#${s}`)) expect(covered(OUTBOX_KEYS, pk), pk).toBe(true);
    // What a publish never does: change a subscription, remove an event or a message, write a dead letter.
    const unused: [string, string][] = [
      ['dynamodb:PutItem', subscriptionKey(WS, SUB).pk],
      ['dynamodb:DeleteItem', eventKey(WS, EVT).pk],
      ['dynamodb:DeleteItem', inboxKey(SUB, EVT).pk],
      ['dynamodb:UpdateItem', deadLetterKey(WS, EVT).pk],
      ['dynamodb:GetItem', eventKey(WS, EVT).pk],
    ];
    for (const [action, pk] of unused) expect(allows(action, pk), `${action} ${pk}`).toBe(false);
  });

  it('sends to the webhooks and streams work queues only, reads no secret, and gets only their URLs, the table and the engine', () => {
    const { props } = fn();
    const statements = allowedStatements(template, fn());
    const sqs = statements.filter((s) => s.actions.some((a) => a.startsWith('sqs:')));
    expect(actionsOf(sqs)).toContain('sqs:SendMessage');
    expect(actionsOf(sqs).filter((a) => /Receive|Delete|Purge|SetQueueAttributes|\*/.test(a))).toEqual([]);
    const allowedIds = sendsTo.map((name) => logicalId(stack.queues.byName[name].queue));
    for (const name of sendsTo) expect(sqs.some((s) => s.resources.includes(logicalId(stack.queues.byName[name].queue))), name).toBe(true);
    for (const s of sqs) expect(allowedIds.some((id) => s.resources.includes(id)), s.resources).toBe(true);
    for (const [name, q] of Object.entries(stack.queues.byName)) {
      for (const s of sqs) {
        expect(s.resources, `${name}-dead`).not.toContain(logicalId(q.deadLetterQueue));
        if (!(sendsTo as readonly string[]).includes(name)) expect(s.resources, name).not.toContain(logicalId(q.queue));
      }
    }
    expect(actionsOf(statements).filter((a) => a.startsWith('secretsmanager:') || a.startsWith('kms:') || a.startsWith('execute-api:'))).toEqual([]);
    const env = props.Environment.Variables as Record<string, unknown>;
    expect(Object.keys(env).sort()).toEqual([ENV.engine, ENV.queueUrls, ENV.tableName, ...RUNTIME_ENV_NAMES].sort());
    const urls = JSON.stringify(env[ENV.queueUrls]);
    for (const name of sendsTo) expect(urls).toContain(`\\"${name}\\":`);
    for (const [name, q] of Object.entries(stack.queues.byName)) {
      expect(urls).not.toContain(logicalId(q.deadLetterQueue));
      if (!(sendsTo as readonly string[]).includes(name)) expect(urls).not.toContain(logicalId(q.queue));
    }
  });
});

describe('alarms', () => {
  const alarmOn = (metricName: string, queue: { node: { defaultChild?: unknown } }) =>
    template.findResources('AWS::CloudWatch::Alarm', {
      Properties: {
        Namespace: 'AWS/SQS',
        MetricName: metricName,
        Dimensions: [{ Name: 'QueueName', Value: { 'Fn::GetAtt': [logicalId(queue), 'QueueName'] } }],
      },
    }) as Record<string, { Properties: Record<string, unknown> }>;

  it('alarms as soon as webhooks-dead holds a message', () => {
    const found = Object.values(alarmOn('ApproximateNumberOfMessagesVisible', webhooks().deadLetterQueue));
    expect(found).toHaveLength(1);
    expect(found[0].Properties).toMatchObject({ ComparisonOperator: 'GreaterThanThreshold', Threshold: 0, EvaluationPeriods: 1, Statistic: 'Maximum' });
  });

  it(`alarms when the oldest webhooks message waits over ${QUEUE_AGE_ALARM_SECONDS.webhooks} s, longer than any retry delay`, () => {
    const found = Object.values(alarmOn('ApproximateAgeOfOldestMessage', webhooks().queue));
    expect(found).toHaveLength(1);
    expect(found[0].Properties).toMatchObject({ ComparisonOperator: 'GreaterThanThreshold', Threshold: QUEUE_AGE_ALARM_SECONDS.webhooks, Statistic: 'Maximum' });
    expect(QUEUE_AGE_ALARM_SECONDS.webhooks).toBeGreaterThan(Math.max(...Array.from({ length: MAX_ATTEMPTS }, (_, i) => retryDelaySeconds(i + 1))));
  });

  it(`alarms when more than ${WEBHOOK_FAILURES.attempts} attempts fail in ${WEBHOOK_FAILURES.period.toMinutes()} minutes, counted from the line the delivery logs`, () => {
    // The filter matches the very message the domain writes at a failed attempt.
    expect(WEBHOOK_FAILURES.logMessage).toBe(ATTEMPT_FAILED_LOG);
    const delivery = consumerFunction(template, 'webhooks');
    const filters = Object.values(template.findResources('AWS::Logs::MetricFilter')) as { Properties: any }[];
    expect(filters).toHaveLength(1);
    expect(filters[0].Properties.LogGroupName).toEqual({ Ref: delivery.props.LoggingConfig.LogGroup.Ref });
    expect(filters[0].Properties.FilterPattern).toBe(`{ $.message = "${ATTEMPT_FAILED_LOG}" }`);
    const { MetricName, MetricNamespace } = filters[0].Properties.MetricTransformations[0];
    const found = Object.values(template.findResources('AWS::CloudWatch::Alarm', { Properties: { MetricName, Namespace: MetricNamespace } })) as { Properties: any }[];
    expect(found).toHaveLength(1);
    expect(found[0].Properties).toMatchObject({ Threshold: WEBHOOK_FAILURES.attempts, Statistic: 'Sum', Period: WEBHOOK_FAILURES.period.toSeconds(), AlarmActions: [expect.anything()] });
  });
});

// ---------- an engine that records the items each call touches, as IAM sees them ----------

const WS = newId('ws');
const SUB = newId('sub');
/** Older than the outbox's grace period, so the sweep takes its entry. */
const EVT = newId('evt', Date.now() - 120_000);

const ACTION = { get: 'dynamodb:GetItem', put: 'dynamodb:PutItem', update: 'dynamodb:UpdateItem', delete: 'dynamodb:DeleteItem', query: 'dynamodb:Query' } as const;

async function recordingEngine() {
  const touched: { action: string; pk: string }[] = [];
  const sent: string[] = [];
  const secret = { get: async () => new Uint8Array(32).fill(7) };
  const now = Date.now();
  const subscription = {
    ...subscriptionKey(WS, SUB),
    subscription_id: SUB,
    workspace_id: WS,
    types: ['*'],
    delivery: { mode: 'webhook', url: 'https://10.0.0.1/hook' },
    created_at: new Date(now - 60_000).toISOString(),
    secrets: [{ sealed: await sealSigningSecret(secret, SUB, 'whsec_test'), created_at: new Date(now - 60_000).toISOString(), expires_at: null }],
  };
  const items = new Map<string, KvItem>([
    [JSON.stringify(subscriptionKey(WS, SUB)), subscription as unknown as KvItem],
    [JSON.stringify(eventKey(WS, EVT)), { ...eventKey(WS, EVT), type: 'order.created', envelope: JSON.stringify({ id: EVT }) } as KvItem],
  ]);
  const outbox = outboxKey(WS, EVT, SUB);
  const record = (op: keyof typeof ACTION, pk: unknown) => touched.push({ action: ACTION[op], pk: String(pk) });
  const kv = {
    get: async (key: { pk: string; sk: string }) => (record('get', key.pk), items.get(JSON.stringify({ pk: key.pk, sk: key.sk }))),
    put: async (item: KvItem) => void record('put', item.pk),
    update: async (u: { key: { pk: string } }) => (record('update', u.key.pk), {}),
    delete: async (key: { pk: string }) => void record('delete', key.pk),
    query: async (q: { pk: string }) => (record('query', q.pk), { items: q.pk === outbox.pk ? [outbox] : [] }),
    // TransactWriteItems is authorized per item by its action (an update as UpdateItem).
    transact: async (writes: Record<string, { pk: string }>[]) => {
      for (const w of writes) for (const op of ['put', 'update', 'delete'] as const) if (w[op]) record(op, op === 'put' ? w.put.pk : w[op].pk);
    },
  };
  const unexpected = (what: string) => () => {
    throw new Error(`the consumer used ${what}: grant it in lib/webhook-delivery.ts and test it here`);
  };
  const engine = {
    name: 'aws',
    kv: new Proxy(kv, { get: (t, p) => (p in t ? t[p as keyof typeof t] : unexpected(`kv.${String(p)}`)) }),
    queue: { send: async (queue: string) => (sent.push(queue), 'm-1') },
    secret,
    clock: { now: () => Date.now() },
  } as unknown as Engine;
  return { engine, touched, sent };
}
