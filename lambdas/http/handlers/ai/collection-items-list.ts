import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { listItems } from '../../../knowledge/items.js';

/** GET /v1/collections/{id}/items?limit=&cursor= (docs/ai/collections.md, "Items"): its items, newest first. */
export const handler = httpHandler('ai.collections.items.list', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: await listItems(engine, principal, req.params.id, req.query) };
});
