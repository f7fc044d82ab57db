/**
 * The idempotency records contract (lambdas/shared/idempotency.ts). It runs over each key-value
 * adapter (see idempotency.*.contract.test.ts): the records rely on conditional puts, `ifEquals`,
 * expiry and transactions behaving alike on SQLite and on DynamoDB.
 */
import { describe, expect, it, beforeEach, afterEach } from 'vitest';
import type { KvValue } from '../../lambdas/engine/ports.js';
import { ConditionFailedError, EngineLimitError, TransactionCanceledError } from '../../lambdas/engine/errors.js';
import { IdempotencyLeaseLostError, IdempotencyStore, type IdempotencyBegin, type IdempotencyOptions } from '../../lambdas/shared/idempotency.js';
import type { KvFixture } from './kv-contract.js';

export interface IdempotencyContractOptions {
  /** dynalite has no TransactWriteItems: `completionWrite` inside `kv.transact` runs on the embedded engine only. */
  transactions: boolean;
}

const TTL = 3600;
const LEASE = 30;

/** Nested, unicode, every JSON type: what an answer may hold. */
const ANSWER: KvValue = {
  status: 201,
  body: {
    id: 'rec_01',
    text: 'héllo wörld — 你好 🌍 \u0000 "quoted" \\ back',
    n: [0, -1, 1.5, 1.25e-7, Number.MAX_SAFE_INTEGER], // (the DynamoDB document client refuses unsafe integers such as 1e21)
    flags: { yes: true, no: false, none: null },
    deep: { a: { b: { c: [{ d: 'e' }, [], {}] } } },
    empty: '',
  },
  headers: { 'x-operation-id': 'op_12345678' },
};

export function idempotencyContract(name: string, makeKv: () => Promise<KvFixture>, options: IdempotencyContractOptions) {
  describe(`idempotency records contract: ${name}`, () => {
    let f: KvFixture;
    let tenant: string;
    let n = 0;
    const store = (overrides: Partial<IdempotencyOptions> = {}) =>
      new IdempotencyStore(f.kv, f.clock, { scope: 'test.idem', ttlSeconds: TTL, inProgressSeconds: LEASE, ...overrides });
    const started = (b: IdempotencyBegin) => {
      expect(b.state).toBe('started');
      return (b as { token: string }).token;
    };

    beforeEach(async () => {
      f = await makeKv();
      tenant = `t${Date.now()}x${n++}`; // fresh tenant, hence fresh partitions, per test: adapters may share a table
    });
    afterEach(async () => f.cleanup());

    it('starts on the first begin and reports in_progress to a second, storing the documented item', async () => {
      const s = store();
      const t0 = f.clock.now();
      const token = started(await s.begin(tenant, 'op-1', 'fp'));
      expect(token).toMatch(/^[0-9a-f-]{36}$/);
      expect(await s.begin(tenant, 'op-1', 'fp')).toEqual({ state: 'in_progress', until: t0 + LEASE * 1000 });

      expect(await f.kv.get({ pk: `idem#test.idem#${tenant}#op-1`, sk: 'idem' })).toEqual({
        pk: `idem#test.idem#${tenant}#op-1`,
        sk: 'idem',
        status: 'in_progress',
        fingerprint: 'fp',
        token,
        in_progress_until: t0 + LEASE * 1000,
        expires_at: Math.ceil(t0 / 1000) + TTL,
      });
    });

    it('replays the exact answer after complete, and resets the expiry to ttl from completion', async () => {
      const s = store();
      const token = started(await s.begin(tenant, 'op-1', 'fp'));
      f.clock.advance(5_000);
      await s.complete(tenant, 'op-1', token, ANSWER);
      for (let i = 0; i < 2; i++) expect(await s.begin(tenant, 'op-1', 'fp')).toStrictEqual({ state: 'completed', answer: ANSWER });

      const item = await f.kv.get({ pk: `idem#test.idem#${tenant}#op-1`, sk: 'idem' });
      expect(item).toMatchObject({ status: 'completed', fingerprint: 'fp', expires_at: Math.ceil(f.clock.now() / 1000) + TTL });
      expect(item).not.toHaveProperty('in_progress_until');
      // Completing again (a retried complete, or after the record turned completed) is refused.
      await expect(s.complete(tenant, 'op-1', token, 'other')).rejects.toBeInstanceOf(IdempotencyLeaseLostError);
      expect(await s.abandon(tenant, 'op-1', token)).toBe(false);
      expect(await s.begin(tenant, 'op-1', 'fp')).toStrictEqual({ state: 'completed', answer: ANSWER });
    });

    it('replays scalar and null answers, and any JSON a caller may send back (huge numbers, prototype-named and empty keys)', async () => {
      const s = store();
      for (const [i, answer] of ([null, 0, false, '', 'ok', [1, 'two'], 1e300, JSON.parse('{"__proto__":1,"constructor":{"name":"Set"},"":[2]}')] as KvValue[]).entries()) {
        const token = started(await s.begin(tenant, `scalar-${i}`, 'fp'));
        await s.complete(tenant, `scalar-${i}`, token, answer);
        // Compared as JSON: an own `__proto__` key defeats structural equality.
        expect(JSON.stringify(await s.begin(tenant, `scalar-${i}`, 'fp'))).toBe(JSON.stringify({ state: 'completed', answer }));
      }
    });

    it('refuses the same key with another fingerprint, in progress and completed', async () => {
      const s = store();
      const token = started(await s.begin(tenant, 'op-1', 'fp-a'));
      expect(await s.begin(tenant, 'op-1', 'fp-b')).toEqual({ state: 'mismatch' });
      await s.complete(tenant, 'op-1', token, 'done');
      expect(await s.begin(tenant, 'op-1', 'fp-b')).toEqual({ state: 'mismatch' });
      expect(await s.begin(tenant, 'op-1', 'fp-a')).toEqual({ state: 'completed', answer: 'done' });
      // Even past its lease, an in-progress record is not taken over by another request.
      started(await s.begin(tenant, 'op-2', 'fp-a'));
      f.clock.advance(LEASE * 1000);
      expect(await s.begin(tenant, 'op-2', 'fp-b')).toEqual({ state: 'mismatch' });
    });

    it('forgets a completed record once its ttl has passed, and the key starts afresh', async () => {
      const s = store();
      const token = started(await s.begin(tenant, 'op-1', 'fp-a'));
      await s.complete(tenant, 'op-1', token, 'first');
      f.clock.advance(TTL * 1000 - 1);
      expect(await s.begin(tenant, 'op-1', 'fp-a')).toEqual({ state: 'completed', answer: 'first' });
      f.clock.advance(1);
      // Gone: the same key now starts again, even with another request.
      const again = started(await s.begin(tenant, 'op-1', 'fp-b'));
      expect(again).not.toBe(token);
      await s.complete(tenant, 'op-1', again, 'second');
      expect(await s.begin(tenant, 'op-1', 'fp-b')).toEqual({ state: 'completed', answer: 'second' });
    });

    it('forgets a crashed in-progress record once its ttl has passed', async () => {
      const s = store({ ttlSeconds: 60, inProgressSeconds: 10 });
      const token = started(await s.begin(tenant, 'op-1', 'fp'));
      f.clock.advance(60_000);
      started(await s.begin(tenant, 'op-1', 'other-fp'));
      await expect(s.complete(tenant, 'op-1', token, 'late')).rejects.toBeInstanceOf(ConditionFailedError);
    });

    it('takes over a record whose lease ran out; the old holder can then neither complete nor abandon', async () => {
      const s = store();
      const old = started(await s.begin(tenant, 'op-1', 'fp'));
      f.clock.advance(LEASE * 1000 - 1);
      expect((await s.begin(tenant, 'op-1', 'fp')).state).toBe('in_progress');
      f.clock.advance(1);
      const next = started(await s.begin(tenant, 'op-1', 'fp'));
      expect(next).not.toBe(old);
      expect(await s.begin(tenant, 'op-1', 'fp')).toEqual({ state: 'in_progress', until: f.clock.now() + LEASE * 1000 });

      const lost = await s.complete(tenant, 'op-1', old, 'stale').catch((e) => e);
      expect(lost).toBeInstanceOf(IdempotencyLeaseLostError);
      expect(lost).toBeInstanceOf(ConditionFailedError);
      expect(await s.abandon(tenant, 'op-1', old)).toBe(false);
      expect((await s.begin(tenant, 'op-1', 'fp')).state).toBe('in_progress');

      await s.complete(tenant, 'op-1', next, 'fresh');
      expect(await s.begin(tenant, 'op-1', 'fp')).toEqual({ state: 'completed', answer: 'fresh' });
    });

    it('completes a run that outlived its lease when nobody took it over', async () => {
      const s = store();
      const token = started(await s.begin(tenant, 'op-1', 'fp'));
      f.clock.advance(LEASE * 1000 * 3);
      await s.complete(tenant, 'op-1', token, 'slow but done');
      expect(await s.begin(tenant, 'op-1', 'fp')).toEqual({ state: 'completed', answer: 'slow but done' });
    });

    it('lets exactly one of 20 concurrent begins start', async () => {
      const s = store();
      const results = await Promise.all(Array.from({ length: 20 }, () => s.begin(tenant, 'race', 'fp')));
      expect(results.filter((r) => r.state === 'started')).toHaveLength(1);
      expect(results.filter((r) => r.state === 'in_progress')).toHaveLength(19);
    });

    it('lets exactly one of 20 concurrent callers take over a stale record', async () => {
      const s = store();
      const old = started(await s.begin(tenant, 'race', 'fp'));
      f.clock.advance(LEASE * 1000);
      // Separate store objects, as separate Lambda instances would be.
      const results = await Promise.all(Array.from({ length: 20 }, () => store().begin(tenant, 'race', 'fp')));
      const winners = results.filter((r): r is { state: 'started'; token: string } => r.state === 'started');
      expect(winners).toHaveLength(1);
      expect(results.filter((r) => r.state === 'in_progress')).toHaveLength(19);
      await expect(s.complete(tenant, 'race', old, 'stale')).rejects.toBeInstanceOf(IdempotencyLeaseLostError);
      await s.complete(tenant, 'race', winners[0].token, 'won');
      expect(await s.begin(tenant, 'race', 'fp')).toEqual({ state: 'completed', answer: 'won' });
    });

    it('abandon deletes only its own in-progress record, and the next begin starts at once', async () => {
      const s = store();
      const token = started(await s.begin(tenant, 'op-1', 'fp'));
      expect(await s.abandon(tenant, 'op-1', 'not-the-token')).toBe(false);
      expect((await s.begin(tenant, 'op-1', 'fp')).state).toBe('in_progress');
      expect(await s.abandon(tenant, 'op-1', token)).toBe(true);
      expect(await f.kv.get({ pk: `idem#test.idem#${tenant}#op-1`, sk: 'idem' })).toBeUndefined();
      expect(await s.abandon(tenant, 'op-1', token)).toBe(false);
      // Abandoned, the key is free again, also for another request.
      const next = started(await s.begin(tenant, 'op-1', 'fp-2'));
      await expect(s.complete(tenant, 'op-1', token, 'old')).rejects.toBeInstanceOf(IdempotencyLeaseLostError);
      await s.complete(tenant, 'op-1', next, 'new');
      expect(await s.begin(tenant, 'op-1', 'fp-2')).toEqual({ state: 'completed', answer: 'new' });
    });

    it('keeps tenants and scopes apart', async () => {
      const ai = store({ scope: 'ai.op' });
      const events = store({ scope: 'events.idem' });
      const other = `${tenant}b`;
      const a = started(await ai.begin(tenant, 'same-key', 'fp'));
      const b = started(await ai.begin(other, 'same-key', 'fp'));
      const c = started(await events.begin(tenant, 'same-key', 'fp'));
      expect(new Set([a, b, c]).size).toBe(3);
      await ai.complete(tenant, 'same-key', a, 'A');
      await ai.complete(other, 'same-key', b, 'B');
      expect(await ai.begin(tenant, 'same-key', 'fp')).toEqual({ state: 'completed', answer: 'A' });
      expect(await ai.begin(other, 'same-key', 'fp')).toEqual({ state: 'completed', answer: 'B' });
      expect((await events.begin(tenant, 'same-key', 'fp')).state).toBe('in_progress');
      // A token is only good for its own record.
      await expect(events.complete(tenant, 'same-key', a, 'wrong')).rejects.toBeInstanceOf(IdempotencyLeaseLostError);
      expect(await events.abandon(tenant, 'same-key', b)).toBe(false);
    });

    it('handles keys with prototype-like names', async () => {
      const s = store();
      const keys = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'];
      for (const key of keys) {
        const token = started(await s.begin(tenant, key, `fp-${key}`));
        await s.complete(tenant, key, token, { key });
      }
      for (const key of keys) expect(await s.begin(tenant, key, `fp-${key}`)).toEqual({ state: 'completed', answer: { key } });
    });

    it('handles unicode and long keys, keeping keys that share a long prefix apart', async () => {
      const s = store();
      const unicode = 'ключ-鍵-🔑-é\u0301-#-with#hashes';
      const longA = `${'ü'.repeat(1500)}A`; // over 1 KB of UTF-8: stored by hash
      const longB = `${'ü'.repeat(1500)}B`;
      const huge = '🔑'.repeat(5000); // 20 KB
      for (const key of [unicode, longA, longB, huge]) {
        const token = started(await s.begin(tenant, key, 'fp'));
        await s.complete(tenant, key, token, key.slice(-1));
      }
      expect(await s.begin(tenant, unicode, 'fp')).toEqual({ state: 'completed', answer: 's' });
      expect(await s.begin(tenant, longA, 'fp')).toEqual({ state: 'completed', answer: 'A' });
      expect(await s.begin(tenant, longB, 'fp')).toEqual({ state: 'completed', answer: 'B' });
      expect(await s.begin(tenant, huge, 'fp')).toEqual({ state: 'completed', answer: '🔑'.slice(-1) });
      expect(await f.kv.get({ pk: `idem#test.idem#${tenant}#${unicode}`, sk: 'idem' })).toMatchObject({ status: 'completed' });
    });

    it('refuses an answer over the item limit, leaving the record in progress to abandon', async () => {
      const s = store();
      const token = started(await s.begin(tenant, 'big', 'fp'));
      const err = await s.complete(tenant, 'big', token, { blob: 'x'.repeat(401 * 1024) }).catch((e) => e);
      expect(err).toBeInstanceOf(EngineLimitError);
      expect(err.limit).toBe('item_size');
      expect((await s.begin(tenant, 'big', 'fp')).state).toBe('in_progress');
      expect(await s.abandon(tenant, 'big', token)).toBe(true);
      started(await s.begin(tenant, 'big', 'fp'));
    });

    it('refuses scopes and tenants that could run into each other', async () => {
      expect(() => store({ scope: 'a#b' })).toThrow(TypeError);
      expect(() => store({ scope: '' })).toThrow(TypeError);
      expect(() => store({ ttlSeconds: 0 })).toThrow(RangeError);
      const s = store();
      await expect(s.begin(`${tenant}#x`, 'k', 'fp')).rejects.toThrow(TypeError);
      await expect(s.begin('', 'k', 'fp')).rejects.toThrow(TypeError);
      await expect(s.begin(tenant, '', 'fp')).rejects.toThrow(TypeError);
    });

    describe.skipIf(!options.transactions)('inside a transaction', () => {
      it('commits the completion with the service write, atomically', async () => {
        const s = store();
        const token = started(await s.begin(tenant, 'publish-1', 'fp'));
        const event = { pk: `evt#${tenant}`, sk: 'e1', body: 'hello' };
        await f.kv.transact([{ put: event, condition: { ifAbsent: true } }, s.completionWrite(tenant, 'publish-1', token, { id: 'e1' })]);
        expect(await f.kv.get({ pk: event.pk, sk: event.sk })).toEqual(event);
        expect(await s.begin(tenant, 'publish-1', 'fp')).toEqual({ state: 'completed', answer: { id: 'e1' } });
      });

      it('applies neither write when the service write fails, nor when the lease was lost', async () => {
        const s = store();
        const taken = { pk: `evt#${tenant}`, sk: 'taken' };
        await f.kv.put(taken);
        const token = started(await s.begin(tenant, 'publish-1', 'fp'));
        const failed = await f.kv
          .transact([{ put: taken, condition: { ifAbsent: true } }, s.completionWrite(tenant, 'publish-1', token, 'x')])
          .catch((e) => e);
        expect(failed).toBeInstanceOf(TransactionCanceledError);
        expect(failed.failed).toEqual([0]);
        expect((await s.begin(tenant, 'publish-1', 'fp')).state).toBe('in_progress');

        f.clock.advance(LEASE * 1000);
        const next = started(await s.begin(tenant, 'publish-1', 'fp'));
        const e2 = { pk: `evt#${tenant}`, sk: 'e2' };
        const lost = await f.kv
          .transact([{ put: e2, condition: { ifAbsent: true } }, s.completionWrite(tenant, 'publish-1', token, 'stale')])
          .catch((e) => e);
        expect(lost).toBeInstanceOf(TransactionCanceledError);
        expect(lost.failed).toEqual([1]);
        expect(await f.kv.get(e2)).toBeUndefined();
        await f.kv.transact([{ put: e2, condition: { ifAbsent: true } }, s.completionWrite(tenant, 'publish-1', next, 'won')]);
        expect(await s.begin(tenant, 'publish-1', 'fp')).toEqual({ state: 'completed', answer: 'won' });
      });
    });
  });
}
