import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, collectionOperation } from '../../../knowledge/collections.js';
import { POLL_AFTER_HEADERS } from '../../../ai/openai-compat/http.js';
import { createFileBatch, parseCreateFileBatch } from '../../../ai/openai-compat/file-batches.js';
import { scopeOf } from '../../../ai/openai-compat/vector-store-files.js';

/**
 * POST /v1/vector_stores/{vector_store_id}/file_batches {file_ids | files}: every file checked before
 * any is added, then admitted up to the organization's cap (the rest at the batch's next reads).
 * Once per Idempotency-Key when one is sent.
 */
export const handler = idempotentHandler('ai.vector_stores.file_batches.create', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  const storeId = req.params.vector_store_id;
  await scopeOf(engine, principal, storeId);
  const request = parseCreateFileBatch(req.json);
  const answer = await operation.answer(collectionOperation(engine, principal, `/v1/vector_stores/${storeId}/file_batches`), async () => ({ ...(await createFileBatch(engine, principal, storeId, request)) }));
  // The answer leaves as JSON text (a replay: as the kept object).
  const body = typeof answer.body === 'string' ? (JSON.parse(answer.body) as { status?: string }) : (answer.body as { status?: string });
  return body.status === 'in_progress' ? { ...answer, headers: { ...answer.headers, ...POLL_AFTER_HEADERS } } : answer;
});
