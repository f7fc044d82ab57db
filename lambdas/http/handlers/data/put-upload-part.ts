import { httpHandler } from '../../handler.js';
import { BlobService, declaredLength } from '../../../data/blobs.js';

/** PUT .../blobs/{sha256}/uploads/{upload_id}/parts/{n}: one part's raw bytes, streamed; 200 {part_number, size, etag}. */
export const handler = httpHandler('data.uploads.part', async (req, scope) => {
  const { database, sha256, upload_id, n } = req.params;
  const part = await new BlobService(scope).uploadPart(database, sha256, upload_id, n, req.stream(), declaredLength(req.headers));
  return { status: 200, body: part };
});
