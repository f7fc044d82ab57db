import { httpHandler } from '../../handler.js';
import { BlobService, blobHeaders } from '../../../data/blobs.js';

/** HEAD /v1/databases/{database}/blobs/{sha256}: the download's headers (Content-Length of the file), no body. */
export const handler = httpHandler('data.blobs.head', async (req, scope) => {
  const blob = await new BlobService(scope).head(req.params.database, req.params.sha256);
  return { status: 200, headers: blobHeaders(blob) };
});
