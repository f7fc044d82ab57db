import { workspaceHandler } from '../../handler.js';
import { Subscriptions } from '../../../events/subscriptions.js';
import { parsePull, pull, requireInbox } from '../../../events/inbox.js';

/** POST .../subscriptions/{subscription_id}/pull: leases messages of a pull or stream subscription. */
export const handler = workspaceHandler('events.subscriptions.pull', async (req, { engine, workspace }) => {
  const { max, leaseSeconds } = parsePull(req.json);
  const s = await new Subscriptions(engine).get(workspace.id, req.params.subscription_id);
  requireInbox(s, 'pulled');
  return { status: 200, body: { messages: await pull(engine, s.subscription_id, max, leaseSeconds) } };
});
