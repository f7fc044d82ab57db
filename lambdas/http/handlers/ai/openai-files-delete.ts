import { httpHandler } from '../../handler.js';
import { deleteFile } from '../../../ai/openai-compat/files.js';

/** DELETE /v1/files/{file_id}: OpenAI's files.delete, `{id, object: 'file', deleted: true}`. */
export const handler = httpHandler('ai.files.delete', async (req, { engine, principal }) => ({ status: 200, body: await deleteFile(engine, principal, req.params.file_id) }));
