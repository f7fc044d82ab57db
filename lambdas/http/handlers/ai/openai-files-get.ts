import { httpHandler } from '../../handler.js';
import { getFile } from '../../../ai/openai-compat/files.js';

/** GET /v1/files/{file_id}: OpenAI's files.retrieve; a completed upload made through /v1/uploads is a file too. */
export const handler = httpHandler('ai.files.get', async (req, { engine, principal }) => ({ status: 200, body: await getFile(engine, principal, req.params.file_id) }));
