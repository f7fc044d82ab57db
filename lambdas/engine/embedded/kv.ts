/**
 * Key-value store on SQLite (better-sqlite3, WAL). One table mirrors the DynamoDB table: primary key
 * (pk, sk), two generic indexes, expiry. Limits are enforced as DynamoDB enforces them.
 */
import type Database from 'better-sqlite3';
import type { Clock, KeyValueStore, KvCondition, KvItem, KvKey, KvPage, KvQuery, KvUpdate, KvWrite } from '../ports.js';
import { GroupCommit } from './group-commit.js';
import { ConditionFailedError, TransactionCanceledError } from '../errors.js';
import { assertBatchGetShape, assertItemSize, assertTransactionShape } from '../adapter-kit/kv-checks.js';
import { writeKey } from '../ports.js';
import { applyUpdate, decodeCursor, encodeCursor } from '../adapter-kit/kv-semantics.js';
import { deepEqual } from '../../shared/deep-equal.js';
import { InvalidCursorError } from '../../shared/cursors.js';
import { LIMITS } from '../limits.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS kv (
  pk TEXT NOT NULL,
  sk TEXT NOT NULL,
  gsi1pk TEXT, gsi1sk TEXT,
  gsi2pk TEXT, gsi2sk TEXT,
  expires_at INTEGER,
  size INTEGER NOT NULL,
  item TEXT NOT NULL,
  PRIMARY KEY (pk, sk)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS kv_gsi1 ON kv (gsi1pk, gsi1sk, pk, sk) WHERE gsi1pk IS NOT NULL AND gsi1sk IS NOT NULL;
CREATE INDEX IF NOT EXISTS kv_gsi2 ON kv (gsi2pk, gsi2sk, pk, sk) WHERE gsi2pk IS NOT NULL AND gsi2sk IS NOT NULL;
CREATE INDEX IF NOT EXISTS kv_expiry ON kv (expires_at) WHERE expires_at IS NOT NULL;
`;

/** A query row: [size, item, sk] for the table, plus [pk, index sort key] for an index. */
type QueryRow = [number, string, string, string?, string?];
const [ROW_SIZE, ROW_ITEM, ROW_SK, ROW_PK, ROW_INDEX_SK] = [0, 1, 2, 3, 4] as const;

interface Row {
  pk: string;
  sk: string;
  size: number;
  item: string;
  expires_at: number | null;
}

function strOrNull(v: unknown): string | null {
  return typeof v === 'string' ? v : null;
}

export class SqliteKeyValueStore implements KeyValueStore {
  private readonly stmt;
  /** Runs a function in a transaction; built once, since better-sqlite3 builds four wrappers per transaction(). */
  private readonly atomically;
  private readonly queries = new Map<string, { stmt: Database.Statement; order: string[]; skCol: string }>();

  constructor(
    private readonly db: Database.Database,
    private readonly clock: Clock,
    private readonly writer: GroupCommit = new GroupCommit(db),
  ) {
    db.exec(SCHEMA);
    this.atomically = db.transaction((fn: () => unknown) => fn());
    this.stmt = {
      get: db.prepare<[string, string], Row>('SELECT pk, sk, size, item, expires_at FROM kv WHERE pk = ? AND sk = ?'),
      upsert: db.prepare(
        `INSERT INTO kv (pk, sk, gsi1pk, gsi1sk, gsi2pk, gsi2sk, expires_at, size, item)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (pk, sk) DO UPDATE SET gsi1pk = excluded.gsi1pk, gsi1sk = excluded.gsi1sk,
           gsi2pk = excluded.gsi2pk, gsi2sk = excluded.gsi2sk, expires_at = excluded.expires_at,
           size = excluded.size, item = excluded.item`,
      ),
      delete: db.prepare('DELETE FROM kv WHERE pk = ? AND sk = ?'),
      // On the column itself (not an expression of it), so the kv_expiry index serves it.
      sweep: db.prepare('DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?'),
    };
  }

  private nowMs() {
    return this.clock.now();
  }

  private read(key: KvKey): KvItem | undefined {
    const row = this.stmt.get.get(key.pk, key.sk);
    if (!row) return undefined;
    if (row.expires_at !== null && row.expires_at * 1000 <= this.nowMs()) return undefined;
    return JSON.parse(row.item) as KvItem;
  }

  private write(item: KvItem, json = JSON.stringify(item), size = assertItemSize(item, json)): void {
    // Positional parameters: binding by name costs a lookup per parameter on every write.
    this.stmt.upsert.run(
      item.pk,
      item.sk,
      strOrNull(item.gsi1pk),
      strOrNull(item.gsi1sk),
      strOrNull(item.gsi2pk),
      strOrNull(item.gsi2sk),
      typeof item.expires_at === 'number' ? Math.floor(item.expires_at) : null,
      size,
      json,
    );
  }

  private holds(condition: KvCondition | undefined, current: KvItem | undefined): boolean {
    if (!condition) return true;
    if ('ifAbsent' in condition) return current === undefined;
    if ('ifExists' in condition) return current !== undefined;
    if ('ifBelow' in condition) {
      return Object.entries(condition.ifBelow).every(([k, cap]) => {
        const value = current?.[k];
        return value === undefined ? 0 < cap : typeof value === 'number' && value < cap;
      });
    }
    if (!current) return false;
    return Object.entries(condition.ifEquals).every(([k, v]) => deepEqual(current[k], v));
  }

  async get(key: KvKey): Promise<KvItem | undefined> {
    return this.read(key);
  }

  async getMany(keys: KvKey[]): Promise<(KvItem | undefined)[]> {
    assertBatchGetShape(keys);
    // One read transaction for all of them: one snapshot, one lock instead of one per read.
    return this.atomically.deferred(() => keys.map((k) => this.read(k))) as (KvItem | undefined)[];
  }

  async put(item: KvItem, condition?: KvCondition): Promise<void> {
    const json = JSON.stringify(item);
    const size = assertItemSize(item, json);
    return this.enqueue(() => {
      if (!this.holds(condition, condition ? this.read(item) : undefined)) throw new ConditionFailedError();
      this.write(item, json, size);
    });
  }

  async update(u: Omit<KvUpdate, 'update'> & { key: KvKey }): Promise<KvItem> {
    return this.enqueue(() => {
      const current = this.read(u.key);
      if (!this.holds(u.condition, current)) throw new ConditionFailedError();
      const next = applyUpdate(current, { ...u, update: u.key });
      this.write(next);
      return next;
    });
  }

  async delete(key: KvKey, condition?: KvCondition): Promise<void> {
    return this.enqueue(() => {
      if (!this.holds(condition, condition ? this.read(key) : undefined)) throw new ConditionFailedError();
      this.stmt.delete.run(key.pk, key.sk);
    });
  }

  /** Group commit (group-commit.ts), shared with the queue of the same file. */
  private enqueue<T>(run: () => T): Promise<T> {
    return this.writer.run(run);
  }

  /** Resolves once every write queued so far is committed (for a clean shutdown). */
  drain(): Promise<void> {
    return this.writer.drain();
  }

  async transact(writes: KvWrite[]): Promise<void> {
    const json = new Map<KvItem, string>();
    const sizes = assertTransactionShape(writes, (item) => {
      const encoded = JSON.stringify(item);
      json.set(item, encoded);
      return assertItemSize(item, encoded);
    });
    return this.enqueue(() => {
      // Only conditions and updates need the stored item; a plain put or delete does not read.
      const current = writes.map((w) => (w.condition || 'update' in w ? this.read(writeKey(w)) : undefined));
      const failed = writes.flatMap((w, i) => (this.holds(w.condition, current[i]) ? [] : [i]));
      if (failed.length) throw new TransactionCanceledError(failed);
      writes.forEach((w, i) => {
        if ('put' in w) this.write(w.put, json.get(w.put), sizes[i]);
        else if ('update' in w) this.write(applyUpdate(current[i], w));
        else if ('delete' in w) this.stmt.delete.run(w.delete.pk, w.delete.sk);
      });
    });
  }

  async query(q: KvQuery): Promise<KvPage> {
    const sk = q.sk;
    const skKind = sk ? (Object.keys(sk)[0] as string) : '';
    const plan = this.queryPlan(q.index, skKind, !!q.descending, !!q.cursor, q.limit !== undefined);
    const params: Record<string, unknown> = { pk: q.pk, now: this.nowMs() };
    if (sk) {
      if ('beginsWith' in sk) {
        params.skLo = sk.beginsWith;
        params.skHi = sk.beginsWith + '\uffff';
      } else if ('between' in sk) {
        [params.skLo, params.skHi] = sk.between;
      } else {
        params.skV = (sk as Record<string, string>)[skKind];
      }
    }
    if (q.cursor) {
      const c = decodeCursor(q.cursor);
      // Exactly the key this query gives out (as DynamoDB refuses another ExclusiveStartKey): a cursor
      // names its own partition, the index's for an index query (another's would be read as a position).
      const partition = q.index ? `${q.index}pk` : 'pk';
      const expected = q.index ? [...plan.order, partition] : ['pk', 'sk'];
      if (Object.keys(c).length !== expected.length || !expected.every((col) => Object.hasOwn(c, col)) || c[partition] !== q.pk) throw new InvalidCursorError();
      plan.order.forEach((col, i) => (params[`c${i}`] = c[col]));
    }
    // One row past the limit tells whether more follow.
    if (q.limit !== undefined) params.rows = q.limit + 1;
    const limit = q.limit ?? Number.MAX_SAFE_INTEGER;
    const items: KvItem[] = [];
    let bytes = 0;
    let last: QueryRow | undefined;
    let more = false;
    const rows = (q.limit !== undefined ? plan.stmt.all(params) : plan.stmt.iterate(params)) as Iterable<QueryRow>;
    for (const row of rows) {
      const size = row[ROW_SIZE];
      if (items.length >= limit || bytes + size > LIMITS.queryPageBytes) {
        more = true;
        break;
      }
      bytes += size;
      items.push(JSON.parse(row[ROW_ITEM]));
      last = row;
    }
    if (!more || !last) return { items };
    // A table query's rows share its pk; an index query's rows name their own.
    const key: Record<string, string> = { pk: q.index ? last[ROW_PK]! : q.pk, sk: last[ROW_SK] };
    if (q.index) Object.assign(key, { [`${q.index}pk`]: q.pk, [plan.skCol]: last[ROW_INDEX_SK]! });
    return { items, cursor: encodeCursor(key) };
  }

  cursorAfter(q: KvQuery, item: KvItem): string {
    // The key query() gives out for its last row: a table query's own pk and the row's sk, plus the
    // index sort key for an index query.
    if (!q.index) return encodeCursor({ pk: q.pk, sk: item.sk });
    const skCol = `${q.index}sk` as const;
    return encodeCursor({ pk: item.pk, sk: item.sk, [`${q.index}pk`]: q.pk, [skCol]: String(item[skCol]) });
  }

  /** The prepared statement for one shape of query, built once. */
  private queryPlan(index: KvQuery['index'], skKind: string, descending: boolean, cursor: boolean, limited: boolean) {
    const shape = `${index ?? ''}|${skKind}|${descending}|${cursor}|${limited}`;
    let plan = this.queries.get(shape);
    if (plan) return plan;
    const pkCol = index ? `${index}pk` : 'pk';
    const skCol = index ? `${index}sk` : 'sk';
    const dir = descending ? 'DESC' : 'ASC';
    const where = [`${pkCol} = @pk`, `(expires_at IS NULL OR expires_at * 1000 > @now)`];
    if (index) where.push(`${skCol} IS NOT NULL`);
    if (skKind === 'beginsWith') where.push(`${skCol} >= @skLo AND ${skCol} < @skHi`);
    else if (skKind === 'between') where.push(`${skCol} BETWEEN @skLo AND @skHi`);
    else if (skKind) where.push(`${skCol} ${{ gt: '>', gte: '>=', lt: '<', lte: '<=' }[skKind]} @skV`);
    // Rows are ordered by the sort key, then the primary key (index sort keys need not be unique).
    const order = index ? [skCol, 'pk', 'sk'] : ['sk'];
    if (cursor) where.push(`(${order.join(', ')}) ${descending ? '<' : '>'} (${order.map((_, i) => `@c${i}`).join(', ')})`);
    // No LIMIT without a limit: LIMIT -1 costs SQLite twice the time of none.
    // Rows come back as arrays with only what is needed: each column read costs a string per row.
    const columns = index ? `size, item, sk, pk, ${skCol}` : 'size, item, sk';
    const sql = `SELECT ${columns} FROM kv WHERE ${where.join(' AND ')} ORDER BY ${order
      .map((c) => `${c} ${dir}`)
      .join(', ')}${limited ? ' LIMIT @rows' : ''}`;
    plan = { stmt: this.db.prepare(sql).raw(true), order, skCol };
    this.queries.set(shape, plan);
    return plan;
  }

  /** Removes expired items for good (they are already invisible); DynamoDB's TTL does the same, later. */
  sweepExpired(): Promise<number> {
    return this.enqueue(() => this.stmt.sweep.run(Math.floor(this.nowMs() / 1000)).changes);
  }
}
