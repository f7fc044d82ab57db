import { workspaceHandler } from '../../handler.js';
import { Subscriptions, subscriptionView } from '../../../events/subscriptions.js';

/** GET .../subscriptions: every subscription of the workspace, oldest first, never a secret. */
export const handler = workspaceHandler('events.subscriptions.list', async (req, { engine, workspace }) => ({
  status: 200,
  body: { subscriptions: (await new Subscriptions(engine).list(workspace.id)).map(subscriptionView) },
}));
