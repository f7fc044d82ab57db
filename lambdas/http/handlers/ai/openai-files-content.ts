import { httpHandler } from '../../handler.js';
import { redirectTo } from '../../redirect.js';
import { fileContent } from '../../../ai/openai-compat/files.js';

/**
 * GET /v1/files/{file_id}/content: OpenAI's files.content, the bytes as stored, streamed; on AWS a
 * file over the runtime's body limit is a 307 to the store (the SDK's fetch follows it).
 */
export const handler = httpHandler('ai.files.content', async (req, { engine, principal, inlineBodyBytes }) => {
  const found = await fileContent(engine, principal, req.params.file_id, inlineBodyBytes);
  if ('url' in found) return redirectTo(found.url);
  return {
    status: 200,
    headers: {
      'content-type': found.file.content_type,
      'content-length': String(found.size),
      // The name is data: percent-encoded (RFC 8187), never a header of its own making.
      'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(found.file.filename)}`,
    },
    body: found.body,
  };
});
