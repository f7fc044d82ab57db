import { describe, expect, it } from 'vitest';
import { sqliteKvFixture } from '../helpers/kv-fixtures.js';
import { fingerprintOf } from '../../lambdas/shared/idempotency.js';
import { idempotencyContract } from './idempotency-contract.js';

idempotencyContract('embedded (SQLite on disk)', async () => sqliteKvFixture('idem-'), { transactions: true });

// Engine-independent: the fingerprint helper.
describe('fingerprintOf', () => {
  it('ignores object key order and undefined fields, and tells different requests apart', () => {
    const a = fingerprintOf({ b: 1, a: { y: [1, { q: 'é' }], x: null } });
    expect(a).toMatch(/^[0-9a-f]{64}$/);
    expect(fingerprintOf({ a: { x: null, y: [1, { q: 'é' }] }, b: 1 })).toBe(a);
    expect(fingerprintOf({ a: { x: null, y: [1, { q: 'é' }] }, b: 1, c: undefined } as never)).toBe(a);
    expect(fingerprintOf({ a: { x: null, y: [{ q: 'é' }, 1] }, b: 1 })).not.toBe(a); // array order counts
    expect(fingerprintOf({ a: { x: null, y: [1, { q: 'é' }] }, b: '1' })).not.toBe(a);
    expect(fingerprintOf('1')).not.toBe(fingerprintOf(1));
    expect(fingerprintOf({ 'a":1,"b': 2 })).not.toBe(fingerprintOf({ a: 1, b: 2 }));
  });
});
