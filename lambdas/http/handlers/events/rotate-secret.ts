import { workspaceHandler } from '../../handler.js';
import { Subscriptions } from '../../../events/subscriptions.js';

/** POST .../subscriptions/{subscription_id}/rotate-secret: the new secret, and until when the previous ones sign. */
export const handler = workspaceHandler('events.subscriptions.rotate-secret', async (req, { engine, workspace }) => ({
  status: 200,
  body: await new Subscriptions(engine).rotateSecret(workspace.id, req.params.subscription_id),
}));
