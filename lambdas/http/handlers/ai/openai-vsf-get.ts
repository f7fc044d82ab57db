import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { POLL_AFTER_HEADERS } from '../../../ai/openai-compat/http.js';
import { getStoreFile } from '../../../ai/openai-compat/vector-store-files.js';

/** GET /v1/vector_stores/{vector_store_id}/files/{file_id}: with `openai-poll-after-ms` while in progress (the SDK's poller waits 5 s otherwise). */
export const handler = httpHandler('ai.vector_stores.files.get', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  const view = await getStoreFile(engine, principal, req.params.vector_store_id, req.params.file_id);
  return { status: 200, ...(view.status === 'in_progress' ? { headers: { ...POLL_AFTER_HEADERS } } : {}), body: { ...view } };
});
