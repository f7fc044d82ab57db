import { httpHandler } from '../../handler.js';
import { BlobService, declaredLength } from '../../../data/blobs.js';

/** PUT /v1/databases/{database}/blobs/{sha256} (spec 4.17): the raw bytes, streamed; 201 stored, 200 already there. */
export const handler = httpHandler('data.blobs.put', async (req, scope) => {
  const { database, sha256 } = req.params;
  const { blob, created } = await new BlobService(scope).put(database, sha256, req.stream(), declaredLength(req.headers), req.headers['content-type']);
  return { status: created ? 201 : 200, body: blob };
});
