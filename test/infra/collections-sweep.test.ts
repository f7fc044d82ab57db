/**
 * The collections sweep's function (lambdas/consumers/collections-sweep.ts) run as in AWS: its handler
 * over the AWS key-value adapter on dynalite (TransactWriteItems emulated). A due entry removes its expired collection's item and
 * itself; an entry not yet due stays; more than a batch is swept in one run, and a spent budget stops
 * after one batch. Every DynamoDB request it sends (each write of a transaction included) is checked
 * against the role the stack synthesizes for it (lib/collections-sweep.ts), and every grant the role
 * holds is used; the rule runs it every 5 minutes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Match, type Template } from 'aws-cdk-lib/assertions';
import { COLLECTIONS_SWEEP, handler, sweepCollections } from '../../lambdas/consumers/collections-sweep.js';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import { useEngine } from '../../lambdas/engine/index.js';
import type { Engine } from '../../lambdas/engine/ports.js';
import { collectionKey, collectionSweepKey, COLLECTION_SWEEP_PARTITION } from '../../lambdas/knowledge/collection-keys.js';
import { ENV } from '../../lambdas/shared/settings.js';
import { COLLECTIONS_SWEEP_RUN } from '../../lib/collections-sweep.js';
import { startDynalite, type DynaliteTable } from '../helpers/dynalite.js';
import { emulateTransactions, type TransactionEmulation } from '../helpers/dynalite-transactions.js';
import { dynamoAccesses, grantedLeadingKeys, unusedPort, type Access } from './function-access.js';
import { allowedStatements, consumerFunction, flatTemplate, leadingKeyPattern, logicalIdIn, RUNTIME_ENV_NAMES, synthStack, type AllowStatement } from './helpers.js';

const ORG = 'org_1';
const WS = 'ws_1';
const clock = new ManualClock(Date.UTC(2026, 10, 27, 12));
const nowSeconds = () => Math.floor(clock.now() / 1000);

let template: Template;
let fn: ReturnType<typeof consumerFunction>;
let statements: AllowStatement[];
let tableArn: string;
let dynamo: DynaliteTable;
let engine: Engine;
let emulation: TransactionEmulation;

beforeAll(async () => {
  const { stack } = synthStack();
  template = flatTemplate(stack);
  fn = consumerFunction(template, 'collections-sweep');
  statements = allowedStatements(template, fn);
  tableArn = JSON.stringify({ 'Fn::GetAtt': [logicalIdIn(stack, stack.storage.table), 'Arn'] });

  dynamo = await startDynalite();
  emulation = await emulateTransactions(dynamo);
  // Only what the function's environment configures: the table.
  engine = {
    name: 'aws',
    kv: new DynamoKeyValueStore(dynamo.client, dynamo.tableName, clock),
    blobs: unusedPort('blobs'),
    queue: unusedPort('queue'),
    connections: unusedPort('connections'),
    vectors: unusedPort('vectors'),
    signer: unusedPort('signer'),
    secret: unusedPort('secret'),
    clock,
    async close() {},
  } as unknown as Engine;
  useEngine(engine);
}, 120_000);

afterAll(async () => {
  emulation?.restore();
  await dynamo?.close();
});

// ---------- what the function's adapter sends, as IAM authorizes it ----------

/** Requests sent through the adapter's client (the emulation's own go through another client) since call `from`. */
const sentSince = (from: number) =>
  emulation.stub
    .calls()
    .slice(from)
    .filter((c) => (c.thisValue as { config?: unknown }).config === dynamo.client.config)
    .map((c) => c.args[0] as unknown);

const granted = (action: string) => grantedLeadingKeys(statements, tableArn, action);
const allowed = ({ action, on }: Access) => granted(action).some((p) => leadingKeyPattern(p).test(on));

// ---------- what expired collections leave ----------

/** A collection (its live item and its sweep entry) ending at `at`. */
async function collection(id: string, at: number): Promise<void> {
  await engine.kv.put({ ...collectionKey(ORG, WS, id), mode: 'download', ends_at: at, expires_at: at });
  await engine.kv.put({ ...collectionSweepKey(at, ORG, WS, id), mode: 'download', vector_database_id: null });
}

async function clearSweepPartition(): Promise<void> {
  for (const item of (await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items) await engine.kv.delete({ pk: item.pk, sk: item.sk });
}

const liveIds = async () => (await engine.kv.query({ pk: collectionKey(ORG, WS, 'x').pk })).items.map((i) => String(i.sk));

describe('the collections sweep in AWS', () => {
  it('runs every 5 minutes from an EventBridge rule, not retried, with the table only in its environment', () => {
    template.hasResourceProperties('AWS::Events::Rule', {
      ScheduleExpression: `rate(${COLLECTIONS_SWEEP_RUN.everyMinutes} minutes)`,
      State: 'ENABLED',
      Targets: [Match.objectLike({ Arn: { 'Fn::GetAtt': [fn.logicalId, 'Arn'] }, RetryPolicy: { MaximumRetryAttempts: 0 } })],
    });
    template.hasResourceProperties('AWS::Lambda::Permission', { Action: 'lambda:InvokeFunction', FunctionName: { 'Fn::GetAtt': [fn.logicalId, 'Arn'] }, Principal: 'events.amazonaws.com' });
    expect(fn.props.Timeout).toBe(COLLECTIONS_SWEEP_RUN.timeoutSeconds);
    expect(COLLECTIONS_SWEEP.budgetMs).toBeLessThanOrEqual((COLLECTIONS_SWEEP_RUN.timeoutSeconds * 1000) / 2);
    expect(Object.keys(fn.props.Environment.Variables).sort()).toEqual([ENV.engine, ENV.tableName, ...RUNTIME_ENV_NAMES].sort());
    template.hasResourceProperties('AWS::CloudWatch::Alarm', { AlarmName: Match.stringLikeRegexp('-collections-sweep-errors$') });
    // Nothing but the table (and its logs).
    expect(statements.flatMap((s) => s.actions).filter((a) => !/^(dynamodb|logs):/.test(a))).toEqual([]);
  });

  it('removes expired collections with exactly the grants the stack gives it', async () => {
    await clearSweepPartition();
    const now = nowSeconds();
    await collection('col_expired_a', now - 10);
    await collection('col_expired_b', now - 5);
    // Not due yet: stays.
    await collection('col_later', now + 60);

    const from = emulation.stub.calls().length;
    expect(await handler()).toEqual({ swept: 2 });
    const accesses = sentSince(from).flatMap(dynamoAccesses);

    expect((await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items.map((i) => i.sk)).toEqual([collectionSweepKey(now + 60, ORG, WS, 'col_later').sk]);
    expect(await liveIds()).toEqual(['col_later']);

    // Every request is allowed by the function's role...
    expect(accesses.length).toBeGreaterThan(0);
    for (const a of accesses) expect(allowed(a), `${a.action} ${a.on}`).toBe(true);
    // ...and every grant it holds was used.
    const actions = [...new Set(statements.flatMap((s) => s.actions).filter((a) => a.startsWith('dynamodb:')))];
    expect(actions.sort()).toEqual(['dynamodb:DeleteItem', 'dynamodb:Query']);
    for (const action of actions) {
      for (const pattern of granted(action)) expect(accesses.some((a) => a.action === action && leadingKeyPattern(pattern).test(a.on)), `${action} on ${pattern} unused`).toBe(true);
    }
  });

  it('sweeps more than a batch in one run, and a spent budget stops after one batch', async () => {
    await clearSweepPartition();
    const now = nowSeconds();
    const count = COLLECTIONS_SWEEP.batch + 20;
    for (let i = 0; i < count; i++) await collection(`col_bulk_${String(i).padStart(4, '0')}`, now - 1);
    expect(await sweepCollections(engine, 0)).toBe(COLLECTIONS_SWEEP.batch);
    expect((await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items).toHaveLength(20);
    for (let i = 0; i < count; i++) await collection(`col_more_${String(i).padStart(4, '0')}`, now - 1);
    expect(await handler()).toEqual({ swept: count + 20 });
    expect((await engine.kv.query({ pk: COLLECTION_SWEEP_PARTITION })).items).toEqual([]);
    expect((await liveIds()).filter((id) => id.startsWith('col_bulk_') || id.startsWith('col_more_'))).toEqual([]);
  }, 60_000);
});
