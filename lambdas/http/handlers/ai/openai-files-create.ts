import { httpHandler } from '../../handler.js';
import { operationIdSent } from '../../middleware/operation-id.js';
import { createFile } from '../../../ai/openai-compat/files.js';

/**
 * POST /v1/files (docs/ai/openai-compatibility.md, "Files"): OpenAI's files.create, a multipart form
 * streamed to a spool and stored as a completed upload; 200 the file object. Not idempotentHandler:
 * the upload, named by the Idempotency-Key when one is sent, is the call's record.
 */
export const handler = httpHandler('ai.files.create', async (req, scope) => {
  const file = await createFile(scope.engine, scope.principal, {
    body: req.stream(),
    headers: req.headers,
    operationId: operationIdSent(req) ? scope.operationId : undefined,
    inlineBodyBytes: scope.inlineBodyBytes,
  });
  return { status: 200, body: file };
});
