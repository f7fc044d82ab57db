import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { getVectorStore } from '../../../ai/openai-compat/vector-stores.js';

/** GET /v1/vector_stores/{vector_store_id}: counts and status from the collection's counters; `expired` past its end. */
export const handler = httpHandler('ai.vector_stores.get', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await getVectorStore(engine, principal, req.params.vector_store_id)) } };
});
