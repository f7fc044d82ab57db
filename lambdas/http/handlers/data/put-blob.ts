import { httpHandler } from '../../handler.js';
import { redirectTo } from '../../redirect.js';
import { BlobService, incomingBody } from '../../../data/blobs.js';

/**
 * PUT /v1/databases/{database}/blobs/{sha256} (spec 4.17): the raw bytes, streamed; 201 stored, 200
 * already there; a body too big for the runtime: 307 to the blob store (docs/data/blobs.md).
 */
export const handler = httpHandler('data.blobs.put', async (req, scope) => {
  const { database, sha256 } = req.params;
  const out = await new BlobService(scope).put(database, sha256, incomingBody(req.headers, req.stream()), scope.inlineBodyBytes);
  if ('redirect' in out) return redirectTo(out.redirect);
  return { status: out.created ? 201 : 200, body: out.blob };
});
