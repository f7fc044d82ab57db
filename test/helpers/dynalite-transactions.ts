/**
 * TransactWriteItems for dynalite, which lacks it.
 *
 * This is an EMULATION of a DynamoDB feature, not a mock of our engine: the AWS adapter runs
 * unchanged and sends its real TransactWriteItems requests; they are executed against dynalite with
 * DynamoDB's semantics, using only operations dynalite implements:
 *
 * 1. Validation: 1 to 100 actions, no two on one item (DynamoDB answers a ValidationException).
 * 2. Every condition is evaluated first, by dynalite's own expression evaluator: the item is read
 *    (GetItem, ConsistentRead), copied to a scratch table under the same key (or the scratch key is
 *    cleared when the item is absent), and the condition is run there as a conditional DeleteItem.
 * 3. When any condition fails, nothing is written and a real `TransactionCanceledException` is
 *    thrown, with one CancellationReason per action (`None` or `ConditionalCheckFailed`), as DynamoDB
 *    does. Otherwise every Put / Update / Delete is applied, each still carrying its condition.
 *
 * Isolation: emulated transactions run one at a time, so they are serializable among themselves.
 * A plain (non-transactional) write that lands between the check and the apply of a transaction is
 * not isolated from it the way DynamoDB isolates it; if it makes an applied condition fail, the
 * emulation throws loudly (the transaction may then be half applied), so a test can never pass
 * because of it. The service tests that use this drive requests one at a time.
 *
 * The adapter sends through a DynamoDBDocumentClient, which shares the DynamoDBClient's middleware
 * stack but not its `send`: a mock of the DynamoDBClient instance never sees those requests. So the
 * interception is on DynamoDBDocumentClient (aws-sdk-client-mock stubs its prototype's `send`):
 * TransactWriteCommand goes to the emulation, every other command passes through to dynalite.
 */
import { mockClient, type AwsClientStub } from 'aws-sdk-client-mock';
import {
  ConditionalCheckFailedException,
  CreateTableCommand,
  DescribeTableCommand,
  DynamoDBClient,
  TransactionCanceledException,
  type CancellationReason,
} from '@aws-sdk/client-dynamodb';
import {
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  TransactWriteCommand,
  UpdateCommand,
  type TransactWriteCommandInput,
} from '@aws-sdk/lib-dynamodb';
import { TABLE_SCHEMA } from '../../lambdas/engine/aws/table.js';
import type { DynaliteTable } from './dynalite.js';

type Action = NonNullable<TransactWriteCommandInput['TransactItems']>[number];
type Key = Record<string, unknown>;
interface Expressions {
  ConditionExpression?: string;
  ExpressionAttributeNames?: Record<string, string>;
  ExpressionAttributeValues?: Record<string, unknown>;
}

export interface TransactionEmulation {
  /** The stub (e.g. to count TransactWriteCommand calls). */
  stub: AwsClientStub<DynamoDBDocumentClient>;
  /** Transactions executed, and how many of them were canceled. */
  stats: { executed: number; canceled: number };
  restore(): void;
}

const validation = (message: string) => Object.assign(new Error(message), { name: 'ValidationException', $fault: 'client', $metadata: {} });

/** Installs the emulation for every DynamoDBDocumentClient of this process (restore() removes it). */
export async function emulateTransactions(table: DynaliteTable): Promise<TransactionEmulation> {
  // The emulation's own client. Its document client is stubbed too (the stub is on the prototype),
  // but only TransactWriteCommand is intercepted and the emulation never sends one.
  const raw = new DynamoDBClient({ endpoint: table.endpoint, region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
  const doc = DynamoDBDocumentClient.from(raw, { marshallOptions: { removeUndefinedValues: true } });
  const scratch = `${table.tableName}-transaction-scratch`;
  const keyNames = [TABLE_SCHEMA.partitionKey, TABLE_SCHEMA.sortKey];
  await createScratchTable(raw, scratch, keyNames);

  const keyOf = (item: Record<string, unknown>): Key => Object.fromEntries(keyNames.map((k) => [k, item[k]]));
  const target = (a: Action): { TableName: string; Key: Key } & Expressions => {
    if (a.Put) return { ...a.Put, TableName: a.Put.TableName!, Key: keyOf(a.Put.Item!) };
    if (a.Update) return { ...a.Update, TableName: a.Update.TableName!, Key: a.Update.Key! };
    if (a.Delete) return { ...a.Delete, TableName: a.Delete.TableName!, Key: a.Delete.Key! };
    if (a.ConditionCheck) return { ...a.ConditionCheck, TableName: a.ConditionCheck.TableName!, Key: a.ConditionCheck.Key! };
    throw validation('Each TransactItem must name exactly one of Put, Update, Delete, ConditionCheck');
  };

  /** Evaluates one action's condition against the item stored now. */
  const conditionHolds = async (a: Action): Promise<boolean> => {
    const t = target(a);
    if (!t.ConditionExpression) return true;
    const current = (await doc.send(new GetCommand({ TableName: t.TableName, Key: t.Key, ConsistentRead: true }))).Item;
    if (current) await doc.send(new PutCommand({ TableName: scratch, Item: current }));
    else await doc.send(new DeleteCommand({ TableName: scratch, Key: t.Key }));
    try {
      await doc.send(new DeleteCommand({ TableName: scratch, Key: t.Key, ...conditionOnly(t) }));
      return true;
    } catch (err) {
      if (err instanceof ConditionalCheckFailedException) return false;
      throw err;
    } finally {
      await doc.send(new DeleteCommand({ TableName: scratch, Key: t.Key }));
    }
  };

  const apply = async (a: Action): Promise<void> => {
    if (a.Put) await doc.send(new PutCommand(a.Put));
    else if (a.Update) await doc.send(new UpdateCommand(a.Update));
    else if (a.Delete) await doc.send(new DeleteCommand(a.Delete));
  };

  const stats = { executed: 0, canceled: 0 };
  const execute = async (input: TransactWriteCommandInput) => {
    const actions = input.TransactItems ?? [];
    if (actions.length < 1 || actions.length > 100) {
      throw validation('Member must have length less than or equal to 100 and greater than or equal to 1');
    }
    const seen = new Set<string>();
    for (const a of actions) {
      const t = target(a);
      const id = JSON.stringify([t.TableName, ...keyNames.map((k) => t.Key[k])]);
      if (seen.has(id)) throw validation('Transaction request cannot include multiple operations on one item');
      seen.add(id);
    }
    stats.executed++;
    // Actions touch distinct items, so their conditions can be evaluated side by side (each has its scratch key).
    const holds = await Promise.all(actions.map(conditionHolds));
    if (holds.includes(false)) {
      stats.canceled++;
      const reasons: CancellationReason[] = holds.map((ok) =>
        ok ? { Code: 'None' } : { Code: 'ConditionalCheckFailed', Message: 'The conditional request failed' },
      );
      throw new TransactionCanceledException({
        $metadata: { httpStatusCode: 400 },
        message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${reasons.map((r) => r.Code).join(', ')}]`,
        CancellationReasons: reasons,
      });
    }
    for (const a of actions) {
      try {
        await apply(a);
      } catch (err) {
        if (err instanceof ConditionalCheckFailedException) {
          throw new Error(
            'dynalite transaction emulation: a condition that held at check time failed at apply time (a concurrent ' +
              'non-transactional write); the transaction may be half applied. Drive the emulation without such races.',
            { cause: err },
          );
        }
        throw err;
      }
    }
    return { $metadata: { httpStatusCode: 200 } };
  };

  // One transaction at a time: check-then-apply must not interleave with another transaction.
  let queue: Promise<unknown> = Promise.resolve();
  const serialized = (input: TransactWriteCommandInput) => {
    const run = queue.then(() => execute(input));
    queue = run.catch(() => undefined);
    return run;
  };

  const stub = mockClient(DynamoDBDocumentClient);
  stub.on(TransactWriteCommand).callsFake(serialized);
  stub.send.callThrough(); // every other command reaches dynalite

  let restored = false;
  return {
    stub,
    stats,
    restore() {
      if (restored) return;
      restored = true;
      stub.restore();
      raw.destroy();
    },
  };
}

/** The condition with only the placeholders it uses (DynamoDB refuses unused ones; an Update also carries its update's). */
function conditionOnly(e: Expressions): Expressions {
  const expr = e.ConditionExpression!;
  const used = (placeholders: Record<string, unknown> | undefined) => {
    if (!placeholders) return undefined;
    const kept = Object.entries(placeholders).filter(([p]) => new RegExp(`${p}(?![A-Za-z0-9_])`).test(expr));
    return kept.length ? Object.fromEntries(kept) : undefined;
  };
  return {
    ConditionExpression: expr,
    ExpressionAttributeNames: used(e.ExpressionAttributeNames) as Record<string, string> | undefined,
    ExpressionAttributeValues: used(e.ExpressionAttributeValues),
  };
}

async function createScratchTable(client: DynamoDBClient, TableName: string, keyNames: string[]): Promise<void> {
  await client.send(
    new CreateTableCommand({
      TableName,
      BillingMode: 'PAY_PER_REQUEST',
      AttributeDefinitions: keyNames.map((AttributeName) => ({ AttributeName, AttributeType: 'S' as const })),
      KeySchema: keyNames.map((AttributeName, i) => ({ AttributeName, KeyType: i === 0 ? ('HASH' as const) : ('RANGE' as const) })),
    }),
  );
  while ((await client.send(new DescribeTableCommand({ TableName }))).Table?.TableStatus !== 'ACTIVE') {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
