import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled, readCollection } from '../../../knowledge/collections.js';
import { parseVectors, storeVectors } from '../../../knowledge/item-packages.js';

/** PUT /v1/collections/{id}/items/{item_id}/vectors {vectors: [{chunk_id, vector}]} (local_vectors; docs/ai/collections.md): stores the client's vectors. */
export const handler = httpHandler('ai.collections.items.vectors', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  // A collection that is gone says so before the body is looked at.
  await readCollection(engine, principal, req.params.id);
  const request = parseVectors(req.json);
  return { status: 200, body: await storeVectors(engine, principal, req.params.id, req.params.item_id, request) };
});
