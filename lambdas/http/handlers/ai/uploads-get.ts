import { httpHandler } from '../../handler.js';
import { getUpload } from '../../../knowledge/uploads.js';
import { partDestination } from './uploads-destination.js';

/** GET /v1/uploads/{id}: status, `parts_received`, and where the missing parts go (docs/ai/uploads.md). */
export const handler = httpHandler('ai.uploads.get', async (req, scope) => ({
  status: 200,
  body: await getUpload(scope.engine, scope.principal, req.params.id, partDestination(req, scope)),
}));
