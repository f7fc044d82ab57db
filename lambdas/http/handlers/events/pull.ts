import { workspaceHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { Subscriptions } from '../../../events/subscriptions.js';
import { parsePull, pull } from '../../../events/inbox.js';

/** POST .../subscriptions/{subscription_id}/pull: leases messages of a pull or stream subscription. */
export const handler = workspaceHandler('events.subscriptions.pull', async (req, { engine, workspace }) => {
  const { max, leaseSeconds } = parsePull(req.json);
  const s = await new Subscriptions(engine).get(workspace.id, req.params.subscription_id);
  if (s.delivery.mode === 'webhook') throw new PlatformError('wrong_delivery_mode', 'A webhook subscription is delivered to its URL; pull works on pull and websocket subscriptions.');
  if (s.delivery.mode === 'eventbridge') throw new PlatformError('wrong_delivery_mode', 'An eventbridge subscription is delivered to its event bus; pull works on pull and websocket subscriptions.');
  return { status: 200, body: { messages: await pull(engine, s.subscription_id, max, leaseSeconds) } };
});
