import { workspaceHandler } from '../../handler.js';
import { PlatformError } from '../../../shared/errors.js';
import { Subscriptions } from '../../../events/subscriptions.js';
import { ack, parseAck } from '../../../events/inbox.js';

/** POST .../subscriptions/{subscription_id}/ack: {acked, not_acked: [{id, reason}]}, the messages of this subscription removed and the ids that removed none. */
export const handler = workspaceHandler('events.subscriptions.ack', async (req, { engine, workspace }) => {
  const ids = parseAck(req.json);
  const s = await new Subscriptions(engine).get(workspace.id, req.params.subscription_id);
  if (s.delivery.mode === 'webhook') throw new PlatformError('wrong_delivery_mode', 'A webhook subscription is acknowledged by its receiver\'s 2xx.');
  if (s.delivery.mode === 'eventbridge') throw new PlatformError('wrong_delivery_mode', 'An eventbridge subscription is acknowledged by its bus (PutEvents).');
  return { status: 200, body: await ack(engine, workspace.id, s.subscription_id, ids) };
});
