/**
 * The key-value store contract. Every adapter runs it (see *.contract.test.ts); what passes here
 * behaves the same on SQLite and on DynamoDB, limits included.
 */
import { describe, expect, it, beforeEach, afterEach } from 'vitest';
import type { KvItem, KvValue, KeyValueStore } from '../../lambdas/engine/ports.js';
import type { ManualClock } from '../../lambdas/engine/clock.js';
import { ConditionFailedError, EngineLimitError, TransactionCanceledError } from '../../lambdas/engine/errors.js';
import { InvalidCursorError } from '../../lambdas/shared/cursors.js';

export interface KvFixture {
  kv: KeyValueStore;
  clock: ManualClock;
  cleanup(): Promise<void>;
}

export interface KvContractOptions {
  /** dynalite has no TransactWriteItems: the AWS adapter's transactions are covered with a client mock. */
  transactions: boolean;
}

const big = (bytes: number) => 'x'.repeat(bytes);

export function kvContract(name: string, setup: () => Promise<KvFixture>, options: KvContractOptions) {
  describe(`key-value store contract: ${name}`, () => {
    let f: KvFixture;
    let pk: string;
    let n = 0;
    beforeEach(async () => {
      f = await setup();
      pk = `p${Date.now()}-${n++}`; // fresh partition per test, so adapters may share a table
    });
    afterEach(async () => f.cleanup());

    it('puts and gets an item with nested values', async () => {
      const item = { pk, sk: 'a', s: 'text', n: 42.5, b: true, z: null, l: [1, 'two', { three: 3 }], m: { x: { y: 'z' } } };
      await f.kv.put(item);
      expect(await f.kv.get({ pk, sk: 'a' })).toEqual(item);
      expect(await f.kv.get({ pk, sk: 'missing' })).toBeUndefined();
    });

    it('reads many keys at once, in key order, hiding missing and expired items', async () => {
      const now = Math.floor(f.clock.now() / 1000);
      await f.kv.put({ pk, sk: 'a', v: 1 });
      await f.kv.put({ pk, sk: 'c', v: 3 });
      await f.kv.put({ pk, sk: 'old', v: 0, expires_at: now - 1 });
      const got = await f.kv.getMany([{ pk, sk: 'c' }, { pk, sk: 'missing' }, { pk, sk: 'a' }, { pk, sk: 'old' }]);
      expect(got.map((i) => i?.v)).toEqual([3, undefined, 1, undefined]);
      expect(await f.kv.getMany([])).toEqual([]);
      await expect(f.kv.getMany([{ pk, sk: 'a' }, { pk, sk: 'a' }])).rejects.toMatchObject({ limit: 'batch_get_items' });
      await expect(f.kv.getMany(Array.from({ length: 101 }, (_, i) => ({ pk, sk: `k${i}` })))).rejects.toMatchObject({ limit: 'batch_get_items' });
    });

    it('honours ifAbsent, ifExists and ifEquals on put and delete', async () => {
      await f.kv.put({ pk, sk: 'a', v: 1 }, { ifAbsent: true });
      await expect(f.kv.put({ pk, sk: 'a', v: 2 }, { ifAbsent: true })).rejects.toBeInstanceOf(ConditionFailedError);
      await expect(f.kv.put({ pk, sk: 'b', v: 2 }, { ifExists: true })).rejects.toBeInstanceOf(ConditionFailedError);
      await expect(f.kv.put({ pk, sk: 'a', v: 3 }, { ifEquals: { v: 2 } })).rejects.toBeInstanceOf(ConditionFailedError);
      await f.kv.put({ pk, sk: 'a', v: 3 }, { ifEquals: { v: 1 } });
      await expect(f.kv.delete({ pk, sk: 'a' }, { ifEquals: { v: 1 } })).rejects.toBeInstanceOf(ConditionFailedError);
      expect((await f.kv.get({ pk, sk: 'a' }))?.v).toBe(3);
      await f.kv.delete({ pk, sk: 'a' }, { ifEquals: { v: 3 } });
      expect(await f.kv.get({ pk, sk: 'a' })).toBeUndefined();
      await f.kv.delete({ pk, sk: 'a' }); // deleting nothing is fine
    });

    it('honours ifBelow: a counter moves only while under its cap, a missing one counting as 0', async () => {
      const key = { pk, sk: 'cap' };
      const take = () => f.kv.update({ key, add: { n: 1 }, condition: { ifBelow: { n: 2 } } });
      expect((await take()).n).toBe(1); // absent item
      expect((await take()).n).toBe(2);
      await expect(take()).rejects.toBeInstanceOf(ConditionFailedError);
      expect((await f.kv.update({ key, add: { n: -1 } })).n).toBe(1);
      expect((await take()).n).toBe(2);
      // A missing attribute of an existing item is 0 too; a cap of 0 (or below) admits nothing.
      await f.kv.put({ pk, sk: 'other', label: 'x' });
      await f.kv.update({ key: { pk, sk: 'other' }, add: { m: 1 }, condition: { ifBelow: { m: 1 } } });
      await expect(f.kv.update({ key: { pk, sk: 'zero' }, add: { n: 1 }, condition: { ifBelow: { n: 0 } } })).rejects.toBeInstanceOf(ConditionFailedError);
      await expect(f.kv.put({ pk, sk: 'other', label: 'y' }, { ifBelow: { label: 5 } })).rejects.toBeInstanceOf(ConditionFailedError); // not a number
      // Every named attribute must be under its cap.
      await expect(f.kv.delete({ pk, sk: 'cap' }, { ifBelow: { n: 3, other: 0 } })).rejects.toBeInstanceOf(ConditionFailedError);
      await f.kv.delete({ pk, sk: 'cap' }, { ifBelow: { n: 3, other: 1 } });
      expect(await f.kv.get(key)).toBeUndefined();
    });

    it('updates with set, add and remove, creating the item and returning the new one', async () => {
      const created = await f.kv.update({ key: { pk, sk: 'c' }, set: { name: 'n' }, add: { count: 2 } });
      expect(created).toEqual({ pk, sk: 'c', name: 'n', count: 2 });
      const next = await f.kv.update({ key: { pk, sk: 'c' }, add: { count: 3 }, remove: ['name'] });
      expect(next).toEqual({ pk, sk: 'c', count: 5 });
      await expect(f.kv.update({ key: { pk, sk: 'c' }, set: { x: 1 }, condition: { ifEquals: { count: 4 } } })).rejects.toBeInstanceOf(
        ConditionFailedError,
      );
      await expect(f.kv.update({ key: { pk, sk: 'none' }, set: { x: 1 }, condition: { ifExists: true } })).rejects.toBeInstanceOf(
        ConditionFailedError,
      );
    });

    it('counts atomically under concurrent adds', async () => {
      await Promise.all(Array.from({ length: 20 }, () => f.kv.update({ key: { pk, sk: 'counter' }, add: { n: 1 } })));
      expect((await f.kv.get({ pk, sk: 'counter' }))?.n).toBe(20);
    });

    it('queries one partition by sort-key conditions, in either direction, with cursors', async () => {
      for (const sk of ['a#1', 'a#2', 'a#3', 'b#1', 'b#2']) await f.kv.put({ pk, sk, v: sk });
      await f.kv.put({ pk: `${pk}-other`, sk: 'a#1' });
      const sks = async (q: Parameters<KeyValueStore['query']>[0]) => (await f.kv.query(q)).items.map((i) => i.sk);
      expect(await sks({ pk })).toEqual(['a#1', 'a#2', 'a#3', 'b#1', 'b#2']);
      expect(await sks({ pk, sk: { beginsWith: 'a#' } })).toEqual(['a#1', 'a#2', 'a#3']);
      expect(await sks({ pk, sk: { beginsWith: 'a#' }, descending: true })).toEqual(['a#3', 'a#2', 'a#1']);
      expect(await sks({ pk, sk: { between: ['a#2', 'b#1'] } })).toEqual(['a#2', 'a#3', 'b#1']);
      expect(await sks({ pk, sk: { gt: 'a#3' } })).toEqual(['b#1', 'b#2']);
      expect(await sks({ pk, sk: { lte: 'a#2' } })).toEqual(['a#1', 'a#2']);

      const seen: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await f.kv.query({ pk, limit: 2, cursor, descending: true });
        expect(page.items.length).toBeLessThanOrEqual(2);
        seen.push(...page.items.map((i) => i.sk));
        cursor = page.cursor;
      } while (cursor);
      expect(seen).toEqual(['b#2', 'b#1', 'a#3', 'a#2', 'a#1']);
    });

    it('refuses a cursor it did not give out with the one InvalidCursorError (shared/cursors.ts)', async () => {
      await f.kv.put({ pk, sk: 'a' });
      const foreign = Buffer.from(JSON.stringify({ other: 'x' })).toString('base64url');
      for (const cursor of ['not a cursor', foreign]) {
        await expect(f.kv.query({ pk, cursor }), cursor).rejects.toBeInstanceOf(InvalidCursorError);
      }
    });

    it("refuses a cursor of another partition, table or index, with or without a sort key condition (it is not a position in this one)", async () => {
      for (const part of ['a', 'b']) for (const n of [1, 2, 3]) await f.kv.put({ pk: `${pk}-${part}`, sk: `s#${n}`, gsi1pk: `${pk}-idx-${part}`, gsi1sk: `s#${n}` });
      const queries: Parameters<KeyValueStore['query']>[0][] = [{ pk: `${pk}-a` }, { index: 'gsi1', pk: `${pk}-idx-a` }, { index: 'gsi1', pk: `${pk}-idx-a`, sk: { beginsWith: 's#' } }];
      for (const q of queries) {
        const cursor = (await f.kv.query({ ...q, limit: 1 })).cursor!;
        expect(cursor, JSON.stringify(q)).toBeTypeOf('string');
        const other = { ...q, pk: q.pk.replace(/a$/, 'b') };
        await expect(f.kv.query({ ...other, cursor }), JSON.stringify(q)).rejects.toBeInstanceOf(InvalidCursorError);
        await expect(f.kv.query({ ...other, cursor: f.kv.cursorAfter(q, (await f.kv.query(q)).items[0]) }), JSON.stringify(q)).rejects.toBeInstanceOf(InvalidCursorError);
        // Its own partition still takes it.
        expect((await f.kv.query({ ...q, cursor })).items.map((i) => i.sk), JSON.stringify(q)).toEqual(['s#2', 's#3']);
      }
    });

    it('queries a generic index; items without both index keys are not in it', async () => {
      await f.kv.put({ pk, sk: '1', gsi1pk: `${pk}-idx`, gsi1sk: 'b' });
      await f.kv.put({ pk, sk: '2', gsi1pk: `${pk}-idx`, gsi1sk: 'a' });
      await f.kv.put({ pk: `${pk}-x`, sk: '3', gsi1pk: `${pk}-idx`, gsi1sk: 'a' });
      await f.kv.put({ pk, sk: '4', gsi1pk: `${pk}-idx` });
      await f.kv.put({ pk, sk: '5', gsi2pk: `${pk}-idx`, gsi2sk: 'a' });
      const all = await f.kv.query({ index: 'gsi1', pk: `${pk}-idx` });
      expect(all.items.map((i) => i.gsi1sk)).toEqual(['a', 'a', 'b']);
      const paged: string[] = [];
      let cursor: string | undefined;
      do {
        const page = await f.kv.query({ index: 'gsi1', pk: `${pk}-idx`, limit: 1, cursor });
        paged.push(...page.items.map((i) => `${i.pk}/${i.sk}`));
        cursor = page.cursor;
      } while (cursor);
      expect(paged.sort()).toEqual([`${pk}-x/3`, `${pk}/1`, `${pk}/2`].sort());
      expect((await f.kv.query({ index: 'gsi2', pk: `${pk}-idx` })).items.map((i) => i.sk)).toEqual(['5']);
    });

    it('continues a query just after any item of it (cursorAfter), table and index, either direction', async () => {
      for (const sk of ['a#1', 'a#2', 'a#3', 'b#1']) await f.kv.put({ pk, sk, gsi1pk: `${pk}-idx`, gsi1sk: sk === 'a#3' ? 'same' : `g${sk}` });
      await f.kv.put({ pk: `${pk}-y`, sk: 'z', gsi1pk: `${pk}-idx`, gsi1sk: 'same' });
      const keyOf = (i: KvItem) => `${i.pk}/${i.sk}`;
      const queries: Parameters<KeyValueStore['query']>[0][] = [
        { pk },
        { pk, descending: true },
        { pk, sk: { beginsWith: 'a#' } },
        { index: 'gsi1', pk: `${pk}-idx` },
        { index: 'gsi1', pk: `${pk}-idx`, descending: true },
      ];
      for (const q of queries) {
        const all = (await f.kv.query(q)).items;
        expect(all.length, JSON.stringify(q)).toBeGreaterThan(2);
        for (let i = 0; i < all.length; i++) {
          const rest = await f.kv.query({ ...q, cursor: f.kv.cursorAfter(q, all[i]) });
          expect(rest.items.map(keyOf), `${JSON.stringify(q)} after ${keyOf(all[i])}`).toEqual(all.slice(i + 1).map(keyOf));
        }
      }
    });

    it('hides expired items from reads, queries and conditions', async () => {
      const now = Math.floor(f.clock.now() / 1000);
      await f.kv.put({ pk, sk: 'lease', owner: 'a', expires_at: now + 30 });
      await expect(f.kv.put({ pk, sk: 'lease', owner: 'b', expires_at: now + 60 }, { ifAbsent: true })).rejects.toBeInstanceOf(
        ConditionFailedError,
      );
      f.clock.advance(31_000);
      expect(await f.kv.get({ pk, sk: 'lease' })).toBeUndefined();
      expect((await f.kv.query({ pk })).items).toEqual([]);
      await f.kv.put({ pk, sk: 'lease', owner: 'b', expires_at: now + 90 }, { ifAbsent: true });
      expect((await f.kv.get({ pk, sk: 'lease' }))?.owner).toBe('b');
    });

    it('refuses an item over 400 KB', async () => {
      await f.kv.put({ pk, sk: 'ok', blob: big(390 * 1024) });
      const err = await f.kv.put({ pk, sk: 'big', blob: big(401 * 1024) }).catch((e) => e);
      expect(err).toBeInstanceOf(EngineLimitError);
      expect(err.limit).toBe('item_size');
      expect(await f.kv.get({ pk, sk: 'big' })).toBeUndefined();
    });

    it('refuses values DynamoDB would not store exactly, in puts and transactions, and keeps the ones it does', async () => {
      let deep: KvValue = 1;
      for (let i = 0; i < 33; i++) deep = [deep];
      const bad: KvValue[] = [2 ** 53, -1e21, 1e300, 5e-324, -1e-131, deep, JSON.parse('{"a":{"__proto__":{"b":1}}}'), { a: { constructor: { name: 'Set' } } }, { constructor: 1 }, { '': 1 }];
      for (const [i, v] of bad.entries()) {
        for (const write of [() => f.kv.put({ pk, sk: `bad${i}`, v }), () => f.kv.transact([{ put: { pk, sk: `bad${i}`, v } }])]) {
          const err = await write().catch((e) => e);
          expect(err, `value ${i}`).toBeInstanceOf(EngineLimitError);
          expect(err.limit).toBe('item_value');
        }
        expect(await f.kv.get({ pk, sk: `bad${i}` })).toBeUndefined();
      }
      const good = { max: Number.MAX_SAFE_INTEGER, min: -Number.MAX_SAFE_INTEGER, small: 1e-130, frac: 0.1, zero: 0, deep: (deep as KvValue[])[0], proto: { valueOf: 1, toString: [2], hasOwnProperty: 3 } };
      await f.kv.put({ pk, sk: 'good', ...good });
      expect(await f.kv.get({ pk, sk: 'good' })).toEqual({ pk, sk: 'good', ...good });
    });

    it('stops a query page at 1 MB of items and continues with the cursor', async () => {
      for (let i = 0; i < 5; i++) await f.kv.put({ pk, sk: `big${i}`, blob: big(300 * 1024) });
      const first = await f.kv.query({ pk });
      expect(first.items.length).toBeLessThan(5);
      expect(first.cursor).toBeDefined();
      let total = first.items.length;
      let cursor = first.cursor;
      while (cursor) {
        const page = await f.kv.query({ pk, cursor });
        total += page.items.length;
        cursor = page.cursor;
      }
      expect(total).toBe(5);
    });

    describe.skipIf(!options.transactions)('transactions', () => {
      it('applies every write or none, naming the failed condition', async () => {
        await f.kv.put({ pk, sk: 'taken' });
        const err = await f.kv
          .transact([
            { put: { pk, sk: 'new1' }, condition: { ifAbsent: true } },
            { update: { pk, sk: 'counter' }, add: { n: 1 } },
            { put: { pk, sk: 'taken', x: 1 }, condition: { ifAbsent: true } },
          ])
          .catch((e) => e);
        expect(err).toBeInstanceOf(TransactionCanceledError);
        expect(err.failed).toEqual([2]);
        expect(await f.kv.get({ pk, sk: 'new1' })).toBeUndefined();
        expect(await f.kv.get({ pk, sk: 'counter' })).toBeUndefined();

        await f.kv.transact([
          { put: { pk, sk: 'new1' }, condition: { ifAbsent: true } },
          { update: { pk, sk: 'counter' }, add: { n: 1 } },
          { delete: { pk, sk: 'taken' }, condition: { ifExists: true } },
          { check: { pk, sk: 'absent' }, condition: { ifAbsent: true } },
        ]);
        expect(await f.kv.get({ pk, sk: 'new1' })).toEqual({ pk, sk: 'new1' });
        expect((await f.kv.get({ pk, sk: 'counter' }))?.n).toBe(1);
        expect(await f.kv.get({ pk, sk: 'taken' })).toBeUndefined();
      });

      it('keeps concurrent transactions apart: a failing one leaves the others applied', async () => {
        await f.kv.put({ pk, sk: 'taken' });
        const outcomes = await Promise.allSettled(
          Array.from({ length: 10 }, (_, i) =>
            f.kv.transact([
              { put: { pk, sk: `c${i}` }, condition: { ifAbsent: true } },
              { put: { pk, sk: i === 4 ? 'taken' : `d${i}` }, condition: { ifAbsent: true } },
            ]),
          ),
        );
        expect(outcomes.map((o) => o.status)).toEqual(Array.from({ length: 10 }, (_, i) => (i === 4 ? 'rejected' : 'fulfilled')));
        const sks = (await f.kv.query({ pk })).items.map((i) => i.sk);
        expect(sks).not.toContain('c4');
        expect(sks.filter((s) => s.startsWith('c') || s.startsWith('d'))).toHaveLength(18);
      });

      it('admits exactly up to a cap under concurrent transactions (ifBelow)', async () => {
        const outcomes = await Promise.allSettled(
          Array.from({ length: 12 }, (_, i) =>
            f.kv.transact([
              { put: { pk, sk: `slot${i}` }, condition: { ifAbsent: true } },
              { update: { pk, sk: 'count' }, add: { n: 1 }, condition: { ifBelow: { n: 5 } } },
            ]),
          ),
        );
        expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(5);
        for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toMatchObject({ failed: [1] });
        expect((await f.kv.get({ pk, sk: 'count' }))?.n).toBe(5);
        expect((await f.kv.query({ pk, sk: { beginsWith: 'slot' } })).items).toHaveLength(5);
      });

      it('refuses more than 100 writes, two writes on one item, and more than 4 MB', async () => {
        const many = Array.from({ length: 101 }, (_, i) => ({ put: { pk, sk: `m${i}` } }));
        await expect(f.kv.transact(many)).rejects.toMatchObject({ limit: 'transaction_items' });
        await expect(f.kv.transact([{ put: { pk, sk: 'd' } }, { delete: { pk, sk: 'd' } }])).rejects.toMatchObject({
          limit: 'transaction_duplicate_item',
        });
        const heavy = Array.from({ length: 11 }, (_, i) => ({ put: { pk, sk: `h${i}`, blob: big(390 * 1024) } }));
        await expect(f.kv.transact(heavy)).rejects.toMatchObject({ limit: 'transaction_size' });
        expect((await f.kv.query({ pk })).items).toEqual([]);
      });
    });
  });
}
