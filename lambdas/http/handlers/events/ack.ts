import { workspaceHandler } from '../../handler.js';
import { Subscriptions } from '../../../events/subscriptions.js';
import { ack, parseAck, requireInbox } from '../../../events/inbox.js';

/** POST .../subscriptions/{subscription_id}/ack: {acked, not_acked: [{id, reason}]}, the messages of this subscription removed and the ids that removed none. */
export const handler = workspaceHandler('events.subscriptions.ack', async (req, { engine, workspace }) => {
  const ids = parseAck(req.json);
  const s = await new Subscriptions(engine).get(workspace.id, req.params.subscription_id);
  requireInbox(s, 'acknowledged');
  return { status: 200, body: await ack(engine, workspace.id, s.subscription_id, ids) };
});
