import { httpHandler } from '../../handler.js';
import { Databases, databaseView } from '../../../data/databases.js';

/** GET /v1/databases (spec 4.12). */
export const handler = httpHandler('data.databases.list', async (_req, { engine, principal }) => {
  const databases = await new Databases(engine.kv, () => engine.clock.now()).list(principal);
  return { status: 200, body: { databases: databases.map(databaseView) } };
});
