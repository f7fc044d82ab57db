import { httpHandler } from '../../handler.js';
import { Databases } from '../../../data/databases.js';
import { Collections, collectionView } from '../../../data/collections.js';

/** PUT /v1/databases/{database}/collections/{collection} (spec 4.14): 201 created, 200 changed or unchanged. */
export const handler = httpHandler('data.collections.put', async (req, { engine, principal }) => {
  const now = () => engine.clock.now();
  const db = await new Databases(engine.kv, now).get(principal, req.params.database);
  const { collection, created } = await new Collections(engine.kv, now).put(principal, db.key, req.params.collection, req.json);
  return { status: created ? 201 : 200, body: collectionView(collection) };
});
