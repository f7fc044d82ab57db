import { httpHandler } from '../../handler.js';
import { openDatabase } from '../../../data/records.js';
import { etag } from './versions.js';

/** GET .../records/{id}: the record, its version in ETag; 404 record_not_found (also when the view rule hides it). */
export const handler = httpHandler('data.records.get', async (req, scope) => {
  const { db, collections, reader } = await openDatabase(scope, req.params.database);
  const collection = await collections.require(scope.principal.organizationId, db.key, req.params.collection);
  const record = await reader.get(collection, req.params.id);
  if (req.headers['if-none-match'] === etag(record).etag) return { status: 304, headers: etag(record) };
  return { status: 200, headers: etag(record), body: record };
});
