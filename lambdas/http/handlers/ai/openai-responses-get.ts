import { httpHandler } from '../../handler.js';
import { readResponse } from '../../../ai/openai-compat/response-store.js';
import { PlatformError } from '../../../shared/errors.js';

/**
 * GET /v1/responses/{response_id} (docs/ai/openai-compatibility.md, "Responses"): a stored response of
 * the caller's application (24 hours); another application's or organization's is 404. A replay of its
 * events (`?stream=true`) is not served.
 */
export const handler = httpHandler('ai.responses.get', async (req, { engine, principal }) => {
  for (const name of Object.keys(req.query)) {
    if (name === 'stream' || name === 'starting_after') throw new PlatformError('unsupported_field', 'A stored response is answered whole; replaying its events (`stream=true`) is not served.', name);
    if (name !== 'include' && name !== 'include[]') throw new PlatformError('unsupported_field', `Unknown query parameter "${name.slice(0, 64)}".`, name.slice(0, 64));
  }
  const kept = await readResponse(engine, principal, req.params.response_id);
  return { status: 200, body: kept.body };
});
