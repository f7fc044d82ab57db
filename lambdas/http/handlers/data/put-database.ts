import { httpHandler } from '../../handler.js';
import { Databases, databaseView } from '../../../data/databases.js';

/** PUT /v1/databases/{database} (spec 4.13): 201 when created, 200 when it already exists. */
export const handler = httpHandler('data.databases.put', async (req, { engine, principal }) => {
  const { database, created } = await new Databases(engine.kv, () => engine.clock.now()).put(principal, req.params.database);
  return { status: created ? 201 : 200, body: databaseView(database) };
});
