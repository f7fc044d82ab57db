import { workspaceHandler } from '../../handler.js';
import { replayDeadLetter } from '../../../events/dead-letters.js';

/** POST .../dead/{event_id}/replay: 202; the same event to the subscriptions that never received it. */
export const handler = workspaceHandler('events.dead.replay', async (req, { engine, workspace }) => {
  await replayDeadLetter(engine, workspace.id, req.params.event_id);
  return { status: 202, body: { event_id: req.params.event_id, replayed: true } };
});
