import { httpHandler } from '../../handler.js';
import { openDatabase } from '../../../data/records.js';
import { parseListQuery } from '../../../data/record-reads.js';

/** GET .../records: `limit`, `cursor`, `sort`, `filter[field][op]`, `q` (see docs/data/reference.md). */
export const handler = httpHandler('data.records.list', async (req, scope) => {
  const { db, collections, reader } = await openDatabase(scope, req.params.database);
  const collection = await collections.require(scope.principal.organizationId, db.key, req.params.collection);
  return { status: 200, body: await reader.list(collection, parseListQuery(collection, req.query)) };
});
