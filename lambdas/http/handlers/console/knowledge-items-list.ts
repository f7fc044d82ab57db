import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { listItems } from '../../../knowledge/items.js';
import { knowledgeCaller } from './owned.js';

/** GET /console/api/collections/{collection_id}/items[?application_id=]&limit=&cursor=: its items with their statuses and errors, newest first. */
export const handler = httpHandler('console.collections.items.list', async (req, { engine, principal }) => {
  const caller = await knowledgeCaller(engine, principal, req.query);
  await checkCollectionsEnabled(engine, caller.principal);
  return { status: 200, body: await listItems(engine, caller.principal, req.params.collection_id, caller.query) };
});
