/**
 * Sign-in limits (docs/decisions/console-sessions.md): 10 failed sign-ins of one account (email)
 * within 15 minutes lock that account's sign-in for 15 minutes, the right password included; 50 failed
 * sign-ins from one address within 15 minutes lock that address the same way. Both answer
 * `429 sign_in_limited` with Retry-After. Counted in the key-value store, so every process and
 * function instance shares the counts:
 *   signin#<scope>#<sha256> / limit   {count, window_ms, locked_until_ms}
 * A window opens at its first failure and counts 15 minutes; the counter moves by conditional writes,
 * so concurrent failures are each counted once.
 */
import { hash } from 'node:crypto';
import type { KeyValueStore, KvItem } from '../engine/ports.js';
import { ConditionFailedError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';

export const SIGN_IN_WINDOW_MS = 15 * 60_000;
export const SIGN_IN_LOCK_MS = 15 * 60_000;
export const ACCOUNT_FAILURES = 10;
export const ADDRESS_FAILURES = 50;
const ATTEMPTS = 8;

type Scope = 'account' | 'address';
const LIMITS: Record<Scope, number> = { account: ACCOUNT_FAILURES, address: ADDRESS_FAILURES };
const limitKey = (scope: Scope, value: string) => ({ pk: `signin#${scope}#${hash('sha256', value, 'hex')}`, sk: 'limit' });

export const signInLimited = (untilMs: number, now: number) =>
  new PlatformError('sign_in_limited', 'Too many failed sign-ins; try again later.', { retryAfterSeconds: Math.max(1, Math.ceil((untilMs - now) / 1000)) });

export class SignInLimits {
  constructor(private readonly kv: KeyValueStore, private readonly now: () => number) {}

  /** Throws 429 sign_in_limited while the account or the address is locked. */
  async check(email: string, address: string | undefined): Promise<void> {
    const now = this.now();
    const keys = [limitKey('account', email), ...(address ? [limitKey('address', address)] : [])];
    const items = await this.kv.getMany(keys);
    const until = Math.max(0, ...items.map((item) => Number(item?.locked_until_ms ?? 0)));
    if (until > now) throw signInLimited(until, now);
  }

  /** Counts a failed sign-in against the account and the address. */
  async fail(email: string, address: string | undefined): Promise<void> {
    await Promise.all([this.count('account', email), address ? this.count('address', address) : undefined]);
  }

  /** A successful sign-in clears its account's failures (never the address's). */
  async succeed(email: string): Promise<void> {
    await this.kv.delete(limitKey('account', email));
  }

  private async count(scope: Scope, value: string): Promise<void> {
    const key = limitKey(scope, value);
    for (let attempt = 0; attempt < ATTEMPTS; attempt++) {
      const now = this.now();
      const item = await this.kv.get(key);
      try {
        await this.add(key, item, scope, now);
        return;
      } catch (error) {
        if (!(error instanceof ConditionFailedError)) throw error;
        // Another failure counted meanwhile: read again.
      }
    }
  }

  private async add(key: { pk: string; sk: string }, item: KvItem | undefined, scope: Scope, now: number): Promise<void> {
    const lockedUntil = Number(item?.locked_until_ms ?? 0);
    const windowMs = Number(item?.window_ms ?? 0);
    const open = item !== undefined && now - windowMs < SIGN_IN_WINDOW_MS;
    const count = open ? Number(item!.count ?? 0) + 1 : 1;
    const lock = count >= LIMITS[scope] && lockedUntil <= now ? now + SIGN_IN_LOCK_MS : lockedUntil;
    const expiresAt = Math.ceil((Math.max(open ? windowMs + SIGN_IN_WINDOW_MS : now + SIGN_IN_WINDOW_MS, lock) + 60_000) / 1000);
    const next = { count, window_ms: open ? windowMs : now, locked_until_ms: lock, expires_at: expiresAt };
    // From exactly the state read: a failure counted meanwhile makes this write fail, and it is redone.
    const condition = item === undefined ? ({ ifAbsent: true } as const) : { ifEquals: { count: Number(item.count ?? 0), window_ms: windowMs } };
    await this.kv.put({ ...key, ...next }, condition);
  }
}
