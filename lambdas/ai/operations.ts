/**
 * Idempotent AI operations (spec 4.1 and 3, issue 11 item 6) by `X-Operation-Id`, over the shared
 * idempotency records (shared/idempotency.ts, after Powertools' persistence layer; docs/decisions/
 * ai-idempotency.md): the first successful answer is kept 24 hours and replayed, whatever the new
 * body says; an error is never kept (the id may be retried at once); a call with the id while the first
 * runs is 409 operation_in_progress, and the in-progress record lapses after the route's timeout, so a
 * crashed call does not hold the id for a day. Streamed replies are never kept.
 */
import type { Engine, KvValue } from '../engine/ports.js';
import { EngineLimitError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { IdempotencyStore } from '../shared/idempotency.js';
import { log } from '../shared/log.js';

/** Spec 8: idempotent answers are kept 24 hours. */
export const OPERATION_TTL_SECONDS = 24 * 3600;
/** Every body is the same request for a given id (spec 4.1: the stored answer "whatever the new body says"). */
const ANY_BODY = 'any';

export interface StoredAnswer {
  status: number;
  body: KvValue;
}

export type Operation =
  | { kind: 'replay'; answer: StoredAnswer }
  | { kind: 'run'; complete(answer: StoredAnswer): Promise<void>; abandon(): Promise<void> };

const stores = new WeakMap<Engine, Map<number, IdempotencyStore>>();

function storeFor(engine: Engine, inProgressSeconds: number): IdempotencyStore {
  let byLease = stores.get(engine);
  if (!byLease) stores.set(engine, (byLease = new Map()));
  let store = byLease.get(inProgressSeconds);
  if (!store) {
    store = new IdempotencyStore(engine.kv, engine.clock, { scope: 'ai.op', ttlSeconds: OPERATION_TTL_SECONDS, inProgressSeconds });
    byLease.set(inProgressSeconds, store);
  }
  return store;
}

/**
 * Claims `operationId` for this call in the organization: a replay of the kept answer, 409 while
 * another call holds it, or the right to run (then `complete` with the answer, or `abandon`).
 * `inProgressSeconds`: the route's timeout (plus a margin), after which a stalled holder loses the id.
 */
export async function beginOperation(engine: Engine, organizationId: string, operationId: string, inProgressSeconds: number): Promise<Operation> {
  const store = storeFor(engine, Math.max(1, Math.ceil(inProgressSeconds)));
  const begun = await store.begin(organizationId, operationId, ANY_BODY);
  if (begun.state === 'completed') return { kind: 'replay', answer: begun.answer as unknown as StoredAnswer };
  if (begun.state === 'in_progress' || begun.state === 'mismatch') {
    throw new PlatformError('operation_in_progress', 'A call with this X-Operation-Id is still running; retry once it has answered.');
  }
  const { token } = begun;
  return {
    kind: 'run',
    async complete(answer) {
      try {
        await store.complete(organizationId, operationId, token, answer as unknown as KvValue);
      } catch (error) {
        // An answer too large to keep is answered, not kept: a retry runs again.
        if (!(error instanceof EngineLimitError)) throw error;
        log.warn('idempotent answer too large to keep', { operation: operationId });
        await store.abandon(organizationId, operationId, token);
      }
    },
    async abandon() {
      await store.abandon(organizationId, operationId, token);
    },
  };
}
