import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { listChunks } from '../../../knowledge/item-packages.js';

/** GET /v1/collections/{id}/items/{item_id}/chunks?limit=&cursor= (docs/ai/collections.md, "Packages and vectors"): the served package's chunks. */
export const handler = httpHandler('ai.collections.items.chunks', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: await listChunks(engine, principal, req.params.id, req.params.item_id, req.query) };
});
