import { httpHandler } from '../../handler.js';
import { Databases } from '../../../data/databases.js';
import { Collections, collectionView } from '../../../data/collections.js';

/** GET /console/api/databases/{database}/collections: `{collections}`, each as GET …/collections/{collection} shows it (schema and rules). */
export const handler = httpHandler('console.collections.data.list', async (req, { engine, principal }) => {
  const now = () => engine.clock.now();
  const db = await new Databases(engine.kv, now).get(principal, req.params.database);
  const collections = await new Collections(engine.kv, now).list(principal.organizationId, db.key);
  return { status: 200, body: { collections: collections.map(collectionView) } };
});
