import { httpHandler } from '../../handler.js';
import { BlobService } from '../../../data/blobs.js';

/** DELETE /v1/databases/{database}/blobs/{sha256} (spec 4.18): 204; records naming the file are not checked. */
export const handler = httpHandler('data.blobs.delete', async (req, scope) => {
  await new BlobService(scope).delete(req.params.database, req.params.sha256);
  return { status: 204 };
});
