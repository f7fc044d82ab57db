import { httpHandler } from '../../handler.js';
import { modelListOf, ModelRoutes, type ModelRoute } from '../../../ai/model-routes.js';
import { routesFor } from '../../../ai/key-routes.js';

/**
 * The answer per route list, serialized once: ModelRoutes hands out the same array until its cache
 * refreshes, and clients poll this list often.
 */
const answers = new WeakMap<readonly ModelRoute[], string>();

const modelList = (routes: readonly ModelRoute[]) => JSON.stringify(modelListOf(routes));

function answerOf(routes: readonly ModelRoute[]): string {
  let body = answers.get(routes);
  if (body === undefined) answers.set(routes, (body = modelList(routes)));
  return body;
}

/** GET /v1/models (spec 4.2): the organization's routes as OpenAI-style model entries; a key with its own routes sees only those. */
export const handler = httpHandler('ai.models.list', async (_req, { engine, principal }) => {
  const all = await new ModelRoutes(engine.kv, () => engine.clock.now()).list(principal.organizationId);
  const visible = await routesFor(engine, principal, all);
  // A key with its own list gets a filtered copy each time: a few routes, serialized as they come.
  return { status: 200, headers: { 'content-type': 'application/json' }, body: visible === all ? answerOf(all) : modelList(visible) };
});
