/**
 * The AI API's rules for idempotent operations by `X-Operation-Id` (spec 4.1 and 3), on the shared
 * operation block (shared/operations.ts; docs/decisions/ai-idempotency.md): the first successful
 * answer is kept 24 hours and replayed whatever the new body says, to a caller that could have made
 * its call; the id is held for the route's timeout plus HOLD_MARGIN_MS, so a crashed call does not
 * hold it for a day.
 */
import type { Capability, Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { PlatformError } from '../shared/errors.js';
import { holdMs } from '../shared/hold-margin.js';
import type { OperationCall, OperationRules } from '../shared/operations.js';
import { checkRouteAllowed } from './key-routes.js';
import { timeoutOf, type ModelRoute } from './model-routes.js';

/** Spec 8: idempotent answers are kept 24 hours. */
export const OPERATION_TTL_SECONDS = 24 * 3600;

/** Chat, embeddings and run: ids per organization, any body (spec 4.1: the stored answer "whatever the new body says"). */
export const AI_OPERATIONS: OperationRules = { scope: 'ai.op', ttlSeconds: OPERATION_TTL_SECONDS, requests: 'any' };

/**
 * What a kept answer was an answer to, and who asked: a replay hands it only to a caller that could
 * have made that call itself (docs/decisions/ai-idempotency.md). Ids are per organization, so
 * without this a key could read another application's answer, or a route its own list forbids, by
 * replaying the id on an endpoint it may call.
 */
export interface OperationContext {
  /** The AI endpoint: a route's (chat, embeddings, run) or a vector one (`/v1/vector/ingest`...). */
  endpoint: string;
  /** The model route called; null where the caller names none (vector calls use their database's). */
  route: string | null;
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
export async function checkReplay(engine: Engine, principal: Principal, now: OperationContext, kept: OperationContext | undefined): Promise<void> {
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
  if (kept.route !== null) await checkRouteAllowed(engine, principal, { id: kept.route });
}

/** A call on `route`'s claim on its operation id: kept with its context, replayed only past checkReplay. */
export function aiOperation(engine: Engine, principal: Principal, route: ModelRoute): OperationCall<OperationContext> {
  const context = operationContext(principal, route);
  return {
    tenant: principal.organizationId,
    holdSeconds: holdMs(timeoutOf(route)) / 1000,
    context,
    checkReplay: (kept) => checkReplay(engine, principal, context, kept),
  };
}
