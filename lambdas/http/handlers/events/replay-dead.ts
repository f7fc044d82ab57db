import { workspaceHandler } from '../../handler.js';
import { replayDeadLetter } from '../../../events/dead-letters.js';

/**
 * POST .../dead/{event_id}/replay: 202; the same event to the subscriptions that never received it and
 * have no replay pending, named in `queued` (empty: nothing was left to queue).
 */
export const handler = workspaceHandler('events.dead.replay', async (req, { engine, workspace }) => {
  const queued = await replayDeadLetter(engine, workspace.id, req.params.event_id);
  return { status: 202, body: { event_id: req.params.event_id, replayed: queued.length > 0, queued } };
});
