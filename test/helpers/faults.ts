import { expect } from 'vitest';
import { PlatformError } from '../../lambdas/shared/errors.js';

/** The PlatformError `run` throws, as the code, param and message a client would get; fails the test when it throws none. */
export function thrownFault(run: () => unknown): { code: string; param: string | null; message: string } {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(PlatformError);
    const e = error as PlatformError;
    return { code: e.code, param: e.param, message: e.message };
  }
  throw new Error('expected a PlatformError');
}
