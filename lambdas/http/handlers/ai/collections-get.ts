import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled, getCollection } from '../../../knowledge/collections.js';

/** GET /v1/collections/{id} (docs/ai/collections.md): the collection with its counts and status; 410 once expired. */
export const handler = httpHandler('ai.collections.get', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await getCollection(engine, principal, req.params.id)) } };
});
