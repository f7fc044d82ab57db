import { workspaceHandler } from '../../handler.js';
import { Subscriptions } from '../../../events/subscriptions.js';

/** DELETE .../subscriptions/{subscription_id}: 204; its waiting messages are removed with it. */
export const handler = workspaceHandler('events.subscriptions.delete', async (req, { engine, workspace }) => {
  await new Subscriptions(engine).delete(workspace.id, req.params.subscription_id);
  return { status: 204 };
});
