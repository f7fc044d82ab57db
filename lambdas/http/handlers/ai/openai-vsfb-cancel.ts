import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { POLL_AFTER_HEADERS } from '../../../ai/openai-compat/http.js';
import { cancelFileBatch } from '../../../ai/openai-compat/file-batches.js';

/** POST /v1/vector_stores/{vector_store_id}/file_batches/{batch_id}/cancel: stops admission and takes out the queued files. */
export const handler = httpHandler('ai.vector_stores.file_batches.cancel', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  const view = await cancelFileBatch(engine, principal, req.params.vector_store_id, req.params.batch_id);
  return { status: 200, ...(view.status === 'in_progress' ? { headers: { ...POLL_AFTER_HEADERS } } : {}), body: { ...view } };
});
