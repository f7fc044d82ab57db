/**
 * Atomic counters and rate windows over the key-value store, so a limit holds across worker processes
 * and Lambda instances (a per-process bucket lets each instance spend the whole limit on its own).
 * See `docs/decisions/rate-limits.md`.
 *
 * Layout. Names come from callers (credential ids), so they are base64url-encoded: whatever a name
 * holds (`#`, `__proto__`, non-ASCII) it stays one opaque segment of plain ASCII, never key structure.
 * | pk | sk | what |
 * |---|---|---|
 * | `ctr#<name>` | `ctr` | counter: `n`, and `expires_at` when given |
 * | `rate#<name>` | `w#<window ms>#<window start ms>` | one rate window: `n` calls counted in it |
 */
import { Buffer } from 'node:buffer';
import type { KeyValueStore, KvKey } from '../engine/ports.js';

/** Longest encoded name: DynamoDB partition keys stop at 2,048 bytes, and credential ids are far shorter. */
const MAX_ENCODED_NAME = 1024;
/** Seconds a window item outlives the window after it (TTL is whole seconds; see `windowExpiry`). */
const EXPIRY_SLACK_SECONDS = 1;
/** Previous-window counts remembered per process; the oldest entry makes room when full. */
const MAX_CACHED_WINDOWS = 10_000;

function encodeName(name: string): string {
  if (typeof name !== 'string') throw new TypeError('a counter name must be a string');
  const encoded = Buffer.from(name, 'utf8').toString('base64url');
  if (encoded.length > MAX_ENCODED_NAME) throw new RangeError(`counter name too long (over ${MAX_ENCODED_NAME} encoded characters)`);
  return encoded;
}

/** Every rate window's partition key starts with this (the stack limits rate-counting functions' writes to it). */
export const RATE_WINDOW_KEY_PREFIX = 'rate#';

/** The item holding counter `name`. */
export function counterKey(name: string): KvKey {
  return { pk: `ctr#${encodeName(name)}`, sk: 'ctr' };
}

/** The item holding the rate window of `name` that starts at `windowStart` (a multiple of `windowMs`). */
export function rateWindowKey(name: string, windowMs: number, windowStart: number): KvKey {
  return { pk: `${RATE_WINDOW_KEY_PREFIX}${encodeName(name)}`, sk: `w#${windowMs}#${windowStart}` };
}

/**
 * Unix seconds a window item expires at: the end of the window AFTER it, since that one reads it as
 * its previous window, plus a little for rounding.
 */
export function windowExpiry(windowStart: number, windowMs: number): number {
  return Math.ceil((windowStart + 2 * windowMs) / 1000) + EXPIRY_SLACK_SECONDS;
}

export interface TakeOptions {
  /** Calls (or units of cost) allowed per sliding window. */
  limit: number;
  /** Window length, whole milliseconds (60_000 for "a minute"). */
  windowMs: number;
  /** Units this call spends; default 1. At most `limit`, or it could never be allowed. */
  cost?: number;
}

export interface TakeResult {
  allowed: boolean;
  /**
   * The sliding-window estimate after this call: this call included when allowed, not when refused.
   * Fractional while part of the previous window is weighed in; round it for headers.
   */
  count: number;
  limit: number;
  /** 0 when allowed; otherwise the earliest wait after which this call would be allowed, if nothing else arrives. */
  retryAfterMs: number;
  /** Unix ms the current fixed window ends (the sliding estimate may allow calls earlier: see retryAfterMs). */
  resetAt: number;
}

/** Whether `inWindow` units in this window plus `prev` in the previous one fit the limit, `at` ms into this window. */
type Fits = (prev: number, inWindow: number, at: number) => boolean;

interface CachedWindow {
  start: number;
  count: Promise<number>;
}

/**
 * Counters and rate windows of one store. The clock decides windows and expiry, so give it the clock
 * the store uses (the engine's). Holds a small per-process cache of previous-window counts.
 */
export class Counters {
  /** Previous-window counts, by name and window length; each valid only while its window is the previous one. */
  private readonly previous = new Map<string, CachedWindow>();

  constructor(
    private readonly kv: KeyValueStore,
    private readonly clock: { now(): number },
  ) {}

  /** Adds `amount` atomically (creating the counter at 0) and returns the new total. */
  async add(name: string, amount: number, opts: { expiresAt?: number } = {}): Promise<number> {
    if (!Number.isFinite(amount)) throw new RangeError('amount must be a finite number');
    const item = await this.kv.update({ key: counterKey(name), add: { n: amount }, set: { expires_at: opts.expiresAt } });
    return item.n as number;
  }

  /** The counter's total; 0 when it was never added to or has expired. */
  async get(name: string): Promise<number> {
    const item = await this.kv.get(counterKey(name));
    return typeof item?.n === 'number' ? item.n : 0;
  }

  /**
   * Spends `cost` from the limit of `name` if the sliding-window estimate allows it.
   *
   * The estimate (as Cloudflare and Upstash compute it): the current fixed window's count plus the
   * previous window's count weighed by the share of the previous window still inside the sliding one.
   * A plain fixed window lets a client spend its limit at the end of one window and again at the start
   * of the next; the weighed previous count refuses that second burst.
   *
   * Cost: one atomic add on the current window (it both counts the call and tells where it stands
   * among concurrent ones, so no two callers can take the same last unit), plus one read of the
   * previous window per name per window per process (cached: the previous window is closed, only calls
   * in flight at the boundary still land in it). A refused call is taken back with a second add: a
   * refused call is not counted, so a client that keeps calling over the limit still gets `limit`
   * calls through per window rather than locking itself out for good (when refusals count, a steady
   * 2x rate keeps the estimate over the limit forever). It costs refusals a second write.
   */
  async take(name: string, options: TakeOptions): Promise<TakeResult> {
    const { limit, windowMs, cost = 1 } = options;
    if (!(limit > 0) || !Number.isFinite(limit)) throw new RangeError('limit must be a positive number');
    if (!Number.isSafeInteger(windowMs) || windowMs <= 0) throw new RangeError('windowMs must be a positive whole number');
    if (!(cost > 0) || cost > limit) throw new RangeError('cost must be positive and at most the limit');

    const now = this.clock.now();
    const start = now - (((now % windowMs) + windowMs) % windowMs);
    const elapsed = now - start;
    const resetAt = start + windowMs;
    const key = rateWindowKey(name, windowMs, start);
    const expires_at = windowExpiry(start, windowMs);

    const [previous, item] = await Promise.all([
      this.previousCount(name, windowMs, start),
      this.kv.update({ key, add: { n: cost }, set: { expires_at } }),
    ]);
    const total = item.n as number;
    // Compared multiplied by windowMs, so whole counts compare exactly: prev * (W - e) / W + total <= limit.
    const fits: Fits = (prev, inWindow, at) => prev * (windowMs - at) + inWindow * windowMs <= limit * windowMs;
    const estimate = (prev: number, inWindow: number) => (prev * (windowMs - elapsed)) / windowMs + inWindow;

    if (fits(previous, total, elapsed)) {
      return { allowed: true, count: estimate(previous, total), limit, retryAfterMs: 0, resetAt };
    }

    // Refused: take the call back out. If that write fails the window over-counts by `cost`, which only
    // makes the limit stricter until the window is no longer weighed in; the refusal stands either way.
    await this.kv.update({ key, add: { n: -cost }, set: { expires_at } }).catch(() => undefined);
    const counted = total - cost;
    const retryAfterMs = this.retryAfter(fits, windowMs, limit, previous, counted, cost, elapsed);
    return { allowed: false, count: estimate(previous, counted), limit, retryAfterMs, resetAt };
  }

  /**
   * Milliseconds from now until the estimate would let `cost` through if no other call arrived: later in
   * this window, as the previous window's weight falls, or else in the next one, where this window is
   * the previous. Found exactly against `fits`, from the closed-form guess (float rounding aside).
   */
  private retryAfter(
    fits: Fits,
    windowMs: number,
    limit: number,
    previous: number,
    counted: number,
    cost: number,
    elapsed: number,
  ): number {
    // The smallest whole `at` in [from, windowMs] at which fits(prev, inWindow, at); windowMs when none earlier.
    const earliest = (prev: number, inWindow: number, from: number) => {
      if (prev <= 0) return fits(prev, inWindow, from) ? from : windowMs;
      let at = Math.min(windowMs, Math.max(from, Math.ceil(windowMs - ((limit - inWindow) * windowMs) / prev)));
      while (at < windowMs && !fits(prev, inWindow, at)) at++;
      while (at > from && fits(prev, inWindow, at - 1)) at--;
      return at;
    };
    const here = earliest(previous, counted + cost, elapsed);
    if (here < windowMs) return here - elapsed;
    return windowMs - elapsed + earliest(counted, cost, 0);
  }

  /** The previous window's count, read once per process while it stays the previous window. */
  private previousCount(name: string, windowMs: number, start: number): Promise<number> {
    const cacheKey = `${windowMs}:${name}`;
    const previousStart = start - windowMs;
    const hit = this.previous.get(cacheKey);
    if (hit && hit.start === previousStart) return hit.count;
    const count = this.kv.get(rateWindowKey(name, windowMs, previousStart)).then((item) => (typeof item?.n === 'number' ? item.n : 0));
    // Concurrent first calls share the one read; a failed read is not remembered.
    count.catch(() => {
      if (this.previous.get(cacheKey)?.count === count) this.previous.delete(cacheKey);
    });
    this.previous.delete(cacheKey);
    if (this.previous.size >= MAX_CACHED_WINDOWS) this.previous.delete(this.previous.keys().next().value as string);
    this.previous.set(cacheKey, { start: previousStart, count });
    return count;
  }
}
