import { httpHandler } from '../../handler.js';
import { redirectTo } from '../../redirect.js';
import { BlobService, blobHeaders } from '../../../data/blobs.js';

/**
 * GET /console/api/databases/{database}/blobs/{sha256}: the file's bytes, as GET /v1/…/blobs/{sha256}
 * serves them, always as a download (`Content-Disposition: attachment`, octet-stream, nosniff and the
 * console's CSP): an uploaded HTML or SVG file never renders on the console's origin.
 */
export const handler = httpHandler('console.files.download', async (req, scope) => {
  const out = await new BlobService(scope).get(req.params.database, req.params.sha256, scope.inlineBodyBytes);
  if ('redirect' in out) return redirectTo(out.redirect);
  return { status: 200, headers: { ...blobHeaders(out.blob), 'content-disposition': `attachment; filename="${out.blob.sha256}"` }, body: out.body };
});
