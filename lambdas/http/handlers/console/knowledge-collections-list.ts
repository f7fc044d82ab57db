import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled, listCollections } from '../../../knowledge/collections.js';
import { knowledgeCaller } from './owned.js';

/**
 * GET /console/api/collections[?application_id=]&limit=&cursor=: the live knowledge collections, newest
 * first, as GET /v1/collections lists them for an organization-wide key (its default workspace) or for
 * the application's.
 */
export const handler = httpHandler('console.collections.list', async (req, { engine, principal }) => {
  const caller = await knowledgeCaller(engine, principal, req.query);
  await checkCollectionsEnabled(engine, caller.principal);
  return { status: 200, body: await listCollections(engine, caller.principal, caller.query) };
});
