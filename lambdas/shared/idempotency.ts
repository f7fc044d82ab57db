/**
 * Idempotency records over the key-value port, after Powertools for AWS Lambda's persistence layer
 * (BasePersistenceLayer / DynamoDBPersistenceLayer): the first caller of a key writes an in-progress
 * record with a conditional put, runs the operation and stores its answer on the record; a repeat of
 * the key gets that answer back instead of running again. See docs/decisions/idempotency.md.
 *
 * One item per key:
 *   pk `idem#<scope>#<tenant>#<key>`, sk `idem`
 *   status             'in_progress' | 'completed'
 *   fingerprint        the caller's hash of the request: the same key with another request is refused
 *   token              random per successful `begin`: who holds the record (complete/abandon check it)
 *   in_progress_until  Unix ms; after it a crashed holder's record may be taken over
 *   expires_at         Unix seconds; the port hides the item once passed (DynamoDB TTL deletes it later)
 *   answer             on completion: the stored answer, as JSON text (an answer may hold any key or
 *                      number its caller sent, which DynamoDB's document client cannot always store as is)
 *
 * Answers live in the item, so they must be small: an item is at most 400 KB, and a larger one is
 * refused with EngineLimitError('item_size') (the record then stays in progress; abandon it).
 */
import { createHash, randomUUID } from 'node:crypto';
import type { KeyValueStore, KvCondition, KvItem, KvKey, KvUpdate, KvValue } from '../engine/ports.js';
import { ConditionFailedError, EngineUnavailableError } from '../engine/errors.js';

export interface IdempotencyOptions {
  /** What the keys belong to, e.g. `ai.op` or `events.idem`; part of every key, so scopes never meet. */
  scope: string;
  /** How long a completed answer is replayed (and an in-progress record kept), seconds. */
  ttlSeconds: number;
  /** How long a holder may run before another caller may take the record over, seconds. */
  inProgressSeconds: number;
}

export type IdempotencyBegin =
  /** This caller holds the record: run the operation, then `complete` (or `abandon`) with the token. */
  | { state: 'started'; token: string }
  /** Another caller is running it; `until` (Unix ms) is when its lease runs out. */
  | { state: 'in_progress'; until: number }
  /** Already done: replay this answer. */
  | { state: 'completed'; answer: KvValue }
  /** The key was used for a different request (another fingerprint). */
  | { state: 'mismatch' };

/**
 * The record is no longer this caller's: its lease ran out and another caller took it over, or it
 * expired. A ConditionFailedError, since that is what happened underneath.
 */
export class IdempotencyLeaseLostError extends ConditionFailedError {
  override name = 'IdempotencyLeaseLostError';
  constructor() {
    super('idempotency record is no longer held by this caller');
  }
}

const SK = 'idem';
/** Sort key of records whose key was too long to keep verbatim (see `keyOf`): they can never meet a verbatim key. */
const HASHED_SK = 'idem#sha256';
/** Keys longer than this (UTF-8 bytes) are stored by their SHA-256: a DynamoDB partition key is at most 2048 bytes. */
const MAX_VERBATIM_KEY_BYTES = 1024;
/**
 * Rounds of put / read / take over. Each failed round means another caller changed the record in
 * between (abandoned, expired, took it over), so a few are plenty; more means heavy contention.
 */
const MAX_ROUNDS = 4;

export class IdempotencyStore {
  constructor(
    private readonly kv: KeyValueStore,
    private readonly clock: { now(): number },
    private readonly options: IdempotencyOptions,
  ) {
    checkSegment('scope', options.scope);
    if (!(options.ttlSeconds > 0) || !(options.inProgressSeconds > 0)) {
      throw new RangeError('ttlSeconds and inProgressSeconds must be positive');
    }
  }

  /**
   * Claims the key for this caller, or says why not. Succeeds when there is no live record (none, or
   * expired: `ifAbsent` treats an expired item as absent), or when the record is in progress but its
   * holder's lease has run out (the holder crashed or timed out). The take-over is conditioned on the
   * old holder's token and lease, so of several callers racing for a stale record exactly one wins.
   */
  async begin(tenant: string, key: string, fingerprint: string): Promise<IdempotencyBegin> {
    const k = this.keyOf(tenant, key);
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const token = randomUUID();
      if (await this.tryPut(this.inProgressItem(k, fingerprint, token), { ifAbsent: true })) return { state: 'started', token };

      const current = await this.kv.get(k);
      if (!current) continue; // abandoned or expired since the put: claim it again
      // Checked first, as Powertools validates the payload before looking at the status.
      if (current.fingerprint !== fingerprint) return { state: 'mismatch' };
      if (current.status === 'completed') return { state: 'completed', answer: typeof current.answer === 'string' ? (JSON.parse(current.answer) as KvValue) : null };

      const until = typeof current.in_progress_until === 'number' ? current.in_progress_until : 0;
      if (until > this.clock.now()) return { state: 'in_progress', until };
      const takeOver = { status: 'in_progress', token: current.token ?? null, in_progress_until: until };
      if (await this.tryPut(this.inProgressItem(k, fingerprint, token), { ifEquals: takeOver })) return { state: 'started', token };
      // Another caller took it over (or it changed otherwise): look again.
    }
    throw new EngineUnavailableError('idempotency record kept changing');
  }

  /**
   * Stores the answer: the record turns completed and lives `ttlSeconds` from now. Throws
   * IdempotencyLeaseLostError when the record is no longer this caller's, so a holder whose lease
   * was taken over cannot overwrite the new holder's record. A run that outlived its lease but was
   * not taken over still completes: the work is done and nobody else started it.
   */
  async complete(tenant: string, key: string, token: string, answer: KvValue, answerJson?: string): Promise<void> {
    const { update, ...rest } = this.completionWrite(tenant, key, token, answer, answerJson);
    try {
      await this.kv.update({ key: update, ...rest });
    } catch (err) {
      if (err instanceof ConditionFailedError) throw new IdempotencyLeaseLostError();
      throw err;
    }
  }

  /**
   * The write `complete` makes, for a service to put in its own `kv.transact([...])` next to the
   * write the operation consists of: both apply or neither does, so a crash can never leave the
   * effect without its record (which would run it twice) or the record without its effect. When the
   * lease was lost the transaction fails with TransactionCanceledError naming this write's index.
   * `answerJson`: the answer as JSON already (the caller serialized it for its own use), else made here.
   */
  completionWrite(tenant: string, key: string, token: string, answer: KvValue, answerJson = JSON.stringify(answer)): KvUpdate {
    return {
      update: this.keyOf(tenant, key),
      // An update, not a put: the fingerprint and token stay as they are.
      set: { status: 'completed', answer: answerJson, expires_at: this.expiresAt(this.options.ttlSeconds) },
      remove: ['in_progress_until'],
      condition: { ifEquals: { status: 'in_progress', token } },
    };
  }

  /**
   * Deletes this caller's in-progress record so the operation can be retried at once (otherwise the
   * retry waits for the lease to run out). Returns false, changing nothing, when the record is no
   * longer this caller's; it does not throw, since it runs on failure paths whose own error matters.
   */
  async abandon(tenant: string, key: string, token: string): Promise<boolean> {
    try {
      await this.kv.delete(this.keyOf(tenant, key), { ifEquals: { status: 'in_progress', token } });
      return true;
    } catch (err) {
      if (err instanceof ConditionFailedError) return false;
      throw err;
    }
  }

  /** The answer a completed record holds, without claiming anything; undefined when there is none (absent, expired or in progress). */
  async read(tenant: string, key: string): Promise<KvValue | undefined> {
    const current = await this.kv.get(this.keyOf(tenant, key));
    if (!current || current.status !== 'completed' || typeof current.answer !== 'string') return undefined;
    return JSON.parse(current.answer) as KvValue;
  }

  /** Deletes the record whatever its state (a stored answer its owner no longer wants kept); false when there was none. */
  async forget(tenant: string, key: string): Promise<boolean> {
    const k = this.keyOf(tenant, key);
    try {
      await this.kv.delete(k, { ifExists: true });
      return true;
    } catch (err) {
      if (err instanceof ConditionFailedError) return false;
      throw err;
    }
  }

  private async tryPut(item: KvItem, condition: KvCondition): Promise<boolean> {
    try {
      await this.kv.put(item, condition);
      return true;
    } catch (err) {
      if (err instanceof ConditionFailedError) return false;
      throw err;
    }
  }

  private inProgressItem(k: KvKey, fingerprint: string, token: string): KvItem {
    const { ttlSeconds, inProgressSeconds } = this.options;
    return {
      ...k,
      status: 'in_progress',
      fingerprint,
      token,
      in_progress_until: this.clock.now() + inProgressSeconds * 1000,
      // As Powertools: the record itself lives the TTL (never less than the lease), so a crashed
      // holder's record is taken over while it lasts and swept by TTL afterwards.
      expires_at: this.expiresAt(Math.max(ttlSeconds, inProgressSeconds)),
    };
  }

  /** Rounded up, so a record lives at least `seconds`. */
  private expiresAt(seconds: number): number {
    return Math.ceil(this.clock.now() / 1000) + seconds;
  }

  /**
   * Scope and tenant are ids and may not contain `#` (else `a#b`+`c` and `a`+`b#c` would meet); the
   * key is last, so it may contain anything. A key too long for a partition key is stored by its
   * hash under another sort key, so it can never meet a verbatim key that spells that hash.
   */
  private keyOf(tenant: string, key: string): KvKey {
    checkSegment('tenant', tenant);
    if (typeof key !== 'string' || key === '') throw new TypeError('idempotency key must be a non-empty string');
    const prefix = `idem#${this.options.scope}#${tenant}#`;
    if (Buffer.byteLength(key, 'utf8') <= MAX_VERBATIM_KEY_BYTES) return { pk: prefix + key, sk: SK };
    return { pk: prefix + createHash('sha256').update(key, 'utf8').digest('hex'), sk: HASHED_SK };
  }
}

function checkSegment(what: string, value: string): void {
  if (typeof value !== 'string' || value === '' || value.includes('#')) {
    throw new TypeError(`idempotency ${what} must be a non-empty string without "#"`);
  }
}

/**
 * A fingerprint for `begin`: SHA-256 of the value as JSON with object keys sorted, so the same
 * request sent with its fields in another order is still the same request.
 */
export function fingerprintOf(value: KvValue): string {
  return createHash('sha256').update(canonicalJson(value)).digest('hex');
}

function canonicalJson(value: KvValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value)
    .filter((k) => value[k] !== undefined)
    .sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
}
