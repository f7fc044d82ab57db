/**
 * Vector writes and queries are AI POSTs (spec 4.1): once per X-Operation-Id, under the AI API's rules
 * (ai/operations.ts), their context naming the vector endpoint so an id used on chat is not replayed
 * here. No model route is chosen by the caller: a key's route list does not apply (the database's
 * route is the workspace's; docs/ai/vector.md).
 */
import type { Principal } from '../auth/principal.js';
import type { Engine } from '../engine/ports.js';
import { checkReplay, type OperationContext } from '../ai/operations.js';
import { timeoutOf, type ModelRoute } from '../ai/model-routes.js';
import { holdMs } from '../shared/hold-margin.js';
import type { OperationCall } from '../shared/operations.js';

export type VectorEndpoint = '/v1/vector/ingest' | '/v1/vector/query' | '/v1/vector/documents';

export function vectorOperation(engine: Engine, principal: Principal, endpoint: VectorEndpoint, route: ModelRoute | undefined): OperationCall<OperationContext> {
  const context: OperationContext = { endpoint, route: null, application: principal.applicationId, capability: 'knowledge' };
  return {
    tenant: principal.organizationId,
    holdSeconds: holdMs(route ? timeoutOf(route) : 30_000) / 1000,
    context,
    checkReplay: (kept) => checkReplay(engine, principal, context, kept),
  };
}
