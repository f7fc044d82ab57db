import { workspaceHandler } from '../../handler.js';
import { parseEventLogQuery, recentEvents } from '../../../events/event-log.js';

/**
 * GET /console/api/workspaces/{workspace_id}/events/tail?after=&limit=: the workspace's published
 * events after `after`, oldest first (the Events page's live tail). It reads the stored events and
 * consumes nothing (docs/decisions/console-live-tail.md).
 */
export const handler = workspaceHandler('console.events.tail', async (req, { engine, workspace }) => {
  return { status: 200, body: await recentEvents(engine, workspace.id, parseEventLogQuery(req.query)) };
});
