import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { parseUpdateStoreFile, scopeOf, updateStoreFile } from '../../../ai/openai-compat/vector-store-files.js';

/** POST /v1/vector_stores/{vector_store_id}/files/{file_id} {attributes}. */
export const handler = httpHandler('ai.vector_stores.files.update', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  await scopeOf(engine, principal, req.params.vector_store_id);
  const attributes = parseUpdateStoreFile(req.json);
  return { status: 200, body: { ...(await updateStoreFile(engine, principal, req.params.vector_store_id, req.params.file_id, attributes)) } };
});
