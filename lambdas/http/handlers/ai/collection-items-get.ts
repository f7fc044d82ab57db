import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { getItem } from '../../../knowledge/items.js';

/** GET /v1/collections/{id}/items/{item_id} (docs/ai/collections.md, "Items"): its status, error, package and chunk count. */
export const handler = httpHandler('ai.collections.items.get', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await getItem(engine, principal, req.params.id, req.params.item_id)) } };
});
