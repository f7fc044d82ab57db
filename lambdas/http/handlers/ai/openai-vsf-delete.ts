import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { deleteStoreFile } from '../../../ai/openai-compat/vector-store-files.js';

/** DELETE /v1/vector_stores/{vector_store_id}/files/{file_id}: the item and its chunks; the file (upload) stays. */
export const handler = httpHandler('ai.vector_stores.files.delete', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await deleteStoreFile(engine, principal, req.params.vector_store_id, req.params.file_id)) } };
});
