import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, readCollection, collectionOperation } from '../../../knowledge/collections.js';
import { parseCollectionQuery, queryCollection } from '../../../knowledge/collection-query.js';

/** POST /v1/collections/{id}/query {query, top_k, vector?} (spec 4.10; docs/ai/collections.md, "Query"): cited matches and `indexing`; once per X-Operation-Id. */
export const handler = idempotentHandler('ai.collections.query', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  const id = req.params.id;
  // A collection that is gone says so before the body is looked at.
  await readCollection(engine, principal, id);
  const request = parseCollectionQuery(req.json);
  return operation.answer(collectionOperation(engine, principal, `/v1/collections/${id}/query`), async () => ({ ...(await queryCollection(engine, principal, id, request)) }));
});
