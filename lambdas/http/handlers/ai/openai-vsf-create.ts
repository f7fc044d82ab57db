import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { POLL_AFTER_HEADERS } from '../../../ai/openai-compat/http.js';
import { attachFile, parseAttachFile, scopeOf } from '../../../ai/openai-compat/vector-store-files.js';

/**
 * POST /v1/vector_stores/{vector_store_id}/files {file_id, attributes?, chunking_strategy?}: the file
 * as an item of the store's collection. Idempotent by nature: the same file in the same store is the
 * same object, so no Idempotency-Key is needed.
 */
export const handler = httpHandler('ai.vector_stores.files.create', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  await scopeOf(engine, principal, req.params.vector_store_id);
  const view = await attachFile(engine, principal, req.params.vector_store_id, parseAttachFile(req.json));
  return { status: 200, ...(view.status === 'in_progress' ? { headers: { ...POLL_AFTER_HEADERS } } : {}), body: { ...view } };
});
