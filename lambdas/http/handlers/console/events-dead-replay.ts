import { workspaceHandler } from '../../handler.js';
import { replayDeadLetter } from '../../../events/dead-letters.js';

/** POST /console/api/workspaces/{workspace_id}/dead/{event_id}/replay: 202 `{event_id, replayed, queued}`, as POST /v1/…/dead/{event_id}/replay. */
export const handler = workspaceHandler('console.dead.replay', async (req, { engine, workspace }) => {
  const queued = await replayDeadLetter(engine, workspace.id, req.params.event_id);
  return { status: 202, body: { event_id: req.params.event_id, replayed: queued.length > 0, queued } };
});
