import { httpHandler } from '../../handler.js';
import { checkCollectionsEnabled } from '../../../knowledge/collections.js';
import { listVectorStores } from '../../../ai/openai-compat/vector-stores.js';

/** GET /v1/vector_stores?after=&before=&limit=&order= (docs/ai/openai-compatibility.md): the workspace's cloud collections. */
export const handler = httpHandler('ai.vector_stores.list', async (req, { engine, principal }) => {
  await checkCollectionsEnabled(engine, principal);
  return { status: 200, body: { ...(await listVectorStores(engine, principal, req.query)) } };
});
