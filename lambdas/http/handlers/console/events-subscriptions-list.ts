import { workspaceHandler } from '../../handler.js';
import { Subscriptions, subscriptionView } from '../../../events/subscriptions.js';

/** GET /console/api/workspaces/{workspace_id}/subscriptions: `{subscriptions}` of the workspace, oldest first, never a secret (another organization's workspace: the Events API's one `403 forbidden`). */
export const handler = workspaceHandler('console.subscriptions.list', async (_req, { engine, workspace }) => ({
  status: 200,
  body: { subscriptions: (await new Subscriptions(engine).list(workspace.id)).map(subscriptionView) },
}));
