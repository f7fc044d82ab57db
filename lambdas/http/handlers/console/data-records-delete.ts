import { httpHandler } from '../../handler.js';
import { openDatabase } from '../../../data/records.js';

/** DELETE /console/api/databases/{database}/collections/{collection}/records/{id}: 204, as DELETE /v1/…/records/{id} (relations and rules alike). */
export const handler = httpHandler('console.records.delete', async (req, scope) => {
  const { writer } = await openDatabase(scope, req.params.database);
  await writer.apply([{ op: 'delete', collection: req.params.collection, id: req.params.id }]);
  return { status: 204 };
});
