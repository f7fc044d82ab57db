import { idempotentHandler } from '../../idempotent.js';
import { heldEventStream } from '../../held-stream.js';
import { AI_OPERATIONS } from '../../../ai/operations.js';
import { checkCollectionsEnabled, readCollection } from '../../../knowledge/collections.js';
import { queryableMode } from '../../../knowledge/collection-query.js';
import { checkChatCapability, groundedChatStream, groundedCompletion, prepareGroundedChat } from '../../../knowledge/grounded-chat.js';
import { PlatformError } from '../../../shared/errors.js';

const MID_STREAM = { error: () => new PlatformError('upstream_error', "The model route's upstream failed mid-stream."), what: 'grounded chat stream' };

/**
 * POST /v1/collections/{id}/chat (docs/ai/chat-grounded.md): chat grounded in the collection's
 * passages, with `citations` and `indexing`; once per X-Operation-Id as chat's, a streamed answer
 * never kept. The collection's refusals come before the body is read, as the collection query's.
 */
export const handler = idempotentHandler('ai.collections.chat', AI_OPERATIONS, async (req, { engine, principal, operation, onClientGone, logIds }) => {
  checkChatCapability(principal);
  await checkCollectionsEnabled(engine, principal);
  const id = req.params.id;
  queryableMode(await readCollection(engine, principal, id));
  const chat = await prepareGroundedChat(engine, principal, id, req.json);
  if (!chat.request.stream) return operation.answer(chat.operation, () => groundedCompletion(engine, principal, chat));

  // Streamed: the id is held while the stream runs, then let go (docs/ai/chat.md); a kept answer replays as JSON.
  return heldEventStream(operation, chat.operation, onClientGone, (signal) => groundedChatStream(engine, principal, chat, signal), MID_STREAM, logIds);
});
