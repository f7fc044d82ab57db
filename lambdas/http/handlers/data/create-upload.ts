import { httpHandler } from '../../handler.js';
import { BlobService } from '../../../data/blobs.js';

/** POST /v1/databases/{database}/blobs/{sha256}/uploads (spec 4.19): 201 {upload_id}, or 200 {sha256, exists} when stored. */
export const handler = httpHandler('data.uploads.create', async (req, scope) => {
  const answer = await new BlobService(scope).createUpload(req.params.database, req.params.sha256);
  return { status: 'exists' in answer ? 200 : 201, body: answer };
});
