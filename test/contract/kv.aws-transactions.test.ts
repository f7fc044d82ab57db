/**
 * The AWS adapter's transactions and error mapping, against a client mock: dynalite has no
 * TransactWriteItems, so the contract's transaction tests cannot run there.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { mockClient } from 'aws-sdk-client-mock';
import {
  ConditionalCheckFailedException,
  DynamoDBClient,
  ProvisionedThroughputExceededException,
  TransactionCanceledException,
} from '@aws-sdk/client-dynamodb';
import { BatchGetCommand, DeleteCommand, DynamoDBDocumentClient, PutCommand, TransactWriteCommand } from '@aws-sdk/lib-dynamodb';
import { DynamoKeyValueStore } from '../../lambdas/engine/aws/kv.js';
import { ManualClock } from '../../lambdas/engine/clock.js';
import {
  ConditionFailedError,
  EngineLimitError,
  EngineUnavailableError,
  TransactionCanceledError,
} from '../../lambdas/engine/errors.js';

const TABLE = 'platform-test';
const meta = { $metadata: {} };
const doc = mockClient(DynamoDBDocumentClient);

function store() {
  const clock = new ManualClock();
  const client = new DynamoDBClient({ region: 'us-east-1', credentials: { accessKeyId: 'test', secretAccessKey: 'test' } });
  return { kv: new DynamoKeyValueStore(client, TABLE, clock), nowSeconds: clock.now() / 1000, clock };
}

function canceled(...codes: string[]) {
  return new TransactionCanceledException({
    ...meta,
    message: `Transaction cancelled, please refer cancellation reasons for specific reasons [${codes.join(', ')}]`,
    CancellationReasons: codes.map((Code) => ({ Code })),
  });
}

/** Resolves an expression's placeholders, so assertions read as the condition DynamoDB evaluates. */
function expand(input: { ExpressionAttributeNames?: Record<string, string>; ExpressionAttributeValues?: Record<string, unknown> }, expr?: string) {
  return expr
    ?.replace(/#n\d+/g, (p) => input.ExpressionAttributeNames![p])
    .replace(/:v\d+/g, (p) => JSON.stringify(input.ExpressionAttributeValues![p]));
}

afterEach(() => doc.reset());

describe('DynamoKeyValueStore.transact', () => {
  it('sends one TransactWriteItems with each write, its expressions and its condition', async () => {
    const { kv, nowSeconds } = store();
    doc.on(TransactWriteCommand).resolves({});
    await kv.transact([
      { put: { pk: 'p', sk: 'new', name: 'n' }, condition: { ifAbsent: true } },
      { update: { pk: 'p', sk: 'counter' }, set: { name: 'c', gone: undefined }, add: { count: 1 }, remove: ['old'] },
      { delete: { pk: 'p', sk: 'taken' }, condition: { ifEquals: { owner: 'me' } } },
      { check: { pk: 'p', sk: 'lock' }, condition: { ifExists: true } },
    ]);

    const calls = doc.commandCalls(TransactWriteCommand);
    expect(calls).toHaveLength(1);
    const [put, update, del, check] = calls[0].args[0].input.TransactItems!;
    const now = JSON.stringify(nowSeconds);

    expect(put.Put).toMatchObject({ TableName: TABLE, Item: { pk: 'p', sk: 'new', name: 'n' } });
    expect(expand(put.Put!, put.Put!.ConditionExpression)).toBe(`attribute_not_exists(pk) OR expires_at <= ${now}`);

    expect(update.Update).toMatchObject({ TableName: TABLE, Key: { pk: 'p', sk: 'counter' } });
    expect(expand(update.Update!, update.Update!.UpdateExpression)).toBe('SET name = "c" ADD count 1 REMOVE old');
    // No caller condition, but an expired item must not be updated in place (see DynamoKeyValueStore.update).
    expect(expand(update.Update!, update.Update!.ConditionExpression)).toBe(`NOT (expires_at <= ${now})`);

    expect(del.Delete).toMatchObject({ TableName: TABLE, Key: { pk: 'p', sk: 'taken' } });
    expect(expand(del.Delete!, del.Delete!.ConditionExpression)).toBe(
      `attribute_exists(pk) AND NOT (expires_at <= ${now}) AND owner = "me"`,
    );

    expect(check.ConditionCheck).toMatchObject({ TableName: TABLE, Key: { pk: 'p', sk: 'lock' } });
    expect(expand(check.ConditionCheck!, check.ConditionCheck!.ConditionExpression)).toBe(
      `attribute_exists(pk) AND NOT (expires_at <= ${now})`,
    );
  });

  it('compiles ifBelow so a missing counter (or item) counts as 0', async () => {
    const { kv, nowSeconds } = store();
    doc.on(TransactWriteCommand).resolves({});
    await kv.transact([
      { update: { pk: 'p', sk: 'count' }, add: { n: 1 }, condition: { ifBelow: { n: 500 } } },
      { check: { pk: 'p', sk: 'pair' }, condition: { ifBelow: { a: 2, b: 0 } } },
    ]);
    const [update, check] = doc.commandCalls(TransactWriteCommand)[0].args[0].input.TransactItems!;
    const now = JSON.stringify(nowSeconds);
    expect(expand(update.Update!, update.Update!.ConditionExpression)).toBe(
      `(attribute_not_exists(pk) OR expires_at <= ${now} OR (attribute_not_exists(n) OR n < 500)) AND NOT (expires_at <= ${now})`,
    );
    // A cap of 0 admits no missing value, so the item must exist.
    expect(expand(check.ConditionCheck!, check.ConditionCheck!.ConditionExpression)).toBe(
      `attribute_exists(pk) AND NOT (expires_at <= ${now}) AND (attribute_not_exists(a) OR a < 2) AND b < 0`,
    );
  });

  it('names the writes whose condition failed', async () => {
    const { kv } = store();
    doc.on(TransactWriteCommand).rejects(canceled('None', 'ConditionalCheckFailed'));
    const err = await kv
      .transact([{ put: { pk: 'p', sk: 'a' } }, { put: { pk: 'p', sk: 'b' }, condition: { ifAbsent: true } }])
      .catch((e) => e);
    expect(err).toBeInstanceOf(TransactionCanceledError);
    expect(err.failed).toEqual([1]);
  });

  it('sweeps an expired item that failed an update and runs the transaction again', async () => {
    const { kv } = store();
    doc.on(TransactWriteCommand).rejectsOnce(canceled('ConditionalCheckFailed', 'None')).resolves({});
    doc.on(DeleteCommand).resolves({});
    await kv.transact([{ update: { pk: 'p', sk: 'c' }, add: { n: 1 } }, { put: { pk: 'p', sk: 'x' } }]);
    expect(doc.commandCalls(DeleteCommand)[0].args[0].input.Key).toEqual({ pk: 'p', sk: 'c' });
    expect(doc.commandCalls(TransactWriteCommand)).toHaveLength(2);
  });

  it("reports an update's failed condition when there was no expired item to sweep", async () => {
    const { kv } = store();
    doc.on(TransactWriteCommand).rejects(canceled('ConditionalCheckFailed'));
    doc.on(DeleteCommand).rejects(new ConditionalCheckFailedException({ ...meta, message: 'The conditional request failed' }));
    const err = await kv.transact([{ update: { pk: 'p', sk: 'c' }, add: { n: 1 }, condition: { ifExists: true } }]).catch((e) => e);
    expect(err).toBeInstanceOf(TransactionCanceledError);
    expect(err.failed).toEqual([0]);
    expect(doc.commandCalls(TransactWriteCommand)).toHaveLength(1);
  });

  it('refuses limit violations before sending anything', async () => {
    const { kv } = store();
    doc.on(TransactWriteCommand).resolves({});
    const many = Array.from({ length: 101 }, (_, i) => ({ put: { pk: 'p', sk: `m${i}` } }));
    await expect(kv.transact(many)).rejects.toMatchObject({ limit: 'transaction_items' });
    await expect(kv.transact([])).rejects.toMatchObject({ limit: 'transaction_items' });
    await expect(kv.transact([{ put: { pk: 'p', sk: 'd' } }, { delete: { pk: 'p', sk: 'd' } }])).rejects.toMatchObject({
      limit: 'transaction_duplicate_item',
    });
    const heavy = Array.from({ length: 11 }, (_, i) => ({ put: { pk: 'p', sk: `h${i}`, blob: 'x'.repeat(390 * 1024) } }));
    await expect(kv.transact(heavy)).rejects.toMatchObject({ limit: 'transaction_size' });
    await expect(kv.transact([{ put: { pk: 'p', sk: 'big', blob: 'x'.repeat(401 * 1024) } }])).rejects.toMatchObject({
      limit: 'item_size',
    });
    expect(doc.calls()).toHaveLength(0);
  });

  it('maps throttling and transaction conflicts to EngineUnavailableError', async () => {
    const { kv } = store();
    doc
      .on(TransactWriteCommand)
      .rejectsOnce(new ProvisionedThroughputExceededException({ ...meta, message: 'slow down' }))
      .rejectsOnce(canceled('TransactionConflict', 'None'))
      .rejectsOnce(Object.assign(new Error('Rate exceeded'), { name: 'ThrottlingException' }));
    for (let i = 0; i < 3; i++) {
      await expect(kv.transact([{ put: { pk: 'p', sk: 'a' } }, { put: { pk: 'p', sk: 'b' } }])).rejects.toBeInstanceOf(
        EngineUnavailableError,
      );
    }
  });
});

describe('DynamoKeyValueStore.put error mapping', () => {
  it('maps a failed condition to ConditionFailedError', async () => {
    const { kv } = store();
    doc.on(PutCommand).rejects(new ConditionalCheckFailedException({ ...meta, message: 'The conditional request failed' }));
    await expect(kv.put({ pk: 'p', sk: 'a' }, { ifAbsent: true })).rejects.toBeInstanceOf(ConditionFailedError);
  });

  it("maps DynamoDB's item size refusal to the item_size limit", async () => {
    const { kv } = store();
    // ValidationException is not a modelled error class in the SDK: it arrives as a named ServiceException.
    const tooBig = Object.assign(new Error('Item size has exceeded the maximum allowed size'), { name: 'ValidationException' });
    doc.on(PutCommand).rejects(tooBig);
    const err = await kv.put({ pk: 'p', sk: 'a' }).catch((e) => e);
    expect(err).toBeInstanceOf(EngineLimitError);
    expect(err.limit).toBe('item_size');
  });

  it('maps network errors to EngineUnavailableError', async () => {
    const { kv } = store();
    doc.on(PutCommand).rejects(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    await expect(kv.put({ pk: 'p', sk: 'a' })).rejects.toBeInstanceOf(EngineUnavailableError);
  });
});

describe('DynamoKeyValueStore.getMany', () => {
  it('asks again for the keys DynamoDB leaves unprocessed, consistently, and answers in key order', async () => {
    const { kv, clock } = store();
    doc
      .on(BatchGetCommand)
      .resolvesOnce({ Responses: { [TABLE]: [{ pk: 'p', sk: 'b', v: 2 }] }, UnprocessedKeys: { [TABLE]: { Keys: [{ pk: 'p', sk: 'a' }] } } })
      .resolvesOnce({ Responses: { [TABLE]: [{ pk: 'p', sk: 'a', v: 1 }] } });
    const got = kv.getMany([{ pk: 'p', sk: 'a' }, { pk: 'p', sk: 'b' }, { pk: 'p', sk: 'c' }]);
    await new Promise((r) => setTimeout(r, 0));
    clock.advance(1000); // the back-off before asking again
    expect((await got).map((i) => i?.v)).toEqual([1, 2, undefined]);
    const calls = doc.commandCalls(BatchGetCommand);
    expect(calls).toHaveLength(2);
    expect(calls[0].args[0].input.RequestItems![TABLE]).toMatchObject({ ConsistentRead: true, Keys: [{ pk: 'p', sk: 'a' }, { pk: 'p', sk: 'b' }, { pk: 'p', sk: 'c' }] });
    expect(calls[1].args[0].input.RequestItems![TABLE].Keys).toEqual([{ pk: 'p', sk: 'a' }]);
  });

  it('maps throttling to EngineUnavailableError', async () => {
    const { kv } = store();
    doc.on(BatchGetCommand).rejects(new ProvisionedThroughputExceededException({ ...meta, message: 'slow down' }));
    await expect(kv.getMany([{ pk: 'p', sk: 'a' }])).rejects.toBeInstanceOf(EngineUnavailableError);
  });
});
