import { idempotentHandler } from '../../idempotent.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { completeOperation, completeUpload, parseCompleteUpload } from '../../../knowledge/uploads.js';
import { settings } from '../../../shared/settings.js';

/**
 * POST /v1/uploads/{id}/complete with `{}`: checks every part and the SHA-256; once per X-Operation-Id
 * (docs/ai/uploads.md). `202` while the check goes on outside the call (`verifying`), `200` once done.
 */
export const handler = idempotentHandler('ai.uploads.complete', AI_OPERATIONS, async (req, { engine, principal, operation }) => {
  parseCompleteUpload(req.json);
  const id = req.params.id;
  return operation.answer(
    completeOperation(engine, principal, id),
    async () => ({ ...(await completeUpload(engine, principal, id, settings().uploadCheckWithinMs)) }),
    (body) => ((body as { status?: string }).status === 'verifying' ? 202 : 200),
  );
});
