import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled, listCollections } from '../../../knowledge/collections.js';

/** GET /v1/collections?limit=&cursor= (docs/ai/collections.md): the workspace's live collections, newest first. */
export const handler = httpHandler('ai.collections.list', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: await listCollections(engine, principal, req.query) };
});
