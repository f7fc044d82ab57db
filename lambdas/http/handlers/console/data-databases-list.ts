import { httpHandler } from '../../handler.js';
import { Databases, databaseView } from '../../../data/databases.js';

/** GET /console/api/databases: `{databases}` as GET /v1/databases lists them for an organization-wide key. */
export const handler = httpHandler('console.databases.list', async (_req, { engine, principal }) => {
  const databases = await new Databases(engine.kv, () => engine.clock.now()).list(principal);
  return { status: 200, body: { databases: databases.map(databaseView) } };
});
