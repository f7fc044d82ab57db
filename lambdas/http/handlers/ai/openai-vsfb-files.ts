import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { listFileBatchFiles } from '../../../ai/openai-compat/file-batches.js';

/** GET /v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/files?after=&before=&limit=&order=&filter=. */
export const handler = httpHandler('ai.vector_stores.file_batches.files', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await listFileBatchFiles(engine, principal, req.params.vector_store_id, req.params.batch_id, req.query)) } };
});
