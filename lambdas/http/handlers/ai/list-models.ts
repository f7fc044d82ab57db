import { httpHandler } from '../../handler.js';
import { ModelRoutes, type ModelRoute } from '../../../ai/model-routes.js';
import { routesFor } from '../../../ai/key-routes.js';

/**
 * The answer per route list, serialized once: ModelRoutes hands out the same array until its cache
 * refreshes, and clients poll this list often.
 */
const answers = new WeakMap<ModelRoute[], string>();

function answerOf(routes: ModelRoute[]): string {
  let body = answers.get(routes);
  if (body === undefined) {
    const data = routes.map((r) => ({ id: r.id, object: 'model', created: r.created, owned_by: r.owned_by, endpoint: r.endpoint }));
    answers.set(routes, (body = JSON.stringify({ object: 'list', data })));
  }
  return body;
}

/** The routes a key with its own list sees, per route list and key (the list object changes when either does). */
const keyViews = new WeakMap<readonly ModelRoute[], Map<string, ModelRoute[]>>();

/** GET /v1/models (spec 4.2): the organization's routes as OpenAI-style model entries; a key with its own routes sees only those. */
export const handler = httpHandler('ai.models.list', async (_req, { engine, principal }) => {
  const all = await new ModelRoutes(engine.kv, () => engine.clock.now()).list(principal.organizationId);
  const visible = await routesFor(engine, principal, all);
  let routes = all;
  if (visible !== all) {
    // One array per route list and key, so that answerOf serializes it once.
    let views = keyViews.get(all);
    if (!views) keyViews.set(all, (views = new Map()));
    const id = visible.map((r) => r.id).join('\0');
    let view = views.get(id);
    if (!view) views.set(id, (view = [...visible]));
    routes = view;
  }
  return { status: 200, headers: { 'content-type': 'application/json' }, body: answerOf(routes) };
});
