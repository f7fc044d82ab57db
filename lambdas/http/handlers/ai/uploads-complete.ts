import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { completeOperation, completeUpload, parseCompleteUpload } from '../../../knowledge/uploads.js';

/** POST /v1/uploads/{id}/complete with `{}`: checks every part and the SHA-256; once per X-Operation-Id (docs/ai/uploads.md). */
export const handler = idempotentHandler('ai.uploads.complete', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  parseCompleteUpload(req.json);
  const id = req.params.id;
  return operation.answer(completeOperation(engine, principal, id), async () => ({ ...(await completeUpload(engine, principal, id)) }));
});
