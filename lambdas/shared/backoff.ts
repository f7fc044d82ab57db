/**
 * The pause before retrying a conditional write lost to a concurrent writer: random ("full jitter"),
 * growing with the attempt up to `maxMs`. It waits in real time, not on the engine's clock: it spreads
 * writers contending for the store, it is not business time (a test's ManualClock would never wake it).
 */
export const contentionPauseMs = (attempt: number, maxMs: number): number => Math.random() * Math.min(maxMs, 2 ** attempt);

export const pause = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
