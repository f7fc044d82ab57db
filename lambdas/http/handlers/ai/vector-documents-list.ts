import { httpHandler } from '../../handler.js';
import { openVectorDatabase } from '../../../vector/databases.js';
import { documentsPage } from '../../../vector/handling.js';

/** GET /v1/vector/documents?scope= (docs/ai/vector.md): the scope's documents, deleted ones left out. */
export const handler = httpHandler('ai.vector.documents.list', async (req, { engine, principal }) => {
  const database = await openVectorDatabase(engine, principal);
  return { status: 200, body: await documentsPage(engine, principal, database, req.query) };
});
