import { httpHandler } from '../../handler.js';
import { BlobService } from '../../../data/blobs.js';

/** GET /console/api/databases/{database}/blobs?limit=&cursor=: the database's files `{files: [{sha256, size, created_at}], next_cursor}`. */
export const handler = httpHandler('console.files.list', async (req, scope) => ({ status: 200, body: await new BlobService(scope).list(req.params.database, req.query) }));
