/** The typed after-commit hook registry (shared/hooks.ts). */
import { describe, expect, it } from 'vitest';
import { Hooks } from '../../lambdas/shared/hooks.js';

type E = { type: 'a.created'; n: number } | { type: 'a.deleted'; id: string };

describe('Hooks', () => {
  it('runs the handlers bound to the type and to *, and no others', async () => {
    const hooks = new Hooks<E, { who: string }>('test');
    const seen: string[] = [];
    hooks.on('a.created', (e, c) => void seen.push(`created ${e.n} by ${c.who}`));
    hooks.on('a.deleted', (e) => void seen.push(`deleted ${e.id}`));
    hooks.on('*', (e) => void seen.push(`any ${e.type}`));
    await hooks.fire({ type: 'a.created', n: 1 }, { who: 'x' });
    expect(seen).toEqual(['created 1 by x', 'any a.created']);
  });

  it('waits for async handlers, and a failing one neither rejects fire nor stops the others', async () => {
    const hooks = new Hooks<E, null>('test');
    const seen: number[] = [];
    hooks.on('a.created', async (e) => {
      await new Promise((r) => setTimeout(r, 5));
      seen.push(e.n);
    });
    hooks.on('a.created', () => {
      throw new Error('boom');
    });
    hooks.on('*', async () => {
      throw new Error('async boom');
    });
    await expect(hooks.fire({ type: 'a.created', n: 7 }, null)).resolves.toBeUndefined();
    expect(seen).toEqual([7]);
  });

  it('unbinds', async () => {
    const hooks = new Hooks<E, null>('test');
    let calls = 0;
    const off = hooks.on('*', () => void calls++);
    await hooks.fire({ type: 'a.deleted', id: 'r' }, null);
    off();
    await hooks.fire({ type: 'a.deleted', id: 'r' }, null);
    expect(calls).toBe(1);
  });
});
