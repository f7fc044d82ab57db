import { httpHandler } from '../../handler.js';
import { ModelRoutes, type ModelRoute } from '../../../ai/model-routes.js';

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

/** GET /v1/models (spec 4.2): the organization's routes as OpenAI-style model entries. */
export const handler = httpHandler('ai.models.list', async (_req, { engine, principal }) => {
  const routes = await new ModelRoutes(engine.kv, () => engine.clock.now()).list(principal.organizationId);
  return { status: 200, headers: { 'content-type': 'application/json' }, body: answerOf(routes) };
});
