import { workspaceHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { DEAD_LIST_LIMIT, listDeadLetters } from '../../../events/dead-letters.js';

/** GET .../dead: only `limit` (1 to 100, default 20); newest first. */
export const handler = workspaceHandler('events.dead.list', async (req, { engine, workspace }) => {
  const { limit: raw, ...rest } = req.query;
  const param = Object.keys(rest)[0];
  if (param !== undefined) throw new PlatformError('invalid_query', 'GET /dead takes only limit.', param);
  const limit = raw === undefined ? DEAD_LIST_LIMIT.default : Number(raw);
  if (raw !== undefined && (!/^\d{1,3}$/.test(raw) || limit < DEAD_LIST_LIMIT.min || limit > DEAD_LIST_LIMIT.max)) {
    throw new PlatformError('invalid_query', `limit is a whole number from ${DEAD_LIST_LIMIT.min} to ${DEAD_LIST_LIMIT.max}.`, 'limit');
  }
  return { status: 200, body: { dead: await listDeadLetters(engine, workspace.id, limit) } };
});
