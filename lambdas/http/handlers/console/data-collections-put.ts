import { httpHandler } from '../../handler.js';
import { Databases } from '../../../data/databases.js';
import { Collections, collectionView } from '../../../data/collections.js';

/**
 * PUT /console/api/databases/{database}/collections/{collection}: the schema and rules, checked by the
 * Data API's own rules (PUT /v1/…/collections/{collection}): a refusal is its code with `param` naming
 * the field or rule, which the page shows beside it. 201 created, 200 changed or unchanged.
 */
export const handler = httpHandler('console.collections.data.put', async (req, { engine, principal }) => {
  const now = () => engine.clock.now();
  const db = await new Databases(engine.kv, now).get(principal, req.params.database);
  const { collection, created } = await new Collections(engine.kv, now).put(principal, db.key, req.params.collection, req.json);
  return { status: created ? 201 : 200, body: collectionView(collection) };
});
