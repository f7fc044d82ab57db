import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { collectionIdOf } from '../../../ai/openai-compat/ids.js';
import { parseVectorStoreSearch, searchPage, searchVectorStores } from '../../../ai/openai-compat/search.js';
import { checkCollectionsEnabled, collectionOperation } from '../../../knowledge/collections.js';

/**
 * POST /v1/vector_stores/{vector_store_id}/search (docs/ai/openai-compatibility.md, "Search"): OpenAI's
 * search page over a `cloud` collection's chunks, each result with our citation. With an
 * Idempotency-Key the answer is kept as a collection query's; without one, nothing is kept.
 */
export const handler = idempotentHandler('ai.vector_stores.search', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  const collectionId = collectionIdOf(req.params.vector_store_id);
  const request = parseVectorStoreSearch(req.json);
  return operation.answer(collectionOperation(engine, principal, `/v1/vector_stores/${req.params.vector_store_id}/search`), async () =>
    searchPage(request.queries, await searchVectorStores(engine, principal, { collectionIds: [collectionId], ...request })),
  );
});
