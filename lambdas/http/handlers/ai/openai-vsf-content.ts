import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { storeFileContent } from '../../../ai/openai-compat/vector-store-files.js';

/** GET /v1/vector_stores/{vector_store_id}/files/{file_id}/content: the processed chunks' text. */
export const handler = httpHandler('ai.vector_stores.files.content', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await storeFileContent(engine, principal, req.params.vector_store_id, req.params.file_id)) } };
});
