import * as z from 'zod';
import { httpHandler } from '../../handler.js';
import { parseBody } from '../../../shared/validate.js';
import { BlobService, MAX_PARTS } from '../../../data/blobs.js';

const Body = z
  .object({
    parts: z
      .array(z.object({ part_number: z.number().int(), etag: z.string().min(1).max(1024) }).strict())
      .min(1)
      .max(MAX_PARTS),
    /** Optional: the whole file's size, checked against the listed parts before anything is joined. */
    size: z.number().int().min(0).optional(),
  })
  .strict();

/** POST .../blobs/{sha256}/uploads/{upload_id}/complete: {parts: [{part_number, etag}]} ascending; 201 {sha256, size}. */
export const handler = httpHandler('data.uploads.complete', async (req, scope) => {
  const body = parseBody(Body, req.json, { unknownField: 'unknown_field' });
  const { database, sha256, upload_id } = req.params;
  const { blob, created } = await new BlobService(scope).completeUpload(database, sha256, upload_id, body.parts, body.size);
  return { status: created ? 201 : 200, body: blob };
});
