/**
 * Key-value store on one DynamoDB table (schema in table.ts). Behaves as the SQLite adapter does:
 * expired items are invisible to reads and count as absent in conditions, even before TTL deletes them.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import {
  BatchGetCommand,
  DeleteCommand,
  DynamoDBDocumentClient,
  GetCommand,
  PutCommand,
  QueryCommand,
  TransactWriteCommand,
  UpdateCommand,
} from '@aws-sdk/lib-dynamodb';
import type { Clock, KeyValueStore, KvCondition, KvItem, KvKey, KvPage, KvQuery, KvUpdate, KvWrite } from '../ports.js';
import { ConditionFailedError, EngineUnavailableError, TransactionCanceledError } from '../errors.js';
import { assertBatchGetShape, assertItemSize, assertTransactionShape } from '../adapter-kit/kv-checks.js';
import { decodeCursor, encodeCursor, isExpired } from '../adapter-kit/kv-semantics.js';
import { InvalidCursorError } from '../../shared/cursors.js';
import { callAws, isInvalidStartKey } from './errors.js';
import { TABLE_SCHEMA } from './table.js';

const PK = TABLE_SCHEMA.partitionKey;
const SK = TABLE_SCHEMA.sortKey;
const TTL = TABLE_SCHEMA.ttlAttribute;

/** Times an expired item is swept and a write retried before giving up (only a racing writer of expired items needs more). */
const SWEEP_RETRIES = 2;

/**
 * Placeholders for one request's expressions. Every attribute goes through `#n` (names like `name`,
 * `count` and `size` are reserved words); only used placeholders are sent, as DynamoDB refuses unused ones.
 */
class Expr {
  private readonly names = new Map<string, string>();
  private readonly values: Record<string, unknown> = {};
  private nextValue = 0;

  name(attribute: string): string {
    let placeholder = this.names.get(attribute);
    if (!placeholder) this.names.set(attribute, (placeholder = `#n${this.names.size}`));
    return placeholder;
  }

  value(value: unknown): string {
    const placeholder = `:v${this.nextValue++}`;
    this.values[placeholder] = value;
    return placeholder;
  }

  attributes() {
    return {
      ExpressionAttributeNames: this.names.size ? Object.fromEntries([...this.names].map(([a, p]) => [p, a])) : undefined,
      ExpressionAttributeValues: this.nextValue ? this.values : undefined,
    };
  }
}

/** True while the stored item is expired. False when it is absent or has no (numeric) expiry. */
function expired(e: Expr, nowSeconds: number): string {
  return `${e.name(TTL)} <= ${e.value(nowSeconds)}`;
}

function compileCondition(condition: KvCondition, e: Expr, nowSeconds: number): string {
  // Absent means no item or an expired one; present is its exact complement. `NOT (x <= now)` rather
  // than `x > now` so that a missing or non-numeric expires_at counts as never expiring, as in SQLite.
  if ('ifAbsent' in condition) return `attribute_not_exists(${e.name(PK)}) OR ${expired(e, nowSeconds)}`;
  // Placeholders are made only for what the expression uses: DynamoDB refuses unused ones.
  const live = () => `attribute_exists(${e.name(PK)}) AND NOT (${expired(e, nowSeconds)})`;
  if ('ifExists' in condition) return live();
  if ('ifBelow' in condition) {
    // A missing attribute (or item) counts as 0, so it passes where 0 is below the cap.
    const caps = Object.entries(condition.ifBelow);
    const below = caps.map(([k, cap]) => (cap > 0 ? `(attribute_not_exists(${e.name(k)}) OR ${e.name(k)} < ${e.value(cap)})` : `${e.name(k)} < ${e.value(cap)}`));
    if (!below.length) return `attribute_not_exists(${e.name(PK)}) OR attribute_exists(${e.name(PK)})`;
    // AND binds before OR; DynamoDB refuses redundant parentheses.
    return caps.every(([, cap]) => cap > 0)
      ? `attribute_not_exists(${e.name(PK)}) OR ${expired(e, nowSeconds)} OR ${below.join(' AND ')}`
      : `${live()} AND ${below.join(' AND ')}`;
  }
  // `=` compares lists and maps deeply, as deepEqual does.
  const equal = Object.entries(condition.ifEquals).map(([k, v]) => ` AND ${e.name(k)} = ${e.value(v)}`);
  return live() + equal.join('');
}

function keyOf(key: KvKey): KvKey {
  return { pk: key.pk, sk: key.sk };
}

type UpdateParts = Pick<KvUpdate, 'set' | 'add' | 'remove'>;

function compileUpdate(u: UpdateParts, e: Expr): string | undefined {
  // Key attributes cannot be updated; the SQLite adapter keeps the key as well.
  const set = Object.entries(u.set ?? {}).filter(([k, v]) => v !== undefined && k !== PK && k !== SK);
  const add = Object.entries(u.add ?? {});
  const remove = u.remove ?? [];
  const clauses: string[] = [];
  if (set.length) clauses.push(`SET ${set.map(([k, v]) => `${e.name(k)} = ${e.value(v)}`).join(', ')}`);
  if (add.length) clauses.push(`ADD ${add.map(([k, n]) => `${e.name(k)} ${e.value(n)}`).join(', ')}`);
  if (remove.length) clauses.push(`REMOVE ${remove.map((k) => e.name(k)).join(', ')}`);
  return clauses.length ? clauses.join(' ') : undefined;
}

/** The condition an update carries: the caller's, and that no expired item is in the way (see `update`). */
function updateCondition(condition: KvCondition | undefined, e: Expr, nowSeconds: number): string {
  const notExpired = `NOT (${expired(e, nowSeconds)})`;
  return condition ? `(${compileCondition(condition, e, nowSeconds)}) AND ${notExpired}` : notExpired;
}

/** Every DynamoDB call: SDK errors become the engine's (see errors.ts). */
function call<T>(request: () => Promise<T>): Promise<T> {
  return callAws('DynamoDB', request);
}

export class DynamoKeyValueStore implements KeyValueStore {
  private readonly doc: DynamoDBDocumentClient;

  constructor(client: DynamoDBClient, private readonly tableName: string, private readonly clock: Clock) {
    this.doc = DynamoDBDocumentClient.from(client, { marshallOptions: { removeUndefinedValues: true } });
  }

  private nowSeconds(): number {
    return this.clock.now() / 1000;
  }

  async get(key: KvKey): Promise<KvItem | undefined> {
    const out = await call(() => this.doc.send(new GetCommand({ TableName: this.tableName, Key: keyOf(key), ConsistentRead: true })));
    const item = out.Item as KvItem | undefined;
    // TTL deletes expired items up to days late; until then they must not be seen.
    return item && !isExpired(item, this.clock.now()) ? item : undefined;
  }

  /** BatchGetItem with ConsistentRead; keys DynamoDB leaves unprocessed (throttling) are asked again. */
  async getMany(keys: KvKey[]): Promise<(KvItem | undefined)[]> {
    assertBatchGetShape(keys);
    const found = new Map<string, KvItem>();
    let pending = keys.map(keyOf);
    for (let attempt = 0; pending.length; attempt++) {
      if (attempt > 0) await this.clock.sleep(Math.min(1000, 25 * 2 ** attempt));
      if (attempt >= 8) throw new EngineUnavailableError('BatchGetItem kept leaving keys unprocessed');
      const request = pending;
      const out = await call(() => this.doc.send(new BatchGetCommand({ RequestItems: { [this.tableName]: { Keys: request, ConsistentRead: true } } })));
      for (const item of (out.Responses?.[this.tableName] ?? []) as KvItem[]) found.set(`${item.pk}\u0000${item.sk}`, item);
      pending = (out.UnprocessedKeys?.[this.tableName]?.Keys ?? []) as typeof pending;
    }
    const now = this.clock.now();
    return keys.map((k) => {
      const item = found.get(`${k.pk}\u0000${k.sk}`);
      return item && !isExpired(item, now) ? item : undefined;
    });
  }

  async put(item: KvItem, condition?: KvCondition): Promise<void> {
    assertItemSize(item); // DynamoDB counts size its own way; refuse what SQLite refuses, with the same error
    const e = new Expr();
    const ConditionExpression = condition && compileCondition(condition, e, this.nowSeconds());
    await call(() => this.doc.send(new PutCommand({ TableName: this.tableName, Item: item, ConditionExpression, ...e.attributes() })));
  }

  /**
   * An update keeps the stored item's other attributes, and an expired item is still stored until TTL
   * deletes it: updating it would resurrect stale attributes (an old count, its past expiry). So the update
   * requires no expired item; when that fails, the expired item is deleted (it was invisible already)
   * and the update runs again, now against an absent item as in SQLite.
   */
  async update(u: Omit<KvUpdate, 'update'> & { key: KvKey }): Promise<KvItem> {
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.updateOnce(u);
      } catch (err) {
        if (!(err instanceof ConditionFailedError) || attempt >= SWEEP_RETRIES || !(await this.sweep(u.key))) throw err;
      }
    }
  }

  private async updateOnce(u: Omit<KvUpdate, 'update'> & { key: KvKey }): Promise<KvItem> {
    const e = new Expr();
    const out = await call(() =>
      this.doc.send(
        new UpdateCommand({
          TableName: this.tableName,
          Key: keyOf(u.key),
          UpdateExpression: compileUpdate(u, e),
          ConditionExpression: updateCondition(u.condition, e, this.nowSeconds()),
          ReturnValues: 'ALL_NEW',
          ...e.attributes(),
        }),
      ),
    );
    return out.Attributes as KvItem;
  }

  /** Deletes the item if it is expired. Returns whether it did. */
  private async sweep(key: KvKey): Promise<boolean> {
    const e = new Expr();
    const ConditionExpression = expired(e, this.nowSeconds());
    try {
      await call(() => this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: keyOf(key), ConditionExpression, ...e.attributes() })));
      return true;
    } catch (err) {
      if (err instanceof ConditionFailedError) return false;
      throw err;
    }
  }

  async delete(key: KvKey, condition?: KvCondition): Promise<void> {
    const e = new Expr();
    const ConditionExpression = condition && compileCondition(condition, e, this.nowSeconds());
    await call(() => this.doc.send(new DeleteCommand({ TableName: this.tableName, Key: keyOf(key), ConditionExpression, ...e.attributes() })));
  }

  async transact(writes: KvWrite[]): Promise<void> {
    assertTransactionShape(writes);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.transactOnce(writes);
      } catch (err) {
        // As in `update`: a failed update may only have met an expired item; sweep those and run again.
        if (!(err instanceof TransactionCanceledError) || attempt >= SWEEP_RETRIES) throw err;
        const swept = await Promise.all(err.failed.map((i) => writes[i]).flatMap((w) => ('update' in w ? [this.sweep(w.update)] : [])));
        if (!swept.includes(true)) throw err;
      }
    }
  }

  private async transactOnce(writes: KvWrite[]): Promise<void> {
    const now = this.nowSeconds();
    const TableName = this.tableName;
    const TransactItems = writes.map((w) => {
      const e = new Expr();
      if ('put' in w) {
        const ConditionExpression = w.condition && compileCondition(w.condition, e, now);
        return { Put: { TableName, Item: w.put, ConditionExpression, ...e.attributes() } };
      }
      if ('update' in w) {
        const UpdateExpression = compileUpdate(w, e);
        const ConditionExpression = updateCondition(w.condition, e, now);
        return { Update: { TableName, Key: keyOf(w.update), UpdateExpression, ConditionExpression, ...e.attributes() } };
      }
      if ('delete' in w) {
        const ConditionExpression = w.condition && compileCondition(w.condition, e, now);
        return { Delete: { TableName, Key: keyOf(w.delete), ConditionExpression, ...e.attributes() } };
      }
      const ConditionExpression = compileCondition(w.condition, e, now);
      return { ConditionCheck: { TableName, Key: keyOf(w.check), ConditionExpression, ...e.attributes() } };
    });
    // UpdateExpression is required inside a transaction; an update with nothing to change leaves it
    // undefined and DynamoDB refuses the request (a ValidationException, passed through).
    await call(() => this.doc.send(new TransactWriteCommand({ TransactItems })));
  }

  async query(q: KvQuery): Promise<KvPage> {
    const keys = q.index ? TABLE_SCHEMA.indexes[q.index] : { partitionKey: PK, sortKey: SK };
    const e = new Expr();
    let KeyConditionExpression = `${e.name(keys.partitionKey)} = ${e.value(q.pk)}`;
    const c = q.sk;
    if (c) {
      const sk = e.name(keys.sortKey); // only when used: DynamoDB refuses unused placeholders
      if ('beginsWith' in c) KeyConditionExpression += ` AND begins_with(${sk}, ${e.value(c.beginsWith)})`;
      else if ('between' in c) KeyConditionExpression += ` AND ${sk} BETWEEN ${e.value(c.between[0])} AND ${e.value(c.between[1])}`;
      else if ('gt' in c) KeyConditionExpression += ` AND ${sk} > ${e.value(c.gt)}`;
      else if ('gte' in c) KeyConditionExpression += ` AND ${sk} >= ${e.value(c.gte)}`;
      else if ('lt' in c) KeyConditionExpression += ` AND ${sk} < ${e.value(c.lt)}`;
      else KeyConditionExpression += ` AND ${sk} <= ${e.value(c.lte)}`;
    }
    const ExclusiveStartKey = q.cursor === undefined ? undefined : startKey(q.cursor, q.index);
    const out = await call(() =>
      this.doc.send(
        new QueryCommand({
          TableName: this.tableName,
          IndexName: q.index,
          KeyConditionExpression,
          ScanIndexForward: !q.descending,
          Limit: q.limit,
          ExclusiveStartKey,
          ConsistentRead: q.index ? undefined : true, // GSIs cannot be read consistently
          ...e.attributes(),
        }),
      ),
    ).catch((err) => {
      // A cursor of the right shape may still name another partition or range.
      if (ExclusiveStartKey && isInvalidStartKey(err)) {
        throw new InvalidCursorError();
      }
      throw err;
    });
    const now = this.clock.now();
    // Filtered here, after Limit and the 1 MB page: a page may come back short, even empty, with a cursor.
    const items = ((out.Items ?? []) as KvItem[]).filter((item) => !isExpired(item, now));
    return out.LastEvaluatedKey ? { items, cursor: encodeCursor(out.LastEvaluatedKey) } : { items };
  }

  cursorAfter(q: KvQuery, item: KvItem): string {
    return encodeCursor(keyAfter(q, item));
  }
}

/** What DynamoDB would give as LastEvaluatedKey had the page ended at `item`. */
function keyAfter(q: KvQuery, item: KvItem): Record<string, string> {
  const key: Record<string, string> = { [PK]: String(item[PK]), [SK]: String(item[SK]) };
  if (q.index) {
    const { partitionKey, sortKey } = TABLE_SCHEMA.indexes[q.index];
    key[partitionKey] = String(item[partitionKey]);
    key[sortKey] = String(item[sortKey]);
  }
  return key;
}

/** The cursor is a LastEvaluatedKey: exactly the table key, plus the index key when querying an index. */
function startKey(cursor: string, index: KvQuery['index']): Record<string, string> {
  const key = decodeCursor(cursor);
  const expected = [PK, SK, ...(index ? [TABLE_SCHEMA.indexes[index].partitionKey, TABLE_SCHEMA.indexes[index].sortKey] : [])];
  const names = Object.keys(key);
  if (names.length !== expected.length || !expected.every((k) => typeof key[k] === 'string')) throw new InvalidCursorError();
  return key;
}
