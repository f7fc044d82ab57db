import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { parseUpdateVectorStore, readStore, updateVectorStore } from '../../../ai/openai-compat/vector-stores.js';

/** POST /v1/vector_stores/{vector_store_id} {name?, metadata?, expires_after?}. */
export const handler = httpHandler('ai.vector_stores.update', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  // Another workspace's store is 404 before the body is looked at.
  await readStore(engine, principal, req.params.vector_store_id);
  const request = parseUpdateVectorStore(req.json);
  return { status: 200, body: { ...(await updateVectorStore(engine, principal, req.params.vector_store_id, request)) } };
});
