import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, collectionOperation } from '../../../knowledge/collections.js';
import { createVectorStore, parseCreateVectorStore } from '../../../ai/openai-compat/vector-stores.js';
import { attachFile, checkFile, parseChunking } from '../../../ai/openai-compat/vector-store-files.js';

/**
 * POST /v1/vector_stores (docs/ai/openai-compatibility.md, "Vector stores"): a cloud collection, 200
 * as OpenAI answers; its `file_ids` attached. Once per Idempotency-Key when one is sent.
 */
export const handler = idempotentHandler('ai.vector_stores.create', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  await checkCollectionsEnabled(engine, principal);
  const request = parseCreateVectorStore(req.json);
  const chunking = parseChunking(request.chunking);
  return operation.answer(collectionOperation(engine, principal, '/v1/vector_stores'), async () => ({
    ...(await createVectorStore(
      engine,
      principal,
      request,
      async (collectionId, fileIds) => {
        for (const fileId of fileIds) await attachFile(engine, principal, collectionId, { fileId, attributes: null, ...(chunking ? { chunking } : {}) });
      },
      async (fileIds) => {
        for (const fileId of fileIds) await checkFile(engine, principal, fileId);
      },
    )),
  }));
});
