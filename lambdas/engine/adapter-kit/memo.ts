/**
 * A load run once and its result kept, except a failure: the next call tries again (a secret read at
 * cold start must not stay broken for the container's life because of one throttled call).
 */
export function memoUntilFailure<T>(load: () => Promise<T>): () => Promise<T> {
  let current: Promise<T> | undefined;
  return () => {
    current ??= load().catch((error) => {
      current = undefined;
      throw error;
    });
    return current;
  };
}

/**
 * A port whose every method is async, built by `load` at its first call: the module behind it (an SDK
 * client and its adapter) is evaluated only by a process that uses the port, not at every cold start.
 * A failed load is tried again at the next call.
 */
export function onFirstCall<T extends object>(load: () => Promise<T>): T {
  const port = memoUntilFailure(load);
  return new Proxy({} as T, {
    get: (_t, prop) =>
      // Not a thenable: an `await` of the port itself must not call load.
      prop === 'then' ? undefined : (...args: unknown[]) => port().then((p) => (p as Record<PropertyKey, (...a: unknown[]) => unknown>)[prop](...args)),
  });
}
