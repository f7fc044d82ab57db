import { httpHandler } from '../../handler.js';
import { redirectTo } from '../../redirect.js';
import { BlobService, incomingBody } from '../../../data/blobs.js';

/**
 * PUT .../blobs/{sha256}/uploads/{upload_id}/parts/{n}: one part's raw bytes, streamed; 200
 * {part_number, size, etag}; a part too big for the runtime: 307 to the blob store (docs/data/blobs.md).
 */
export const handler = httpHandler('data.uploads.part', async (req, scope) => {
  const { database, sha256, upload_id, n } = req.params;
  const out = await new BlobService(scope).uploadPart(database, sha256, upload_id, n, incomingBody(req.headers, req.stream()), scope.inlineBodyBytes);
  if ('redirect' in out) return redirectTo(out.redirect);
  return { status: 200, headers: { etag: `"${out.etag}"` }, body: out };
});
