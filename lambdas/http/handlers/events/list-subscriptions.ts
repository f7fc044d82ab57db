import { workspaceHandler } from '../../handler.js';
import { Subscriptions, subscriptionView } from '../../../events/subscriptions.js';
import { refuseQuery } from './no-query.js';

/** GET .../subscriptions: every subscription of the workspace, oldest first, never a secret; no query. */
export const handler = workspaceHandler('events.subscriptions.list', async (req, { engine, workspace }) => {
  refuseQuery(req.query, 'Subscription lists');
  return { status: 200, body: { subscriptions: (await new Subscriptions(engine).list(workspace.id)).map(subscriptionView) } };
});
