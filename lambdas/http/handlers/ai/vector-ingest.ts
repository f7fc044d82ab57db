import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { openVectorDatabase, stampedRoute, whileOpen } from '../../../vector/databases.js';
import { ingestPassages } from '../../../vector/ingest.js';
import { vectorOperation } from '../../../vector/operations.js';
import { parseIngestRequest } from '../../../vector/passages.js';

/** POST /v1/vector/ingest (spec 4.6; docs/ai/vector.md): stores what it can, lists the rest in `skipped`; once per X-Operation-Id. */
export const handler = idempotentHandler('ai.vector.ingest', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  const database = await openVectorDatabase(engine, principal);
  const request = parseIngestRequest(req.json);
  const route = await stampedRoute(engine, database);
  return operation.answer(vectorOperation(engine, principal, '/v1/vector/ingest', route), async () => ({ ...(await whileOpen(engine, database, () => ingestPassages(engine, principal, database, route, request))) }));
});
