import { httpHandler } from '../../handler.js';
import { BlobService } from '../../../data/blobs.js';

/** DELETE .../blobs/{sha256}/uploads/{upload_id}: 204; the upload's parts are dropped. */
export const handler = httpHandler('data.uploads.abort', async (req, scope) => {
  await new BlobService(scope).abortUpload(req.params.database, req.params.sha256, req.params.upload_id);
  return { status: 204 };
});
