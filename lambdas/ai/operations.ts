/**
 * Idempotent AI operations (spec 4.1 and 3, issue 11 item 6) by `X-Operation-Id`, over the shared
 * idempotency records (shared/idempotency.ts, after Powertools' persistence layer; docs/decisions/
 * ai-idempotency.md): the first successful answer is kept 24 hours and replayed, whatever the new
 * body says; an error is never kept (the id may be retried at once); a call with the id while the first
 * runs is 409 operation_in_progress, and the in-progress record lapses after the route's timeout, so a
 * crashed call does not hold the id for a day. Streamed replies are never kept.
 */
import type { Capability, Principal } from '../auth/principal.js';
import type { Engine, KvValue } from '../engine/ports.js';
import { EngineLimitError } from '../engine/errors.js';
import { PlatformError } from '../shared/errors.js';
import { IdempotencyStore } from '../shared/idempotency.js';
import { log } from '../shared/log.js';
import { checkRouteAllowed } from './key-routes.js';
import type { ModelRoute } from './model-routes.js';

/** Spec 8: idempotent answers are kept 24 hours. */
export const OPERATION_TTL_SECONDS = 24 * 3600;
/** Every body is the same request for a given id (spec 4.1: the stored answer "whatever the new body says"). */
const ANY_BODY = 'any';

export interface StoredAnswer {
  status: number;
  body: KvValue;
  /** The call that made it (absent on answers kept before it was recorded). */
  context?: OperationContext;
}

/**
 * What a kept answer was an answer to, and who asked: a replay hands it only to a caller that could
 * have made that call itself (docs/decisions/ai-idempotency.md). Ids are per organization, so
 * without this a key could read another application's answer, or a route its own list forbids, by
 * replaying the id on an endpoint it may call.
 */
export interface OperationContext {
  endpoint: ModelRoute['endpoint'];
  route: string;
  /** The calling credential's application; null for an organization-wide credential. */
  application: string | null;
  /** What an application-bound credential needs to make the call (chat, embeddings, a decision run). */
  capability: Capability | null;
}

/** The capability a call on `route` needs (spec 4.1); a generic run needs none. */
export function capabilityFor(route: ModelRoute): Capability | null {
  if (route.provider === 'decision') return 'decision';
  return route.endpoint === '/v1/chat/completions' ? 'ai.chat' : route.endpoint === '/v1/embeddings' ? 'ai.embeddings' : null;
}

export const operationContext = (principal: Principal, route: ModelRoute): OperationContext => ({
  endpoint: route.endpoint,
  route: route.id,
  application: principal.applicationId,
  capability: capabilityFor(route),
});

/**
 * Whether `principal`, now calling as `now`, may have the answer kept for `kept`: the same endpoint
 * and application (else 409 operation_id_reused: the id names another call), then the key's route list
 * and the application's capabilities (the refusal the caller would get making that call itself).
 */
async function checkReplay(engine: Engine, principal: Principal, now: OperationContext, kept: OperationContext | undefined): Promise<void> {
  if (!kept) return;
  if (kept.endpoint !== now.endpoint) {
    throw new PlatformError('operation_id_reused', `This X-Operation-Id was used for a call to ${kept.endpoint}; use a new id for this call.`);
  }
  if (kept.application !== now.application) {
    throw new PlatformError('operation_id_reused', 'This X-Operation-Id was used by another application; use a new id for this call.');
  }
  if (kept.capability !== null && principal.capabilities !== null && !principal.capabilities.includes(kept.capability)) {
    throw new PlatformError('capability_not_enabled', `This application has not enabled the "${kept.capability}" capability.`);
  }
  await checkRouteAllowed(engine, principal, { id: kept.route });
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
 * Claims `operationId` for this call in the organization: a replay of the kept answer (to a caller
 * that could have made its call: checkReplay), 409 while another call holds it, or the right to run
 * (then `complete` with the answer, kept with `context`, or `abandon`).
 * `inProgressSeconds`: the route's timeout (plus a margin), after which a stalled holder loses the id.
 */
export async function beginOperation(engine: Engine, principal: Principal, operationId: string, inProgressSeconds: number, context: OperationContext): Promise<Operation> {
  const organizationId = principal.organizationId;
  const store = storeFor(engine, Math.max(1, Math.ceil(inProgressSeconds)));
  const begun = await store.begin(organizationId, operationId, ANY_BODY);
  if (begun.state === 'completed') {
    const answer = begun.answer as unknown as StoredAnswer;
    await checkReplay(engine, principal, context, answer.context);
    return { kind: 'replay', answer };
  }
  if (begun.state === 'in_progress' || begun.state === 'mismatch') {
    throw new PlatformError('operation_in_progress', 'A call with this X-Operation-Id is still running; retry once it has answered.');
  }
  const { token } = begun;
  return {
    kind: 'run',
    async complete(answer) {
      try {
        await store.complete(organizationId, operationId, token, { ...answer, context } as unknown as KvValue);
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
