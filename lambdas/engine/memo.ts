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
