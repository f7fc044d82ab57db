import { httpHandler } from '../../handler.js';
import { BlobService, parseCompleteUploadBody } from '../../../data/blobs.js';

/** POST .../blobs/{sha256}/uploads/{upload_id}/complete: {parts: [{part_number, etag}]} ascending; 201 {sha256, size}. */
export const handler = httpHandler('data.uploads.complete', async (req, scope) => {
  const body = parseCompleteUploadBody(req.json);
  const { database, sha256, upload_id } = req.params;
  const { blob, created } = await new BlobService(scope).completeUpload(database, sha256, upload_id, body.parts, body.size);
  return { status: created ? 201 : 200, body: blob };
});
