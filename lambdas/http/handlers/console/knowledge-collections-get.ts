import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled, getCollection } from '../../../knowledge/collections.js';
import { knowledgeCaller } from './owned.js';

/** GET /console/api/collections/{collection_id}[?application_id=]: the collection with its counts and status, as GET /v1/collections/{id} answers. */
export const handler = httpHandler('console.collections.get', async (req, { engine, principal }) => {
  const caller = await knowledgeCaller(engine, principal, req.query);
  await checkCollectionsEnabled(engine, caller.principal);
  return { status: 200, body: { ...(await getCollection(engine, caller.principal, req.params.collection_id)) } };
});
