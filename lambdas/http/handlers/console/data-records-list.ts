import { httpHandler } from '../../handler.js';
import { openDatabase } from '../../../data/records.js';
import { parseListQuery } from '../../../data/record-reads.js';

/** GET /console/api/databases/{database}/collections/{collection}/records: `limit`, `cursor`, `sort`, `filter[field][op]`, `q`, the Data API's own list semantics. */
export const handler = httpHandler('console.records.list', async (req, scope) => {
  const { db, collections, reader } = await openDatabase(scope, req.params.database);
  const collection = await collections.require(scope.principal.organizationId, db.key, req.params.collection);
  return { status: 200, body: await reader.list(collection, parseListQuery(collection, req.query)) };
});
