import { workspaceHandler } from '../../handler.js';
import { Subscriptions, queuedDelivery } from '../../../events/subscriptions.js';
import { workspaceStats } from '../../../events/stats.js';

/** GET /console/api/workspaces/{workspace_id}/stats: the workspace's counters, as GET /v1/…/stats. */
export const handler = workspaceHandler('console.stats.get', async (_req, { engine, workspace }) => {
  const inboxes = (await new Subscriptions(engine).list(workspace.id)).filter((s) => !queuedDelivery(s)).map((s) => s.subscription_id);
  return { status: 200, body: await workspaceStats(engine, workspace.id, inboxes) };
});
