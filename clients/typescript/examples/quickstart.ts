/**
 * The README's example, run by test/clients/typescript-client.test.ts against `npm start`'s platform:
 * a typed Data client writes and lists records, a typed Events client publishes to a pull subscription,
 * pulls and acknowledges.
 */
import { createDataClient, createEventsClient } from '../src/index.js';

export async function quickstart(env: { dataUrl: string; eventsUrl: string; key: string; workspaceId: string }) {
  const data = createDataClient({ baseUrl: env.dataUrl, credential: env.key });
  await data.PUT('/v1/databases/{database}', { params: { path: { database: 'shop' } } });
  await data.PUT('/v1/databases/{database}/collections/{collection}', {
    params: { path: { database: 'shop', collection: 'orders' } },
    body: { fields: [{ name: 'total', type: 'number', required: true, indexed: true }], rules: { list: '', view: '', create: '', update: '', delete: '' } },
  });
  const { data: order, error } = await data.POST('/v1/databases/{database}/collections/{collection}/records', {
    params: { path: { database: 'shop', collection: 'orders' } },
    body: { total: 42 },
  });
  if (error) throw new Error(`${error.error.code}: ${error.error.message}`);
  const { data: page } = await data.GET('/v1/databases/{database}/collections/{collection}/records', {
    params: { path: { database: 'shop', collection: 'orders' }, query: { sort: '-total', limit: 10 } },
  });

  const events = createEventsClient({ baseUrl: env.eventsUrl, credential: env.key });
  const workspace = { workspace_id: env.workspaceId };
  const { data: subscription } = await events.POST('/v1/workspaces/{workspace_id}/subscriptions', {
    params: { path: workspace },
    body: { types: ['order.*'], delivery: { mode: 'pull' } },
  });
  await events.POST('/v1/workspaces/{workspace_id}/events', {
    params: { path: workspace },
    body: { event: { type: 'order.created', data: { order_id: order.id, total: order.total } } },
  });
  const path = { ...workspace, subscription_id: subscription!.subscription_id };
  const { data: pulled } = await events.POST('/v1/workspaces/{workspace_id}/subscriptions/{subscription_id}/pull', { params: { path }, body: { max: 10 } });
  const { data: acked } = await events.POST('/v1/workspaces/{workspace_id}/subscriptions/{subscription_id}/ack', {
    params: { path },
    body: { ids: pulled!.messages.map((m) => m.event_id) },
  });
  return { order, listed: page!.records.length, pulled: pulled!.messages.map((m) => m.type), acked: acked!.acked };
}
