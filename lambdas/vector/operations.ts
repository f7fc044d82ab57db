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
import { PlatformError } from '../shared/errors.js';

export type VectorEndpoint = '/v1/vector/ingest' | '/v1/vector/query' | '/v1/vector/documents';

/** The AI context, and the key that made the call: a vector answer may hold its local scope, private to that key. */
interface VectorOperationContext extends OperationContext {
  credential: string;
}

export function vectorOperation(engine: Engine, principal: Principal, endpoint: VectorEndpoint, route: ModelRoute | undefined): OperationCall<VectorOperationContext> {
  const context: VectorOperationContext = { endpoint, route: null, application: principal.applicationId, capability: 'knowledge', credential: principal.credentialId };
  return {
    tenant: principal.organizationId,
    holdSeconds: holdMs(route ? timeoutOf(route) : 30_000) / 1000,
    context,
    checkReplay: async (kept) => {
      await checkReplay(engine, principal, context, kept);
      // Ids are per organization: without this another key of it would be replayed this key's local matches.
      if (kept && kept.credential !== principal.credentialId) throw new PlatformError('operation_id_reused', 'This X-Operation-Id was used by another key; use a new id for this call.');
    },
  };
}
