import { workspaceHandler } from '../../handler.js';
import { listDeadLetters, parseDeadListQuery } from '../../../events/dead-letters.js';

/** GET .../dead: only `limit` (1 to 100, default 20); newest first. */
export const handler = workspaceHandler('events.dead.list', async (req, { engine, workspace }) => {
  const { limit } = parseDeadListQuery(req.query);
  return { status: 200, body: { dead: await listDeadLetters(engine, workspace.id, limit) } };
});
