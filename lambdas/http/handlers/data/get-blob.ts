import { httpHandler } from '../../handler.js';
import { BlobService, blobHeaders } from '../../../data/blobs.js';

/** GET /v1/databases/{database}/blobs/{sha256}: the file's bytes, streamed (the local server pipes them; see docs/data/blobs.md for Lambda). */
export const handler = httpHandler('data.blobs.get', async (req, scope) => {
  const { blob, body } = await new BlobService(scope).get(req.params.database, req.params.sha256);
  return { status: 200, headers: blobHeaders(blob), body };
});
