import { workspaceHandler } from '../../handler.js';
import { listDeadLetters, parseDeadListQuery } from '../../../events/dead-letters.js';

/**
 * GET /console/api/workspaces/{workspace_id}/deliveries?limit=: the deliveries that failed every
 * attempt, one row an event with its attempts and last error (docs/decisions/console-resources.md: a
 * completed delivery is only counted in the stats, never stored one by one).
 */
export const handler = workspaceHandler('console.deliveries.list', async (req, { engine, workspace }) => {
  const { limit } = parseDeadListQuery(req.query);
  const dead = await listDeadLetters(engine, workspace.id, limit);
  const deliveries = dead.map((d) => {
    const event = d.event as { event_id: string; type: string };
    return { event_id: event.event_id, type: event.type, status: 'dead', attempts: d.attempts, last_error: d.last_error, dead_at: d.dead_at, replay_count: d.replay_count };
  });
  return { status: 200, body: { deliveries, next_cursor: null } };
});
