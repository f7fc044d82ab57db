import { httpHandler } from '../../handler.js';
import { Databases } from '../../../data/databases.js';
import { Collections, collectionView } from '../../../data/collections.js';

/** GET /console/api/databases/{database}/collections/{collection}: the collection as last saved (fields, rules, mode). */
export const handler = httpHandler('console.collections.data.get', async (req, { engine, principal }) => {
  const now = () => engine.clock.now();
  const db = await new Databases(engine.kv, now).get(principal, req.params.database);
  const collection = await new Collections(engine.kv, now).require(principal.organizationId, db.key, req.params.collection);
  return { status: 200, body: collectionView(collection) };
});
