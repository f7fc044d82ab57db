import { httpHandler } from '../../handler.js';
import { parseStartUpload, startUpload } from '../../../knowledge/uploads.js';
import { partDestination } from './uploads-destination.js';

/**
 * POST /v1/uploads (docs/ai/uploads.md): opens the upload named by the call's X-Operation-Id; 201 with
 * where each part goes, 200 with the same upload when the id already names this file.
 */
export const handler = httpHandler('ai.uploads.create', async (req, scope) => {
  const request = parseStartUpload(req.json);
  const { upload, created } = await startUpload(scope.engine, scope.principal, scope.operationId!, request, partDestination(req, scope));
  return { status: created ? 201 : 200, body: upload };
});
