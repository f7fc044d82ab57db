import { httpHandler } from '../../handler.js';
import { listFiles } from '../../../ai/openai-compat/files.js';

/** GET /v1/files: OpenAI's files.list, a cursor page (`after`, `limit`, `order`, `purpose`). */
export const handler = httpHandler('ai.files.list', async (req, { engine, principal }) => ({ status: 200, body: await listFiles(engine, principal, req.query) }));
