import * as z from 'zod/mini';
import { workspaceHandler } from '../../handler.js';
import { parseQuery, queryInteger } from '../../../shared/validate.js';
import { Subscriptions } from '../../../events/subscriptions.js';
import { eventKey } from '../../../events/keys.js';
import { DELIVERY_LIST_LIMIT, recentDeliveries } from '../../../events/delivery-log.js';

const querySchema = z.strictObject({ subscription_id: z.string(), limit: queryInteger(DELIVERY_LIST_LIMIT, DELIVERY_LIST_LIMIT.default), cursor: z.optional(z.string()) });

/**
 * GET /console/api/workspaces/{workspace_id}/deliveries?subscription_id=&limit=&cursor=: a
 * subscription's recent push deliveries from the delivery log (delivery-log.ts), newest event first,
 * each with its status (`retrying`, `completed`, `dead`), attempts, last error and times. The
 * subscription is looked up in the workspace first: another workspace's is 404 subscription_not_found.
 */
export const handler = workspaceHandler('console.deliveries.list', async (req, { engine, workspace }) => {
  const q = parseQuery(querySchema, req.query, { takes: 'GET /deliveries takes subscription_id, limit and cursor' });
  await new Subscriptions(engine).get(workspace.id, q.subscription_id);
  const page = await recentDeliveries(engine, workspace.id, q.subscription_id, { limit: q.limit, cursor: q.cursor });
  if (!page.deliveries.length) return { status: 200, body: page };
  // The event's type beside each row (one batch read of the page's events).
  const events = await engine.kv.getMany(page.deliveries.map((d) => eventKey(workspace.id, d.event_id)));
  const deliveries = page.deliveries.map((d, i) => ({ ...d, type: events[i] ? String(events[i]!.type) : null }));
  return { status: 200, body: { deliveries, next_cursor: page.next_cursor } };
});
