import { httpHandler } from '../../handler.js';
import { Databases, databaseView } from '../../../data/databases.js';

/** PUT /console/api/databases/{database}: 201 when created, 200 when it exists, as PUT /v1/databases/{database} (its name rules and codes). */
export const handler = httpHandler('console.databases.put', async (req, { engine, principal }) => {
  const { database, created } = await new Databases(engine.kv, () => engine.clock.now()).put(principal, req.params.database);
  return { status: created ? 201 : 200, body: databaseView(database) };
});
