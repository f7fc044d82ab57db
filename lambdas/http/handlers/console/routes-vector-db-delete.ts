import { workspaceHandler } from '../../handler.js';
import { deleteVectorDatabase, readDatabase } from '../../../vector/databases.js';
import { PlatformError } from '../../../shared/errors.js';
import { adminCall } from './owned.js';

/** DELETE /console/api/workspaces/{workspace_id}/vector-database: the database, now `deleting` (vector routes answer 409 at once; a job removes its passages). */
export const handler = workspaceHandler('console.vector-database.delete', async (_req, { engine, workspace }) => {
  if (!(await readDatabase(engine, workspace.id))) throw new PlatformError('not_found', 'This workspace has no vector database.');
  const { index: _index, ...shown } = await adminCall(() => deleteVectorDatabase(engine, workspace.id));
  return { status: 200, body: shown };
});
