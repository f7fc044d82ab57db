import { httpHandler } from '../../handler.js';
import { incomingBody } from '../../../data/blobs.js';
import { putPart } from '../../../knowledge/uploads.js';

/**
 * PUT /v1/uploads/{id}/parts/{n}: one part's raw bytes, streamed, exactly its size; 200
 * {part_number, size, etag}. On AWS parts go to the presigned URLs the upload names instead.
 */
export const handler = httpHandler('ai.uploads.part', async (req, scope) => {
  const part = await putPart(scope.engine, scope.principal, req.params.id, req.params.n, incomingBody(req.headers, req.stream()));
  return { status: 200, headers: { etag: `"${part.etag}"` }, body: part };
});
