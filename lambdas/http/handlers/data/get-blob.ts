import { httpHandler } from '../../handler.js';
import { redirectTo } from '../../redirect.js';
import { BlobService, blobHeaders } from '../../../data/blobs.js';

/**
 * GET /v1/databases/{database}/blobs/{sha256}: the file's bytes, streamed (the local server pipes
 * them); a file too big for the runtime: 307 to a URL serving them (docs/data/blobs.md).
 */
export const handler = httpHandler('data.blobs.get', async (req, scope) => {
  const out = await new BlobService(scope).get(req.params.database, req.params.sha256, scope.inlineBodyBytes);
  if ('redirect' in out) return redirectTo(out.redirect);
  return { status: 200, headers: blobHeaders(out.blob), body: out.body };
});
