import { workspaceHandler } from '../../handler.js';
import { Subscriptions } from '../../../events/subscriptions.js';

/** DELETE /console/api/workspaces/{workspace_id}/subscriptions/{subscription_id}: 204; its waiting messages go with it. */
export const handler = workspaceHandler('console.subscriptions.delete', async (req, { engine, workspace }) => {
  await new Subscriptions(engine).delete(workspace.id, req.params.subscription_id);
  return { status: 204 };
});
