/** onFirstCall (lambdas/engine/adapter-kit/memo.ts): a port built at its first call, once, and again after a failed load. */
import { describe, expect, it } from 'vitest';
import { onFirstCall } from '../../lambdas/engine/adapter-kit/memo.js';

interface Port {
  get(key: string): Promise<string>;
}

describe('onFirstCall', () => {
  it('loads nothing until a method is called, then once for every call after', async () => {
    let loads = 0;
    const port = onFirstCall<Port>(async () => {
      loads++;
      return { get: async (key) => `value of ${key}` };
    });
    // Awaiting the port itself is no call (it is not a thenable).
    expect(await Promise.resolve(port)).toBe(port);
    expect(loads).toBe(0);
    expect(await Promise.all([port.get('a'), port.get('b')])).toEqual(['value of a', 'value of b']);
    expect(await port.get('c')).toBe('value of c');
    expect(loads).toBe(1);
  });

  it('a failed load fails that call and is tried again at the next one', async () => {
    let loads = 0;
    const port = onFirstCall<Port>(async () => {
      if (++loads === 1) throw new Error('throttled');
      return { get: async () => 'ok' };
    });
    await expect(port.get('x')).rejects.toThrow('throttled');
    expect(await port.get('x')).toBe('ok');
    expect(loads).toBe(2);
  });
});
