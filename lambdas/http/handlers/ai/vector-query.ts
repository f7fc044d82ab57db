import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { openVectorDatabase, stampedRoute, whileOpen } from '../../../vector/databases.js';
import { vectorOperation } from '../../../vector/operations.js';
import { parseQueryRequest } from '../../../vector/query.js';
import { answerQuery, rerankProfileOf } from '../../../vector/answer.js';

/** POST /v1/vector/query (spec 4.7; docs/ai/vector.md): matches best first, reranked when asked; once per X-Operation-Id. */
export const handler = idempotentHandler('ai.vector.query', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  const database = await openVectorDatabase(engine, principal);
  const request = parseQueryRequest(req.json);
  const route = await stampedRoute(engine, database);
  const profile = await rerankProfileOf(engine, principal, request);
  return operation.answer(vectorOperation(engine, principal, '/v1/vector/query', route), () => whileOpen(engine, database, () => answerQuery(engine, principal, database, route, request, profile)));
});
