/**
 * How long past its route's timeout a call may hold what it claimed (an operation id, a concurrency
 * slot): the time it takes to answer and record once the upstream has answered or timed out. After
 * that a holder that crashed or stalled loses its claim to the next caller.
 */
export const HOLD_MARGIN_MS = 30_000;

/** How long a call with `timeoutMs` may hold a claim. */
export const holdMs = (timeoutMs: number): number => timeoutMs + HOLD_MARGIN_MS;
