import { workspaceHandler } from '../../handler.js';
import { refuseQuery } from './no-query.js';
import { Subscriptions, queuedDelivery } from '../../../events/subscriptions.js';
import { workspaceStats } from '../../../events/stats.js';

/** GET .../stats (spec 4.21 "Stats"): no query; the workspace's counters. */
export const handler = workspaceHandler('events.stats.get', async (req, { engine, workspace }) => {
  refuseQuery(req.query, 'Stats');
  const inboxes = (await new Subscriptions(engine).list(workspace.id)).filter((s) => !queuedDelivery(s)).map((s) => s.subscription_id);
  return { status: 200, body: await workspaceStats(engine, workspace.id, inboxes) };
});
