import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { listStoreFiles } from '../../../ai/openai-compat/vector-store-files.js';

/** GET /v1/vector_stores/{vector_store_id}/files?after=&before=&limit=&order=&filter=. */
export const handler = httpHandler('ai.vector_stores.files.list', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await listStoreFiles(engine, principal, req.params.vector_store_id, req.query)) } };
});
