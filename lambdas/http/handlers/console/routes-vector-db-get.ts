import { workspaceHandler } from '../../handler.js';
import { readDatabase } from '../../../vector/databases.js';

/** GET /console/api/workspaces/{workspace_id}/vector-database: the workspace's vector database as `vector-db show` shows it, or `{workspace_id, state: "none"}`. */
export const handler = workspaceHandler('console.vector-database.get', async (_req, { engine, workspace }) => {
  const database = await readDatabase(engine, workspace.id);
  if (!database) return { status: 200, body: { workspace_id: workspace.id, state: 'none' } };
  const { index: _index, ...shown } = database;
  return { status: 200, body: shown };
});
