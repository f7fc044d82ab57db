import { workspaceHandler } from '../../handler.js';
import { listDeadLetters, parseDeadListQuery } from '../../../events/dead-letters.js';

/** GET /console/api/workspaces/{workspace_id}/dead?limit=: `{dead}`, newest first, as GET /v1/…/dead (attempts, last error, replays). */
export const handler = workspaceHandler('console.dead.list', async (req, { engine, workspace }) => {
  const { limit } = parseDeadListQuery(req.query);
  return { status: 200, body: { dead: await listDeadLetters(engine, workspace.id, limit) } };
});
