import { httpHandler } from '../../handler.js';
import { Databases, requireServer } from '../../../data/databases.js';
import { Collections, collectionView } from '../../../data/collections.js';

/** GET /v1/databases/{database}/collections/{collection}: the collection as last saved (server credentials). */
export const handler = httpHandler('data.collections.get', async (req, { engine, principal }) => {
  const now = () => engine.clock.now();
  requireServer(principal, 'read schemas');
  const db = await new Databases(engine.kv, now).get(principal, req.params.database);
  const collection = await new Collections(engine.kv, now).require(principal.organizationId, db.key, req.params.collection);
  return { status: 200, body: collectionView(collection) };
});
