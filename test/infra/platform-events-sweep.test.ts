/**
 * The platform-events sweep's function (lambdas/consumers/platform-events-sweep.ts) run as in AWS: its
 * handler over the AWS adapters, DynamoDB on dynalite (TransactWriteItems emulated) and SQS on a client
 * mock. Stale `dchg#` outbox items become published events in the writer's workspace (a pull
 * subscription leases them, a webhook subscription's delivery is queued) and are deleted; an item whose
 * events had already gone out publishes nothing twice. Every DynamoDB request the adapter sends
 * meanwhile is checked against the role the stack synthesizes for the function (lib/webhook-delivery.ts),
 * and every grant it holds is used: the grants are exactly what the sweep needs.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { Template } from 'aws-cdk-lib/assertions';
import { mockClient } from 'aws-sdk-client-mock';
import { SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import { BatchGetCommand, DeleteCommand, GetCommand, PutCommand, QueryCommand, TransactWriteCommand, UpdateCommand } from '@aws-sdk/lib-dynamodb';
import { handler } from '../../lambdas/consumers/platform-events-sweep.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { SqsQueue } from '../../lambdas/engine/aws/queue.js';
import { TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Engine, KvItem } from '../../lambdas/engine/ports.js';
import type { Principal } from '../../lambdas/auth/principal.js';
import {
  bindChangeFeed,
  CHANGE_OUTBOX_GRACE_MS,
  CHANGE_OUTBOX_SHARDS,
  changeKey,
  changeOutboxPartition,
  planChangeOutbox,
  recordChangeData,
  type Change,
  type PlannedOutbox,
} from '../../lambdas/data/change-outbox.js';
import { pull } from '../../lambdas/events/inbox.js';
import { subscriptionKey } from '../../lambdas/events/keys.js';
import { OUTBOX_SHARDS } from '../../lambdas/events/outbox.js';
import { platformEventFeed, publishChanges } from '../../lambdas/events/platform-events.js';
import { statsKey } from '../../lambdas/events/stats.js';
import { Subscriptions } from '../../lambdas/events/subscriptions.js';
import { newId } from '../../lambdas/shared/ids.js';
import { startDynalite, type DynaliteTable } from '../helpers/dynalite.js';
import { emulateTransactions, type TransactionEmulation } from '../helpers/dynalite-transactions.js';
import { unusedPort } from './function-access.js';
import { allowedStatements, leadingKeyPattern, synthStack, type AllowStatement, consumerFunction, logicalIdIn, flatTemplate } from './helpers.js';

/** The function's QUEUE_URLS: the two work queues a publish sends to, nothing else. */
const URLS = { webhooks: 'https://sqs.us-east-1.amazonaws.com/111122223333/webhooks', streams: 'https://sqs.us-east-1.amazonaws.com/111122223333/streams' };
const sqs = mockClient(SQSClient);
sqs.on(SendMessageCommand).resolves({ MessageId: 'm-1' });

const WS = newId('ws');
const principal: Principal = {
  kind: 'secret_key',
  credentialId: newId('key'),
  organizationId: newId('org'),
  applicationId: newId('app'),
  workspaceId: WS,
  capabilities: [],
  userId: null,
  claims: null,
  origins: null,
  permissions: null,
};

let dynamo: DynaliteTable;
let emulation: TransactionEmulation;
let engine: Engine;
let statements: AllowStatement[];
let tableArn: string;
/** Logical id of each work queue's and dead-letter queue's SQS resource, by queue name. */
let queueIds: Record<string, { queue: string; deadLetterQueue: string }>;
const clock = new ManualClock(Date.UTC(2026, 10, 26, 12));

beforeAll(async () => {
  const { stack } = synthStack();
  const template = flatTemplate(stack);
  statements = allowedStatements(template, consumerFunction(template, 'platform-events-sweep'));
  const logicalId = (c: { node: { defaultChild?: unknown } }) => logicalIdIn(stack, c);
  tableArn = JSON.stringify({ 'Fn::GetAtt': [logicalId(stack.storage.table), 'Arn'] });
  queueIds = Object.fromEntries(Object.entries(stack.queues.byName).map(([name, q]) => [name, { queue: logicalId(q.queue), deadLetterQueue: logicalId(q.deadLetterQueue) }]));

  dynamo = await startDynalite();
  emulation = await emulateTransactions(dynamo);
  // Only what the function's environment configures: the table and the two work queues. Any other
  // port (the server secret above all: the function is granted none) fails the sweep loudly.
  engine = {
    name: 'aws',
    kv: new DynamoKeyValueStore(dynamo.client, dynamo.tableName, clock),
    queue: new SqsQueue(new SQSClient({ region: 'us-east-1' }), URLS),
    blobs: unusedPort('blobs'),
    // As the AWS gateway (engine/aws/connections.ts): API Gateway holds the sockets, so a publish wakes
    // the streams of the inboxes it wrote through the `streams` queue; it posts nothing itself.
    connections: new Proxy({ holdsSockets: false }, { get: (t, p) => (p === 'holdsSockets' ? t.holdsSockets : (unusedPort('connections') as Record<PropertyKey, unknown>)[p]) }),
    signer: unusedPort('signer'),
    secret: unusedPort('secret'),
    clock,
    async close() {},
  } as unknown as Engine;
  useEngine(engine);
}, 120_000);

afterAll(async () => {
  sqs.restore();
  emulation?.restore();
  await dynamo?.close();
});

// ---------- the DynamoDB requests of the function's adapter, as IAM authorizes them ----------

type Access = { action: string; pk: string };

/** The (action, partition key) pairs IAM checks for one request (TransactWriteItems: per item, by its action). */
function accessesOf(command: unknown): Access[] {
  const PK = TABLE_SCHEMA.partitionKey;
  const pkOf = (item: Record<string, unknown> | undefined) => String(item?.[PK]);
  if (command instanceof GetCommand) return [{ action: 'dynamodb:GetItem', pk: pkOf(command.input.Key) }];
  if (command instanceof PutCommand) return [{ action: 'dynamodb:PutItem', pk: pkOf(command.input.Item) }];
  if (command instanceof UpdateCommand) return [{ action: 'dynamodb:UpdateItem', pk: pkOf(command.input.Key) }];
  if (command instanceof DeleteCommand) return [{ action: 'dynamodb:DeleteItem', pk: pkOf(command.input.Key) }];
  if (command instanceof BatchGetCommand) {
    return Object.values(command.input.RequestItems ?? {}).flatMap((r) => (r.Keys ?? []).map((k) => ({ action: 'dynamodb:BatchGetItem', pk: pkOf(k) })));
  }
  if (command instanceof QueryCommand) {
    const { IndexName, KeyConditionExpression, ExpressionAttributeNames, ExpressionAttributeValues } = command.input;
    // On an index, LeadingKeys would have to be checked against the index's key: the sweep queries none.
    if (IndexName) throw new Error(`the sweep queried index ${IndexName}`);
    const m = /^(#\w+) = (:\w+)/.exec(KeyConditionExpression ?? '');
    if (!m || ExpressionAttributeNames?.[m[1]] !== PK) throw new Error(`unexpected key condition ${KeyConditionExpression}`);
    return [{ action: 'dynamodb:Query', pk: String(ExpressionAttributeValues?.[m[2]]) }];
  }
  if (command instanceof TransactWriteCommand) {
    return (command.input.TransactItems ?? []).map((t) => {
      if (t.Put) return { action: 'dynamodb:PutItem', pk: pkOf(t.Put.Item) };
      if (t.Update) return { action: 'dynamodb:UpdateItem', pk: pkOf(t.Update.Key) };
      if (t.Delete) return { action: 'dynamodb:DeleteItem', pk: pkOf(t.Delete.Key) };
      return { action: 'dynamodb:ConditionCheckItem', pk: pkOf(t.ConditionCheck?.Key) };
    });
  }
  throw new Error(`unexpected DynamoDB request ${(command as object).constructor.name}`);
}

/** Requests sent through the adapter's client (the emulation's own requests go through another client) since call `from`. */
function adapterAccesses(from: number): Access[] {
  return emulation.stub
    .calls()
    .slice(from)
    .filter((c) => (c.thisValue as { config?: unknown }).config === dynamo.client.config)
    .flatMap((c) => accessesOf(c.args[0]));
}

const like = leadingKeyPattern;

/** The statements allowing `action` on the table, each with its LeadingKeys patterns. */
function grantedKeys(action: string): string[][] {
  return statements
    .filter((s) => s.actions.includes(action) && s.resources === tableArn)
    .map((s) => {
      const keys = s.condition?.['ForAllValues:StringLike']?.['dynamodb:LeadingKeys'];
      if (!Array.isArray(keys)) throw new Error(`${action} is granted without a dynamodb:LeadingKeys condition`);
      return keys as string[];
    });
}

const allowed = ({ action, pk }: Access) => grantedKeys(action).some((keys) => keys.some((k) => like(k).test(pk)));

// ---------- the outbox items a crashed write leaves ----------

const change = (id: string): Change => ({
  type: 'record.created',
  idempotency_key: changeKey(['rec', 'shop', 'notes', id, 'life1', 'v1']),
  data: recordChangeData('shop', 'notes', { id, version: 1, title: `note ${id}` }),
});

/** A write's outbox item, planned and written as the Data module does it inside its transaction. */
async function leaveOutboxItem(changes: Change[]): Promise<PlannedOutbox> {
  const planned = await planChangeOutbox({ engine, principal }, changes.map((c) => c.type));
  if (!planned) throw new Error('the change feed did not want the changes');
  await engine.kv.put(planned.write(changes).put);
  return planned;
}

async function outboxItems(prefix: (shard: number) => string, shards: number): Promise<KvItem[]> {
  const out: KvItem[] = [];
  for (let shard = 0; shard < shards; shard++) out.push(...(await engine.kv.query({ pk: prefix(shard) })).items);
  return out;
}

it('publishes stale dchg# items into the writer workspace and deletes them, with exactly the grants the stack gives it', async () => {
  const pullSub = await new Subscriptions(engine).create(WS, { types: ['record.*'], delivery: { mode: 'pull' } });
  // A webhook subscription as stored (publish reads its types and mode only; no destination check here).
  const hookId = newId('sub', clock.now());
  await engine.kv.put({
    ...subscriptionKey(WS, hookId),
    subscription_id: hookId,
    workspace_id: WS,
    types: ['record.created'],
    delivery: { mode: 'webhook', url: 'https://hooks.example.com/in' },
    created_at: new Date(clock.now()).toISOString(),
  } as unknown as KvItem);

  const unbind = bindChangeFeed(platformEventFeed);
  try {
    // A: the write published its events, then stopped before deleting its item.
    const a = await leaveOutboxItem([change('a1')]);
    await publishChanges(engine, a.entry([change('a1')]));
    // B: the write stopped right after its commit: nothing published.
    await leaveOutboxItem([change('b1'), change('b2')]);
    clock.advance(CHANGE_OUTBOX_GRACE_MS + 1);
    // C: a write still inside the grace period (its own publish may be running): left alone.
    const c = await leaveOutboxItem([change('c1')]);
    const sendsBefore = sqs.commandCalls(SendMessageCommand).length;
    const callsBefore = emulation.stub.calls().length;

    expect(await handler()).toEqual({ swept: 2 });

    const accesses = adapterAccesses(callsBefore);
    // Only C's item is left.
    expect((await outboxItems(changeOutboxPartition, CHANGE_OUTBOX_SHARDS)).map((i) => i.sk)).toEqual([c.entry([]).key.sk]);

    // Every event once: A's from its write (a duplicate now), B's from the sweep, in the writer's workspace.
    const messages = await pull(engine, pullSub.subscription_id, 10, 30);
    expect(messages.map((m) => m.idempotency_key)).toEqual(['a1', 'b1', 'b2'].map((id) => change(id).idempotency_key));
    for (const m of messages) {
      expect(m).toMatchObject({ type: 'record.created', source: principal.applicationId, tenant: { workspace_id: WS, organization_id: principal.organizationId } });
    }
    expect(messages.slice(1).map((m) => m.data)).toEqual([JSON.parse(change('b1').data), JSON.parse(change('b2').data)]);
    const stats = await engine.kv.query({ pk: statsKey(WS).pk });
    expect(stats.items.reduce((n, i) => n + Number(i.published ?? 0), 0)).toBe(3);

    // B's webhook deliveries were queued to the webhooks queue (their outbox entries removed), and the
    // pull subscription's streams woken once through the streams queue; no other queue.
    const sends = sqs.commandCalls(SendMessageCommand).slice(sendsBefore).map((s) => s.args[0].input);
    const bodiesTo = (url: string) => sends.filter((s) => s.QueueUrl === url).map((s) => JSON.parse(s.MessageBody!) as unknown);
    expect(bodiesTo(URLS.webhooks)).toEqual(messages.slice(1).map((m) => ({ workspace_id: WS, subscription_id: hookId, event_id: m.event_id, attempt: 1 })));
    expect(bodiesTo(URLS.streams)).toEqual([{ subscription_id: pullSub.subscription_id }]);
    expect(sends).toHaveLength(3);
    // The role may send to exactly those two work queues.
    const sqsSends = statements.filter((s) => s.actions.includes('sqs:SendMessage'));
    for (const name of Object.keys(queueIds)) {
      const granted = sqsSends.some((s) => s.resources.includes(`"${queueIds[name].queue}"`));
      expect(granted, `SendMessage to ${name}`).toBe(name in URLS);
      expect(sqsSends.some((s) => s.resources.includes(`"${queueIds[name].deadLetterQueue}"`)), `SendMessage to ${name}'s dead letters`).toBe(false);
    }
    expect(await outboxItems((shard) => `evout#${shard}`, OUTBOX_SHARDS)).toEqual([]);

    // Every request the sweep sent is allowed by the function's role...
    expect(accesses.length).toBeGreaterThan(0);
    for (const a of accesses) expect(allowed(a), `${a.action} ${a.pk}`).toBe(true);
    // ...and every grant the role holds was needed: each action and leading-key pattern was used.
    const dynamoActions = [...new Set(statements.flatMap((s) => s.actions).filter((x) => x.startsWith('dynamodb:')))];
    for (const action of dynamoActions) {
      for (const pattern of grantedKeys(action).flat()) {
        expect(accesses.some((a) => a.action === action && like(pattern).test(a.pk)), `${action} on ${pattern} unused`).toBe(true);
      }
    }
    // The re-publish of A's event is the duplicate path: its idempotency key is read back.
    expect(accesses).toContainEqual({ action: 'dynamodb:GetItem', pk: `evkey#${WS}` });
  } finally {
    unbind();
  }
});
