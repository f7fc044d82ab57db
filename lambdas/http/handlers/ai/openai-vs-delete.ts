import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { deleteVectorStore } from '../../../ai/openai-compat/vector-stores.js';

/** DELETE /v1/vector_stores/{vector_store_id}: the collection with its items, packages and vectors, and our records. */
export const handler = httpHandler('ai.vector_stores.delete', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await deleteVectorStore(engine, principal, req.params.vector_store_id)) } };
});
