import { idempotentHandler } from '../../idempotent.js';
import { heldEventStream } from '../../held-stream.js';
import { withUsageWrites } from '../../../ai/gateway.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { createResponse, prepareResponse, responseStream } from '../../../ai/openai-compat/responses.js';
import { PlatformError } from '../../../shared/errors.js';

const MID_STREAM = { error: () => new PlatformError('upstream_error', "The model route's upstream failed mid-stream."), what: 'responses stream' };

/**
 * POST /v1/responses (docs/ai/openai-compatibility.md, "Responses"): OpenAI's Responses API over a chat
 * route, with `file_search` over vector stores. With an Idempotency-Key a non-streamed answer is kept
 * and replayed as chat's; a streamed one holds the key while it runs and is never kept. A streamed
 * answer is OpenAI's named events (`event:` lines, no `[DONE]`).
 */
export const handler = idempotentHandler('ai.responses.create', AI_OPERATIONS, async (req, { engine, principal, operation, onClientGone, logIds }) => {
  const prepared = await prepareResponse(engine, principal, req.json);
  const scope = { engine, principal };
  if (!prepared.read.request.stream) return withUsageWrites(scope, (calls) => operation.answer(prepared.operation, () => createResponse(calls, prepared)));
  return heldEventStream(operation, prepared.operation, onClientGone, (signal) => responseStream(engine, principal, prepared, signal), MID_STREAM, logIds, { named: true });
});
