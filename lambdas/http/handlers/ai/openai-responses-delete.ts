import { httpHandler } from '../../handler.js';
import { deleteResponse } from '../../../ai/openai-compat/response-store.js';

/** DELETE /v1/responses/{response_id}: the stored response goes at once (another application's or organization's is 404). */
export const handler = httpHandler('ai.responses.delete', async (req, { engine, principal }) => ({
  status: 200,
  body: await deleteResponse(engine, principal, req.params.response_id),
}));
